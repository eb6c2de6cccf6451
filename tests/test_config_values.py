"""Every value a run accepts is one it can do what it says with (issue 47, point 7): the values that used to
be accepted and then trained wrongly (grad_clip 0, gamma <= 0, a milestone before the run, lr 0 everywhere),
raised a traceback (epochs inf, seed 2**64) or meant something else silently (epochs nan or -1: steps mode,
eval_max_items -1, out ''), refused in one line at the one door every entry passes: TrainConfig."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import lab.data
from lab.train import Trainer, TrainConfig
from lab.train.optim import lr_factor
from tests._cli import TINY, one_error_line
from tests._train_fixtures import small_model, tiny_config, tiny_splits

# (field, flag text, what the one line says)
REFUSED = [
    ("grad_clip", "0", "grad_clip must be a finite number > 0 (the largest gradient norm; None: no clipping), got 0.0"),
    ("grad_clip", "inf", "grad_clip must be a finite number > 0"),
    ("gamma", "-1", "gamma must be a number in (0, 1] (the learning rate's factor at each milestone), got -1.0"),
    ("gamma", "0", "gamma must be a number in (0, 1]"),
    ("milestones", "-1", "milestones must be finite numbers > 0 (steps into the run), got [-1.0]"),
    ("milestones", "0", "milestones must be finite numbers > 0"),
    ("lr", "0", "lr must be > 0 (or 0 with lr_head > 0: a frozen backbone), got lr=0 and lr_head=None: "
                "nothing would train"),
    ("lr", "inf", "lr must be a finite number >= 0, got inf"),
    ("weight_decay", "inf", "weight_decay must be a finite number >= 0, got inf"),
    ("epochs", "inf", "epochs must be a finite number >= 0 (0: the run is steps long), got inf"),
    ("epochs", "nan", "epochs must be a finite number >= 0 (0: the run is steps long), got nan"),
    ("epochs", "-1", "epochs must be a finite number >= 0 (0: the run is steps long), got -1.0"),
    ("eval_max_items", "-1", "eval_max_items must be an integer >= 1 (None: the whole split), got -1"),
    ("eval_max_items", "0", "eval_max_items must be an integer >= 1"),
    ("out", "", "out must be a folder path or None (nothing is saved), got ''"),
    ("data_root", " ", "data_root must be a folder path or None"),
    ("seed", str(2**64), f"seed must be an integer in [0, 4294967295], got {2**64}"),
    ("seed", "-1", "seed must be an integer in [0, 4294967295], got -1"),
    ("image_size", "4", "image_size must be an integer >= 8 (pixels per side), got 4"),
]


@pytest.fixture
def no_datasets(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a dataset was built before the bad setting was reported")
    monkeypatch.setattr(lab.data, "build_dataset", refuse)


@pytest.mark.parametrize("field, text, message", REFUSED, ids=[f"{f}={t}" for f, t, _ in REFUSED])
def test_the_command_line_refuses_in_one_line_before_any_dataset(field, text, message, capsys, no_datasets):
    line = one_error_line(capsys, "train", *TINY, f"--{field.replace('_', '-')}", text)
    assert line.startswith("python -m lab train: error: ") and message in line


@pytest.mark.parametrize("field, text, message", REFUSED, ids=[f"{f}={t}" for f, t, _ in REFUSED])
def test_every_other_entry_meets_the_same_door(field, text, message):
    # Notebooks and the dashboard build TrainConfig(...) or replace(...): the same check, the same line.
    value = [text] if field == "milestones" else text  # text, as YAML and query strings give it
    with pytest.raises(ValueError) as info:
        TrainConfig(**{field: value})
    assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(TrainConfig(), **{field: value})


def test_what_stays_accepted_means_what_the_docs_say():
    assert TrainConfig(grad_clip=None).grad_clip is None  # the default: no clipping
    assert TrainConfig(lr=0, lr_head=1e-3).lr == 0  # a frozen backbone, a trained head
    assert TrainConfig(epochs=0, steps=3).epochs == 0  # 0: steps mode, as documented
    assert TrainConfig(seed=2**32 - 1, out="run", eval_max_items=1).seed == 2**32 - 1
    assert TrainConfig(scheduler="multistep", milestones=[0.5, 2], epochs=3, gamma=1).milestones == [0.5, 2]


@pytest.mark.parametrize("gamma", [0.1, 0.5, 1.0])
def test_an_accepted_gamma_never_raises_the_learning_rate(gamma):
    # The property behind (0, 1]: the multistep factor never grows and never reaches 0 or below.
    cfg = TrainConfig(scheduler="multistep", milestones=[2, 4], gamma=gamma, steps=6)
    factors = [lr_factor(step, cfg, total_steps=6, milestone_steps=[2, 4]) for step in range(6)]
    assert all(0 < b <= a for a, b in zip(factors, factors[1:]))


def test_an_accepted_grad_clip_leaves_a_gradient_to_learn_from():
    # grad_clip 0 scaled every gradient to 0 (a model that never learns, rc 0); the smallest accepted one
    # leaves the gradient's direction.
    train, test = tiny_splits()
    trainer = Trainer(tiny_config(grad_clip=1e-3, steps=1), train_set=train, test_set=test, model=small_model())
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.step()
    grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
    assert torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])) > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
