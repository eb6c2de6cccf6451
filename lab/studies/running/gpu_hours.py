"""What a study's runs should cost on a GPU, from MEASURED step times only (``python -m lab study ... --dry-run``).

The measurements are docs/benchmarks.md's, part "GPU" > "Training throughput" (``python -m bench.gpu --sections
train``, one NVIDIA H200, torch 2.11, 2026-11-26; tests/test_study_paper.py keeps these numbers equal to that
table): steps per second *with data*, the images held on the GPU as one uint8 tensor (no DataLoader). A run's
estimate is its training steps at that rate: exactly the measured setting (model, image side, batch, precision),
or the same model at another image side or batch scaled by images x pixels per step (a linear extrapolation, marked
so); a model never measured has no estimate, and says so. Not counted, because not measured: decoding JPEGs from
disk (the papers' datasets load through a DataLoader), the evaluations on the whole test split, start-up.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

SOURCE = ("docs/benchmarks.md, GPU > Training throughput, 'with data' (python -m bench.gpu --sections train; "
          "NVIDIA H200, torch 2.11, 2026-11-26)")


@dataclass(frozen=True)
class StepTime:
    model: str
    image_size: int
    batch_size: int
    amp: str
    steps_per_second: float


MEASURED = (StepTime("resnet50", 224, 128, "bf16", 24.3), StepTime("small_cnn", 32, 256, "none", 108.0))
# The training splits' sizes as published (CUB-200-2011 classes 1-100; SOP's Ebay_train.txt; iNaturalist 2018 with
# Smooth-AP's split set 1, 5,690 classes; the glyphs' training half), for the steps of a run given in epochs.
TRAIN_IMAGES = {"cub": 5864, "sop": 59551, "inaturalist": 325846, "glyphs": 14752}


class Estimate(NamedTuple):
    steps: Optional[int]  # None: a run in epochs of a dataset whose size is not known here
    hours: Optional[float]  # None: no measured step time for this model
    basis: str  # "measured", "scaled", or why there is no estimate


def run_steps(config: dict[str, Any]) -> Optional[int]:
    """A run's training steps: ``steps``, or ``epochs`` x (training images / batch) for a run given in epochs (the
    sampler rounds each class up to a multiple of m: a few more, its exact count needs the data)."""
    epochs = float(config.get("epochs") or 0)
    if epochs <= 0:
        return int(config.get("steps", 1000))
    images = TRAIN_IMAGES.get(config.get("dataset", "glyphs"))
    return math.ceil(epochs * images / int(config.get("batch_size", 128))) if images else None


def _amp(config: dict[str, Any]) -> str:
    """The precision a run trains in on CUDA: "auto" is bf16 for a timm backbone, float32 otherwise."""
    amp = config.get("amp", "auto")
    return ("none" if config.get("model", "small_cnn") == "small_cnn" else "bf16") if amp == "auto" else amp


def estimate(config: dict[str, Any]) -> Estimate:
    """The GPU hours of one run (see the module)."""
    steps = run_steps(config)
    model, side, batch = config.get("model", "small_cnn"), int(config.get("image_size", 32)), \
        int(config.get("batch_size", 128))
    same = [m for m in MEASURED if m.model == model and m.amp == _amp(config)]
    if steps is None:
        return Estimate(None, None, f"no size known for dataset {config.get('dataset')!r}")
    if not same:
        return Estimate(steps, None, f"no measured step time for {model} ({_amp(config)})")
    m = same[0]
    exact = (m.image_size, m.batch_size) == (side, batch)
    per_second = m.steps_per_second * (m.image_size ** 2 * m.batch_size) / (side ** 2 * batch)
    return Estimate(steps, steps / per_second / 3600, "measured" if exact else "scaled")


def basis_line(config: dict[str, Any]) -> str:
    """Which measurement an estimate of ``config`` rests on, in words."""
    e = estimate(config)
    if e.hours is None:
        return e.basis
    m = next(m for m in MEASURED if m.model == config.get("model", "small_cnn") and m.amp == _amp(config))
    how = ", as measured" if e.basis == "measured" else (f", scaled to {config.get('image_size')} px and B = "
                                            f"{config.get('batch_size')} by images x pixels")
    return (f"{m.model} @{m.image_size} px, B = {m.batch_size}, {m.amp}: {m.steps_per_second} steps/s{how}")
