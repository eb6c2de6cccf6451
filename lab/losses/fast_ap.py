"""FastAP (Cakir et al., CVPR 2019): AP from soft histograms of squared distances."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.checks import check_chunk_size, check_reduction, check_scores
from ..core.steps import histogram_ap_from_counts, kernel_bins
from .base import RankLoss, reduce
from .engine import with_gradient


def check_num_bins(num_bins: int) -> None:
    if not (isinstance(num_bins, int) and not isinstance(num_bins, bool) and num_bins >= 2):
        raise ValueError(f"num_bins must be an integer >= 2, got {num_bins!r}")


def binned_ap_loss(values: Tensor, targets: Tensor, mask: Tensor, centres: Tensor, width: float,
                   reduction: str, chunk_size: Optional[int]) -> Tensor:
    """1 - histogram AP per query, in chunks of queries. Each value adds its kernel weight to the
    bins around it (a scatter, O(Q * N), not a (Q, N, bins) kernel); the gradient is taken at once:
    autograd from the AP to the (chunk, bins) histograms, then through the kernel by hand."""
    check_chunk_size(chunk_size)
    pos = targets & mask
    if chunk_size is None:  # (chunk, 3, N) tensors of about 1 MB
        chunk_size = max(1, 2**18 // (3 * values.shape[1]))
    need_grad = torch.is_grad_enabled() and values.requires_grad
    num_bins = len(centres)
    losses, grads = [], []
    with torch.no_grad(), torch.autocast(device_type=values.device.type, enabled=False):
        for start in range(0, values.shape[0], chunk_size):
            v = values[start: start + chunk_size]
            p = pos[start: start + chunk_size].to(v.dtype)[:, None, :]
            m = mask[start: start + chunk_size].to(v.dtype)[:, None, :]
            index, weight = kernel_bins(v, centres, width)  # (c, 3, N)
            flat = index.flatten(1)
            h_pos = v.new_zeros(v.shape[0], num_bins).scatter_add_(1, flat, (weight * p).flatten(1))
            h_all = v.new_zeros(v.shape[0], num_bins).scatter_add_(1, flat, (weight * m).flatten(1))
            with torch.enable_grad():
                h_pos.requires_grad_(), h_all.requires_grad_()
                loss = 1.0 - histogram_ap_from_counts(h_pos, h_all, p.sum((1, 2)))
                if need_grad:
                    g_pos, g_all = torch.autograd.grad(loss.sum(), (h_pos, h_all))
            losses.append(loss.detach())
            if need_grad:
                # d weight / d v = -sign(v - c) / width where the weight is > 0 (0 on the hinge, as clamp_min).
                centre = centres.index_select(0, flat.flatten()).view(index.shape)
                slope = (v[:, None, :] - centre).sign_().mul_((weight > 0).to(v.dtype)).div_(-width)
                per_bin = g_pos.gather(1, flat).view_as(weight) * p + g_all.gather(1, flat).view_as(weight) * m
                grads.append((per_bin * slope).sum(1))
    losses = torch.cat(losses)
    if need_grad:
        losses = with_gradient(values, losses, torch.cat(grads))
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
