"""FastAP (Cakir et al., CVPR 2019): AP from soft histograms of squared distances."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.checks import check_chunk_size, check_reduction, check_scores
from ..core.steps import histogram_ap_from_counts, kernel_bins
from .base import RankLoss, reduce
from .engine import eager_gradient
from .pair_sums import TILE_ELEMENTS


def check_num_bins(num_bins: int) -> None:
    if not (isinstance(num_bins, int) and not isinstance(num_bins, bool) and num_bins >= 2):
        raise ValueError(f"num_bins must be an integer >= 2, got {num_bins!r}")


def binned_ap_loss(values: Tensor, targets: Tensor, mask: Tensor, centres: Tensor, width: float,
                   reduction: str, chunk_size: Optional[int]) -> Tensor:
    """1 - histogram AP per query: each value adds its kernel weight to its two nearest bins (a
    scatter, O(Q * N)), in chunks of queries whose gradient is taken at once (``eager_gradient``)."""
    check_chunk_size(chunk_size)
    pos = targets & mask
    if chunk_size is None:
        chunk_size = max(1, TILE_ELEMENTS // values.shape[1])
    num_bins = len(centres)

    def run(v: Tensor, p: Tensor, m: Tensor) -> Tensor:
        index, weight = kernel_bins(v, centres, width)
        index = index.flatten(1)
        h_pos = v.new_zeros(v.shape[0], num_bins).scatter_add(1, index, (weight * p[..., None]).flatten(1))
        h_all = v.new_zeros(v.shape[0], num_bins).scatter_add(1, index, (weight * m[..., None]).flatten(1))
        return 1.0 - histogram_ap_from_counts(h_pos, h_all, p.sum(-1))

    losses = eager_gradient(run, (values, pos, mask), chunk_size)
    return reduce(losses, pos.any(1), reduction)


def fast_ap(
    scores: Tensor,
    targets: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    num_bins: int = 10,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - FastAP (Eq. 14). scores, targets, mask: (Q, N); scores are cosine similarities.

    Squared distances d = 2 - 2s of unit vectors lie in [0, 4]; ``num_bins`` intervals give
    num_bins + 1 bin centres 0, 4/num_bins, ..., 4 and a triangular kernel of width
    4/num_bins (supp. C.1). Few bins = wide bins = a margin (Fig. 4c).
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    check_num_bins(num_bins)
    centres = torch.linspace(0.0, 4.0, num_bins + 1, dtype=scores.dtype, device=scores.device)
    return binned_ap_loss(2.0 - 2.0 * scores, targets, mask, centres, 4.0 / num_bins, reduction, chunk_size)


class FastAP(RankLoss):
    """Embedding-level FastAP. Gradients come from autograd through the soft histogram."""

    functional = staticmethod(fast_ap)
    hparam_ranges = {"num_bins": (2, 100)}

    def __init__(self, num_bins: int = 10, *, include_self: bool = False, reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
