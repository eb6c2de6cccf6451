"""Score-level losses: ``name(scores, targets, *, mask=None, reduction="mean", **hparams)``.

scores (Q, N) similarities, higher = closer; targets (Q, N) bool; mask (Q, N) bool, False =
ignored. "mean" averages over queries with at least one positive; "none" gives (Q,).
"""
from .blackbox_ap import blackbox_ap
from .calibration import calibration
from .fast_ap import fast_ap
from .roadmap import roadmap
from .smooth_ap import smooth_ap
from .soft_bin_ap import soft_bin_ap
from .sup_ap import sup_ap

__all__ = ["smooth_ap", "sup_ap", "calibration", "roadmap", "fast_ap", "soft_bin_ap", "blackbox_ap"]
