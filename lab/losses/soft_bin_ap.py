"""SoftBinAP, the quantized AP_Q of Revaud et al. (ICCV 2019), binned in similarity space."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.checks import check_reduction, check_scores
from ..core.hparams import NUM_BINS, declare
from .base import RankLoss, reduce
from .engine import binned_ap_loss

# Revaud et al.'s Q, and their bins: in similarity space.
Q_BINS = NUM_BINS.but(default=20, equation="AP_Q: num_bins centres from 1 down to -1, kernel width 2 / (num_bins - 1)")


def soft_bin_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    num_bins: int = Q_BINS.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - AP_Q (Revaud supp. Eq. 1-3). scores, targets, mask: (Q, N), scores in [-1, 1].

    ``num_bins`` centres from 1 down to -1, triangular kernel of width 2 / (num_bins - 1)
    (supp. Eq. 7); precision from cumulative soft counts, recall increments from per-bin ones.
    A query without positive gets loss 0 (the reference returns NaN).
    Reference: ``tests/reference.py::soft_bin_ap_loop``.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    Q_BINS.check(num_bins)
    centres = torch.linspace(1.0, -1.0, num_bins, dtype=scores.dtype, device=scores.device)
    losses = binned_ap_loss(scores, targets, mask, centres, 2.0 / (num_bins - 1), chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)


class SoftBinAP(RankLoss):
    """Embedding-level SoftBinAP (listwise AP_Q loss)."""

    functional = staticmethod(soft_bin_ap)
    declared = declare(Q_BINS)

    def __init__(self, num_bins: int = Q_BINS.default, *, include_self: bool = False, reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
