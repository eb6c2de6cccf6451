"""Checkpoints: bit-identical resume, config mismatch, atomic writes (also under SIGKILL), NaN stops,
Ctrl-C saves."""
import os
import signal
import subprocess
import sys

import pytest
import torch

from lab.losses import build_loss
from lab.train import NonFiniteLossError, Trainer, load_checkpoint, save_checkpoint
from tests._train_fixtures import (ScriptedLoss, assert_same_state, resumed_like_straight, small_model,
                                   tiny_config, tiny_splits)

# Cosine schedule with warm-up, cross-batch memory, BatchNorm in train mode, a resume point in
# the middle of the second epoch (6 batches per epoch): every piece of state must round-trip.
RUN = dict(steps=16, scheduler="cosine", warmup_steps=3, xbm_size=40, freeze_bn=False)


def make(loss=None, **changes):
    train, test = tiny_splits()
    cfg = tiny_config(**{**RUN, **changes})
    return Trainer(cfg, train_set=train, test_set=test, model=small_model(freeze_bn=cfg.freeze_bn), loss=loss)


def test_resume_is_bit_identical(tmp_path):
    first = resumed_like_straight(make, tmp_path, stop=9)
    assert (first.epoch, first.position) == (1, 3)
    # metrics.jsonl has each step once, even though the first run's log is appended to
    steps = [line for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"train"' in line]
    assert len(steps) == len({s for s in steps})


def test_checkpoint_holds_config_counters_and_rng(tmp_path):
    make(out=str(tmp_path)).fit(steps=3)
    stored = load_checkpoint(tmp_path / "checkpoint.pt")
    assert stored["step"] == 3 and stored["config"]["xbm_size"] == 40 and "rng" in stored


def test_resume_with_another_config_names_the_keys(tmp_path):
    make(out=str(tmp_path)).fit(steps=2)
    other = make(out=str(tmp_path), lr=0.01, batch_size=24)
    with pytest.raises(ValueError, match=r"different config \(batch_size: 16 in the checkpoint vs 24 now, "
                                         r"lr: 0\.001 in the checkpoint vs 0\.01 now\)"):
        other.resume(tmp_path / "checkpoint.pt")
    longer = make(out=str(tmp_path), steps=40)  # run length may change
    assert longer.resume(tmp_path / "checkpoint.pt").step_count == 2


def test_a_file_that_is_not_a_training_checkpoint_is_refused(tmp_path):
    save_checkpoint({"step": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt is not a RankLab checkpoint .*: it has no format"):
        make().resume(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        make().resume(tmp_path / "missing.pt")


def test_atomic_write_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint({"step": 1}, path)

    def broken_save(obj, f):
        f.write(b"partial bytes")
        raise KeyboardInterrupt  # Ctrl-C in the middle of writing

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"step": 2}, path)
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


def test_nan_stops_at_its_step_and_keeps_the_last_good_checkpoint(tmp_path):
    # Without memory the loss is called once per step: call 5 is step 5.
    trainer = make(loss=ScriptedLoss(build_loss("roadmap"), nan_at=5), out=str(tmp_path), checkpoint_every=2,
                   xbm_size=0)
    with pytest.raises(NonFiniteLossError, match=r"at step 5.*last good checkpoint is .*checkpoint\.pt"):
        trainer.fit()
    saved = load_checkpoint(tmp_path / "checkpoint.pt")
    assert saved["step"] == 4 and trainer.step_count == 4
    for name, value in trainer.model.state_dict().items():  # nothing of step 5 was applied
        assert torch.equal(value, saved["model"][name]), name
    assert all(torch.isfinite(v).all() for v in saved["model"].values() if v.is_floating_point())


def test_nan_state_is_never_saved(tmp_path):
    trainer = make(out=str(tmp_path))
    trainer.save()
    with torch.no_grad():
        next(trainer.model.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteLossError):
        trainer.save()
    assert all(torch.isfinite(v).all() for v in load_checkpoint(tmp_path / "checkpoint.pt")["model"].values()
               if v.is_floating_point())


def test_ctrl_c_saves_the_last_finished_step_and_resumes_on_track(tmp_path):
    straight = make(steps=6)
    straight.fit()
    # memory on: 2 loss calls per step; call 9 is in step 5
    interrupted = make(loss=ScriptedLoss(build_loss("roadmap"), interrupt_at=9), out=str(tmp_path), steps=6)
    with pytest.raises(KeyboardInterrupt):
        interrupted.fit()
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 4
    resumed = make(out=str(tmp_path), steps=6).resume(tmp_path / "checkpoint.pt")
    resumed.fit()
    assert_same_state(straight, resumed)


def test_ctrl_c_during_the_commit_is_held_until_it_is_done():
    from lab.train.checkpoint import deferred_interrupt

    finished = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            finished.append(True)  # still runs: the signal only lands after the block
    assert finished == [True]


# ------------------------------------------------------------------ SIGKILL while checkpointing
KILL_STEPS = 12  # each run's length; it checkpoints after every step
# One process pays for the imports, then forks one run at a time (single-threaded torch: safe to fork)
# and kills it: inside the k-th write, just before the k-th rename, or at a random moment.
DRIVER = r"""
import os, random, signal, sys, time, traceback
import torch
torch.set_num_threads(1)
from lab.train import Trainer
from tests._train_fixtures import small_model, tiny_config, tiny_splits

def trainer(out=None):
    train, test = tiny_splits()
    return Trainer(tiny_config(out=out, steps=%(steps)d, checkpoint_every=1), train_set=train, test_set=test,
                   model=small_model())

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def run(out, mode, at):
    calls = {"save": 0, "replace": 0}
    real_save, real_replace = torch.save, os.replace
    def save(obj, f):  # half of the bytes reach the temporary file, then the process dies
        calls["save"] += 1
        real_save(obj, f)
        if mode == "mid_write" and calls["save"] == at:
            f.truncate(f.tell() // 2)
            f.flush()
            die()
    def replace(src, dst):  # the new file is complete and synced; the rename never happens
        calls["replace"] += str(dst).endswith(os.sep + "checkpoint.pt")  # not config.yaml, checkpoint.prev.pt
        if mode == "before_rename" and calls["replace"] == at:
            die()
        real_replace(src, dst)
    torch.save, os.replace = save, replace
    trainer(out).fit()

reference = trainer()  # the model after every step, without checkpoints (and the imports paid once)
states = {}
for _ in range(%(steps)d):
    reference.step()
    states[reference.step_count] = {k: v.clone() for k, v in reference.model.state_dict().items()}
torch.save(states, sys.argv[2])
rng = random.Random(int(sys.argv[1]))
for spec in sys.argv[3:]:
    out, mode, at = spec.split(",")
    pid = os.fork()
    if pid == 0:
        try:
            run(out, mode, int(at))
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if mode == "random":
        while not os.path.exists(os.path.join(out, "checkpoint.pt")) and os.waitpid(pid, os.WNOHANG) == (0, 0):
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.25))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # it finished first
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # reaped by the WNOHANG poll
        status = 0
    print(out, os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status), flush=True)
""" % {"steps": KILL_STEPS}


@pytest.mark.slow
def test_a_run_killed_at_any_moment_leaves_the_previous_or_the_new_checkpoint(tmp_path):
    """SIGKILL inside a write, just before the rename, and at random moments: checkpoint.pt is
    always complete and equal to the state after one of the steps (never a partial file), and the
    temporary files a killed writer leaves do not disturb resuming, whose next save removes them."""
    from lab.train.checkpoint import check_format

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = [("mid_write", 5), ("mid_write", 1), ("before_rename", 3)] + [("random", 0)] * 4
    specs = [f"{tmp_path / f'run{i}'},{mode},{at}" for i, (mode, at) in enumerate(runs)]
    done = subprocess.run([sys.executable, "-c", DRIVER, "14", str(tmp_path / "states.pt"), *specs], cwd=root,
                          env={**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ends = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    states = torch.load(tmp_path / "states.pt", weights_only=True)

    for i, (mode, at) in enumerate(runs):
        out = tmp_path / f"run{i}"
        killed = str(int(signal.SIGKILL))
        assert ends[str(out)] in ((killed,) if mode != "random" else (killed, "0")), (mode, done.stderr[-3000:])
        path = out / "checkpoint.pt"
        if mode != "random":
            assert list(out.glob(".checkpoint.pt.*.tmp")), "the run died before writing its temporary file"
        if not path.exists():  # killed before its first save finished: no file rather than a partial one
            assert mode == "random" or at == 1
            continue
        saved = check_format(load_checkpoint(path), path)
        step = saved["step"]
        if mode != "random":  # the save that died left the previous checkpoint in place
            assert step == at - 1
        for name, value in states[step].items():
            assert torch.equal(saved["model"][name], value), (mode, step, name)
        # resuming next to the strays works, and the next save removes them
        train, test = tiny_splits()
        resumed = Trainer(tiny_config(out=str(out), steps=KILL_STEPS, checkpoint_every=1), train_set=train,
                          test_set=test, model=small_model()).resume(path)
        resumed.fit(steps=min(step + 1, KILL_STEPS))
        assert load_checkpoint(path)["step"] == min(step + 1, KILL_STEPS)
        assert not list(out.glob(".checkpoint.pt.*.tmp"))
