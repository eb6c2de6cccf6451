"""FastAP (Cakir et al., CVPR 2019): AP from soft histograms of squared distances."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.checks import check_reduction, check_scores
from ..core.hparams import NUM_BINS, declare
from .base import RankLoss, reduce
from .engine import binned_ap_loss


def fast_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    num_bins: int = NUM_BINS.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - FastAP (Eq. 14). scores, targets, mask: (Q, N); scores are cosine similarities.

    Squared distances d = 2 - 2s of unit vectors lie in [0, 4]; ``num_bins`` intervals give
    num_bins + 1 bin centres 0, 4/num_bins, ..., 4 and a triangular kernel of width
    4/num_bins (supp. C.1). Few bins = wide bins = a margin (Fig. 4c). Eq. 14 on the soft counts
    is ``lab.core.steps.histogram_ap_from_counts``; ``engine.histograms`` builds the counts.
    Reference: ``tests/reference.py::fast_ap_loop``.
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    NUM_BINS.check(num_bins)
    centres = torch.linspace(0.0, 4.0, num_bins + 1, dtype=scores.dtype, device=scores.device)
    losses = binned_ap_loss(2.0 - 2.0 * scores, targets, mask, centres, 4.0 / num_bins, chunk_size)
    return reduce(losses, (targets & mask).any(1), reduction)


class FastAP(RankLoss):
    """Embedding-level FastAP: autograd from the AP to the soft counts, the kernel's slope by hand."""

    functional = staticmethod(fast_ap)
    declared = declare(NUM_BINS)

    def __init__(self, num_bins: int = NUM_BINS.default, *, include_self: bool = False, reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
