"""Rank losses, embedding level: ``loss = LossClass(**hparams)(embeddings, labels)``.

The score-level forms live in :mod:`lab.losses.functional`.
"""
from __future__ import annotations

from . import functional
from .base import RankLoss
from .blackbox_ap import BlackBoxAP
from .calibration import CalibrationLoss
from .fast_ap import FastAP
from .roadmap import ROADMAP
from .smooth_ap import SmoothAP
from .soft_bin_ap import SoftBinAP
from .sup_ap import SupAP

LOSSES: dict[str, type[RankLoss]] = {
    "smooth_ap": SmoothAP,
    "sup_ap": SupAP,
    "calibration": CalibrationLoss,
    "roadmap": ROADMAP,
    "fast_ap": FastAP,
    "soft_bin_ap": SoftBinAP,
    "blackbox_ap": BlackBoxAP,
}


def build_loss(name: str, **hparams) -> RankLoss:
    """The loss registered as ``name`` (see ``LOSSES``), built with ``hparams``."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of: {', '.join(sorted(LOSSES))}")
    return LOSSES[name](**hparams)


__all__ = ["functional", "RankLoss", "LOSSES", "build_loss", *[cls.__name__ for cls in LOSSES.values()]]
