"""The accepted values of every :class:`lab.train.TrainConfig` field but the loss's hyper-parameters.

Checked once, as a config is built (``TrainConfig(...)``, ``from_dict``, ``dataclasses.replace``), so the
command line, recipes, notebooks and the dashboard all meet the same rules. Each refusal is one line naming
the field, what it accepts and, where a value would run without an error but wrongly, what it would do:
``grad_clip=0`` would zero every gradient, ``gamma=-1`` turn training into gradient ascent after the first
milestone, ``epochs=nan`` silently mean "use steps".

Sizes whose cost depends on the machine (image_size, embed_dim, batch sizes) are checked against its
memory where they are allocated (:mod:`lab.train.footprint`), not here: a config read back from a bigger
machine's run must still load.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

SEED_MAX = 2**32 - 1  # numpy's seed range; torch takes 64 bits, but the run also seeds numpy
MIN_IMAGE_SIZE = 8  # lab.data.build_transforms' minimum (the small CNN pools 3 times)


def is_number(value: Any) -> bool:
    """A real number that is not a bool (True would silently mean 1)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def finite_at_least(name: str, value: Any, low: float, *, strict: bool = False, meaning: str = "") -> None:
    """``value`` is a finite number >= low (> low when ``strict``), else one line naming ``name``."""
    ok = is_number(value) and math.isfinite(value) and (value > low if strict else value >= low)
    if not ok:
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {low:g}{meaning}, got {value!r}")


def integer_at_least(name: str, value: Any, low: int, meaning: str = "") -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
        raise ValueError(f"{name} must be an integer >= {low}{meaning}, got {value!r}")


def check_fields(cfg: Any, choices: Mapping[str, tuple]) -> None:
    """Every field of ``cfg`` (already converted to its declared type) against its accepted values."""
    for name, allowed in choices.items():
        if getattr(cfg, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(cfg, name)!r}")
    for name in ("batch_size", "m", "embed_dim", "eval_batch_size", "probe_batches", "log_every"):
        integer_at_least(name, getattr(cfg, name), 1)
    integer_at_least("image_size", cfg.image_size, MIN_IMAGE_SIZE, " (pixels per side)")
    if cfg.batch_size % cfg.m:
        raise ValueError(f"batch_size ({cfg.batch_size}) must be divisible by m ({cfg.m}), the images "
                         f"per class: e.g. batch_size={cfg.batch_size - cfg.batch_size % cfg.m or cfg.m}")
    _check_length(cfg)
    _check_optimisation(cfg)
    for name in ("xbm_size", "xbm_start", "warmup_steps", "checkpoint_every", "eval_every"):
        integer_at_least(name, getattr(cfg, name), 0)
    for name, meaning in (("num_workers", " (None: chosen for the device)"), ("stage_size", " (None: off)"),
                          ("eval_max_items", " (None: the whole split)")):
        if getattr(cfg, name) is not None:
            integer_at_least(name, getattr(cfg, name), 0 if name == "num_workers" else 1, meaning)
    if not (isinstance(cfg.seed, int) and not isinstance(cfg.seed, bool) and 0 <= cfg.seed <= SEED_MAX):
        raise ValueError(f"seed must be an integer in [0, {SEED_MAX}], got {cfg.seed!r}")
    for name, none in (("out", "nothing is saved"), ("data_root", "the dataset's default place")):
        value = getattr(cfg, name)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise ValueError(f"{name} must be a folder path or None ({none}), got {value!r}")
    for name in ("dataset_kwargs", "loss_kwargs"):
        if not isinstance(getattr(cfg, name), Mapping):
            raise ValueError(f"{name} must be a mapping of names to values (e.g. {{tau: 0.01}}), "
                             f"got {type(getattr(cfg, name)).__name__} {getattr(cfg, name)!r}")


def _check_length(cfg: Any) -> None:
    finite_at_least("epochs", cfg.epochs, 0, meaning=" (0: the run is steps long)")
    integer_at_least("steps", cfg.steps, 0)
    if cfg.epochs == 0 and cfg.steps < 1:
        raise ValueError(f"steps must be >= 1 when epochs is 0, got steps={cfg.steps}")


def _check_optimisation(cfg: Any) -> None:
    for name in ("lr", "lr_head", "lr_loss", "weight_decay", "xbm_weight"):
        if getattr(cfg, name) is not None:
            finite_at_least(name, getattr(cfg, name), 0)
    head = cfg.lr if cfg.lr_head is None else cfg.lr_head
    if cfg.lr == 0 and head == 0:
        raise ValueError(f"lr must be > 0 (or 0 with lr_head > 0: a frozen backbone), got lr=0 and "
                         f"lr_head={cfg.lr_head!r}: nothing would train")
    if cfg.grad_clip is not None:  # 0 would scale every gradient to 0: the model would never learn
        finite_at_least("grad_clip", cfg.grad_clip, 0, strict=True,
                        meaning=" (the largest gradient norm; None: no clipping)")
    # gamma multiplies the learning rate at each milestone: <= 0 would reverse or stop training
    if not (is_number(cfg.gamma) and 0 < cfg.gamma <= 1):
        raise ValueError(f"gamma must be a number in (0, 1] (the learning rate's factor at each milestone), "
                         f"got {cfg.gamma!r}")
    unit = "epochs" if cfg.epochs > 0 else "steps"
    for milestone in cfg.milestones:
        if not (is_number(milestone) and math.isfinite(milestone) and milestone > 0):
            raise ValueError(f"milestones must be finite numbers > 0 ({unit} into the run), "
                             f"got {list(cfg.milestones)!r}")
    if sorted(cfg.milestones) != list(cfg.milestones):
        raise ValueError(f"milestones must be increasing, got {cfg.milestones!r}")
