"""Run folders protect their runs (issue 34, "Data lost", defects 1-4): another run is refused, one
writer at a time (two real processes), temporary files owned per process, the log repaired on resume,
checkpoints verified by their sha256 with the previous one kept to fall back on."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab.cli import main
from lab.train import Trainer, load_checkpoint, save_checkpoint
from tests._train_fixtures import small_model, tiny_config, tiny_splits

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dataset", "glyphs", "--dataset-kwargs", "num_classes=12", "instances_per_class=4", "--batch-size", "16",
        "--m", "4", "--embed-dim", "16", "--eval-backend", "torch", "--no-progress", "--device", "cpu",
        "--eval-every", "0"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def run(capsys, *argv) -> str:
    main([str(a) for a in argv])
    return capsys.readouterr().err


def fails(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    assert info.value.code == 2
    return capsys.readouterr().err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".lock"}


# ------------------------------------------------------------------ defect 1: another run is refused
def test_a_new_run_on_a_folder_holding_another_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "runA"
    run(capsys, "train", *TINY, "--loss", "roadmap", "--seed", 1, "--steps", 3, "--out", out)
    before = snapshot(out)
    err = fails(capsys, "train", *TINY, "--loss", "smooth_ap", "--seed", 2, "--steps", 2, "--out", out)
    assert err.count("\n") == 1 and f"--out {out} holds another run (loss roadmap, seed 1, 3 steps)" in err
    assert "--resume" in err and "--overwrite" in err
    assert snapshot(out) == before  # nothing of the old run touched
    assert "give one of them" in fails(capsys, "train", *TINY, "--resume", "--overwrite", "--out", out)

    run(capsys, "train", *TINY, "--loss", "smooth_ap", "--seed", 2, "--steps", 2, "--log-every", 1, "--out", out,
        "--overwrite")
    assert load_checkpoint(out / "checkpoint.pt")["config"]["loss"] == "smooth_ap"
    assert "loss: smooth_ap" in (out / "config.yaml").read_text()
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]  # the old run's lines went with it
    assert not (out / "checkpoint.prev.pt").exists()  # the old run's kept checkpoint too


def test_the_trainer_from_python_follows_the_same_rule(tmp_path):
    from lab.train.run_folder import RunFolderError

    train, test = tiny_splits()

    def make(**changes):
        overwrite = changes.pop("overwrite", False)
        return Trainer(tiny_config(out=str(tmp_path), **changes), train_set=train, test_set=test, model=small_model(),
                       overwrite=overwrite)

    make(loss="roadmap", seed=1, steps=2).fit()
    before = snapshot(tmp_path)
    with pytest.raises(RunFolderError, match=r"holds another run \(loss roadmap, seed 1, 2 steps\)"):
        make(loss="smooth_ap", seed=2, steps=2).fit()
    assert snapshot(tmp_path) == before
    resumed = make(loss="roadmap", seed=1, steps=3).resume(tmp_path / "checkpoint.pt")
    assert resumed.fit()["loss"] > 0 and load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 3
    make(loss="smooth_ap", seed=2, steps=1, overwrite=True).fit()
    assert load_checkpoint(tmp_path / "checkpoint.pt")["config"]["loss"] == "smooth_ap"


# ------------------------------------------------------------------ defect 2: one writer, owned temporary files
HOLDER = r"""
import sys
from lab.train import Trainer
from tests._train_fixtures import small_model, tiny_config, tiny_splits
train, test = tiny_splits()
trainer = Trainer(tiny_config(out=sys.argv[1], steps=2), train_set=train, test_set=test, model=small_model())
trainer.step()
trainer.save()  # the folder is locked from the first write until close() or the process ends
print("locked", flush=True)
sys.stdin.readline()
"""


@pytest.mark.slow
def test_a_second_process_on_a_locked_folder_gets_one_line_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=ROOT, env=ENV, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n", holder.stderr.read()
        before = snapshot(out)
        for extra in (["--resume"], ["--overwrite"]):
            second = subprocess.run([sys.executable, "-m", "lab", "train", "--out", str(out), *extra, *TINY,
                                     "--steps", "2"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
            assert second.returncode == 2, second.stderr
            assert second.stderr.splitlines() == [
                f"python -m lab train: error: {out} is in use by another run (pid {holder.pid} holds {out / '.lock'}): "
                "wait for it to end, or choose another --out"]
        assert snapshot(out) == before
    finally:
        holder.communicate("\n", timeout=120)
    assert holder.returncode == 0
    done = subprocess.run([sys.executable, "-m", "lab", "train", "--out", str(out), "--overwrite", *TINY, "--steps",
                           "1"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr  # the holder is gone: the lock went with it
    assert load_checkpoint(out / "checkpoint.pt")["config"]["dataset"] == "glyphs"


WRITER = r"""
import sys, torch
from lab.train import save_checkpoint
state = {"step": int(sys.argv[2]), "weights": torch.full((20_000,), float(sys.argv[2]))}
for _ in range(int(sys.argv[3])):
    save_checkpoint(state, sys.argv[1])
"""


@pytest.mark.slow
def test_two_processes_saving_one_checkpoint_never_delete_each_others_temporary_file(tmp_path):
    path = tmp_path / "checkpoint.pt"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(k), "150"], cwd=ROOT, env=ENV,
                                stderr=subprocess.PIPE, text=True) for k in (1, 2)]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors  # main: FileNotFoundError on '.checkpoint.pt.*.tmp'
    assert load_checkpoint(path)["step"] in (1, 2)


def test_strays_of_a_live_process_stay_and_those_of_a_dead_one_go(tmp_path):
    path = tmp_path / "checkpoint.pt"
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    live_tmp = tmp_path / f".checkpoint.pt.{sleeper.pid}.0a1b2c3d.tmp"
    dead_tmp = tmp_path / f".checkpoint.pt.{int(dead.stdout)}.0a1b2c3d.tmp"
    try:
        live_tmp.write_bytes(b"being written")
        dead_tmp.write_bytes(b"left by a killed writer")
        save_checkpoint({"step": 1}, path)
        assert live_tmp.exists() and not dead_tmp.exists()
    finally:
        sleeper.communicate(b"\n", timeout=60)
    save_checkpoint({"step": 2}, path)
    assert not live_tmp.exists() and load_checkpoint(path)["step"] == 2


# ------------------------------------------------------------------ defect 3: the log on resume
def test_a_log_line_cut_short_is_cut_off_on_resume_keeping_a_backup(tmp_path, capsys):
    out = tmp_path / "run"
    run(capsys, "train", *TINY, "--steps", 2, "--log-every", 1, "--out", out)
    log = out / "metrics.jsonl"
    with open(log, "a") as f:
        f.write('{"kind": "train", "step": 3, "loss": 0.')  # a crash or a full disk mid-append
    original = log.read_bytes()
    with pytest.warns(RuntimeWarning, match=f"{log}: its last line was cut short"):
        run(capsys, "train", "--resume", "--out", out, "--steps", 3, "--no-progress")
    assert (out / "metrics.jsonl.bak").read_bytes() == original
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert steps == [1, 2, 3]


@pytest.mark.parametrize("line, why", [('{"kind": "train", "loss": 0.5}', 'a record without an integer "step"'),
                                       ('{"kind": "train", "st', "not a JSON record")])
def test_a_damaged_log_line_is_one_line_naming_the_file_and_line(tmp_path, capsys, line, why):
    out = tmp_path / "run"
    run(capsys, "train", *TINY, "--steps", 2, "--log-every", 1, "--out", out)
    log = out / "metrics.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0], line, *lines[1:]]) + "\n")
    err = fails(capsys, "train", "--resume", "--out", out, "--steps", 3, "--no-progress")
    assert err.startswith(f"python -m lab train: error: {log}, line 2: {why}") and err.count("\n") == 1
    with pytest.raises(ValueError, match=f"line 2: {why}"):  # the Trainer itself refuses it too
        Trainer.from_checkpoint(out / "checkpoint.pt")


# ------------------------------------------------------------------ defect 4: checksums, the previous checkpoint
def zero_inside_a_tensor(path: Path, tensor: torch.Tensor, size: int = 4096) -> None:
    """4 KB of zeros over ``tensor``'s bytes in the file (torch stores them uncompressed)."""
    data = bytearray(path.read_bytes())
    where = data.find(tensor.numpy().tobytes()[:64])
    assert where > 0
    data[where : where + size] = bytes(size)
    path.write_bytes(bytes(data))


def test_a_damaged_checkpoint_is_refused_and_resume_falls_back_to_the_previous(tmp_path, capsys):
    out = tmp_path / "run"
    run(capsys, "train", *TINY, "--steps", 3, "--checkpoint-every", 1, "--out", out)
    path, previous = out / "checkpoint.pt", out / "checkpoint.prev.pt"
    assert load_checkpoint(previous)["step"] == 2  # the last 2 checkpoints are kept
    state = load_checkpoint(path)
    moment = next(v["exp_avg"] for v in state["optimizer"]["state"].values() if v["exp_avg"].numel() >= 1024)
    zero_inside_a_tensor(path, moment)  # Adam's state: the damage main resumed from with rc 0
    with pytest.raises(ValueError) as info:
        load_checkpoint(path)
    assert str(info.value) == (f"{path} is damaged: its values do not match the sha256 written with them (a disk, "
                               "copy or storage error changed the file)")
    assert "damaged" in fails(capsys, "eval", "--checkpoint", path)

    with pytest.warns(RuntimeWarning, match=f"resuming from the previous checkpoint {previous} \\(step 2\\)"):
        err = run(capsys, "train", "--resume", "--out", out, "--steps", 4, "--no-progress")
    assert "resumed" in err
    assert load_checkpoint(path)["step"] == 4 and load_checkpoint(previous)["step"] == 3  # the damaged one is gone
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))  # the log went back to step 2 with the checkpoint


def test_no_usable_checkpoint_names_both_files(tmp_path, capsys):
    out = tmp_path / "run"
    run(capsys, "train", *TINY, "--steps", 2, "--checkpoint-every", 1, "--out", out)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        data = (out / name).read_bytes()
        (out / name).write_bytes(data[: len(data) // 2])
    err = fails(capsys, "train", "--resume", "--out", out, "--steps", 3)
    assert err.count("\n") == 1 and f"{out / 'checkpoint.pt'} is not a RankLab checkpoint" in err
    assert f"the previous checkpoint is unusable too: {out / 'checkpoint.prev.pt'}" in err
