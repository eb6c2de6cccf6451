"""Same seed, same run, whatever else runs: a run draws from generators it owns (lab.train.randomness).

The dashboard trains every page's runs in threads of one process: a run that drew from torch's
process-wide generator began elsewhere when another started beside it (issue 46: R@1 0.4825 at step 0
instead of 0.4025). Each run here is compared bit for bit with the same run trained alone.
"""
import threading

import numpy as np
import pytest
import torch
from PIL import Image

import lab.models
from lab.dashboard import Settings, to_configs
from lab.losses import build_loss
from lab.train import TrainConfig, Trainer
from lab.train.checkpoint import rng_state
from lab.train.randomness import RunRandom
from tests._train_fixtures import DropoutMLP, tiny_config, tiny_splits

STEPS = 3


def image_folder(root):
    """8 classes x 6 random RGB images: the "folder" dataset, trained with the papers' random crops and flips."""
    rs = np.random.RandomState(0)
    for c in range(8):
        for k in range(6):
            path = root / f"class{c}" / f"{k}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rs.randint(0, 255, (40, 48, 3), dtype=np.uint8)).save(path)
    return root


def runs(tmp_path):
    """Builders of four runs that draw at random in every way a run can: initial weights (a CNN, a
    loss's proxies), torchvision augmentations, dropout. The dropout model is made here, once per
    call, in this thread: the runs' draws are the question, not the test's."""
    glyphs = Settings(classes=12, batch_size=16, steps=40)
    folder = TrainConfig(dataset="folder", data_root=str(image_folder(tmp_path / "folder")), image_size=32,
                         batch_size=8, m=2, steps=5, eval_every=0, progress=False, device="cpu", probe_batches=1,
                         eval_backend="torch")
    train, test = tiny_splits()
    dropout = DropoutMLP()
    return [lambda: Trainer(to_configs(glyphs)[0]),
            lambda: Trainer(to_configs(glyphs.replace(loss="proxy_dg", seed=3))[0]),
            lambda: Trainer(folder),
            lambda: Trainer(tiny_config(seed=5), train_set=train, test_set=test, model=dropout,
                            loss=build_loss("roadmap"))]


def trained(trainer: Trainer, before_step=lambda: None) -> dict:
    losses = []
    for _ in range(STEPS):
        before_step()
        losses.append(float(trainer.step()["loss"]))
    return {"losses": losses, "weights": {k: v.clone() for k, v in trainer.model.state_dict().items()},
            "loss_state": {k: v.clone() for k, v in trainer.loss_fn.state_dict().items()}}


def same(a: dict, b: dict) -> bool:
    return a["losses"] == b["losses"] and all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"]) \
        and all(torch.equal(a["loss_state"][k], b["loss_state"][k]) for k in a["loss_state"])


def test_four_runs_started_together_in_threads_are_each_the_run_alone_bit_for_bit(tmp_path, monkeypatch):
    alone = [trained(build()) for build in runs(tmp_path / "alone")]
    builders = runs(tmp_path / "together")
    # Together: every run has taken its seed before any builds its model, and they step side by side.
    started = threading.Barrier(3)  # the glyph runs and the folder run build a small CNN in Trainer()
    build_model = lab.models.build_model

    def build_together(*args, **kwargs):
        started.wait(timeout=120)
        return build_model(*args, **kwargs)

    monkeypatch.setattr(lab.models, "build_model", build_together)
    stepping = threading.Barrier(len(builders))
    results, errors = [None] * len(builders), []

    def train(i):
        try:
            trainer = builders[i]()
            results[i] = trained(trainer, lambda: stepping.wait(timeout=120))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            stepping.abort()
            started.abort()

    threads = [threading.Thread(target=train, args=(i,)) for i in range(len(builders))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    moved = [i for i, (a, b) in enumerate(zip(alone, results)) if not same(a, b)]
    assert moved == [], f"runs {moved} trained otherwise beside the others than alone"


def test_a_run_neither_reads_nor_moves_the_process_wide_generators(tmp_path):
    build = runs(tmp_path)[2]  # random crops and flips at every step
    torch.manual_seed(0)
    alone = trained(build())
    torch.manual_seed(12345)  # another process-wide state: the run does not read it
    trainer = build()
    assert same(alone, trained(trainer, lambda: torch.rand(7)))  # someone else's draws between its steps
    state = torch.get_rng_state()
    trainer.step()
    assert torch.equal(torch.get_rng_state(), state)  # nor does a step move it


def test_a_runs_generators_start_as_the_process_wide_ones_seeded_with_its_seed():
    """The layout and the values a checkpoint stored before (lab.train.checkpoint.rng_state after
    seed_everything): checkpoints written before the runs owned their generators still resume."""
    from lab.train.checkpoint import seed_everything
    from lab.train.checkpoint import state_digest

    seed_everything(77)
    expected = rng_state()
    assert state_digest(RunRandom(77).state()) == state_digest(expected)
    owner = RunRandom(77)
    with owner.owned():
        a = (torch.rand(3), torch.randn(2, 2), torch.randint(0, 9, (4,)), torch.empty(5).uniform_(),
             torch.nn.functional.dropout(torch.ones(8), 0.5))
    seed_everything(77)
    b = (torch.rand(3), torch.randn(2, 2), torch.randint(0, 9, (4,)), torch.empty(5).uniform_(),
         torch.nn.functional.dropout(torch.ones(8), 0.5))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert torch.equal(owner.torch.get_state(), torch.get_rng_state())


@pytest.mark.parametrize("draw", ["dropout", "init"])
def test_a_draw_in_another_thread_never_reaches_a_run(draw):
    owner, reference = RunRandom(3), RunRandom(3)
    inside, release = threading.Event(), threading.Event()

    def other():
        inside.wait(timeout=60)
        for _ in range(50):  # the process-wide generator, drawn while the run's block is open
            torch.rand(100)
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with owner.owned():
        first = torch.nn.functional.dropout(torch.ones(64), 0.5) if draw == "dropout" else torch.nn.Linear(8, 8).weight
        inside.set()
        release.wait(timeout=60)
        second = torch.nn.functional.dropout(torch.ones(64), 0.5) if draw == "dropout" else torch.nn.Linear(8, 8).weight
    t.join()
    with reference.owned():
        expected = [torch.nn.functional.dropout(torch.ones(64), 0.5) if draw == "dropout"
                    else torch.nn.Linear(8, 8).weight for _ in range(2)]
    assert torch.equal(first, expected[0]) and torch.equal(second, expected[1])
