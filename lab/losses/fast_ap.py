"""FastAP (Cakir et al., CVPR 2019): AP from soft histograms of squared distances."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core import budget
from ..core.checks import check_chunk_size, check_reduction, check_scores
from ..core.hparams import NUM_BINS, declare
from ..core.steps import NEIGHBOURS, histogram_ap_from_counts, nearest_bins, neighbour_bin
from . import fused_histograms
from .base import RankLoss, reduce
from .engine import with_gradient
from .fused_sums import use_fused


# Bytes per (query, item) entry a chunk holds at once on the PyTorch path: the nearest bin (int64), the
# three neighbours' index (int64), centre and weight (kept for the gradient), the weighted counts, the masks,
# the gradient. The fused kernels hold no such temporaries: the masks and the gradient, 8 bytes.
HISTOGRAM_BYTES_PER_ENTRY = 96
FUSED_HISTOGRAM_BYTES_PER_ENTRY = 8
CPU_HISTOGRAM_ENTRIES = 2**18  # 1 MB per (chunk, N) float32 tensor: the chunk's passes stay in cache on a CPU


def histogram_rows(num_items: int, device: torch.device, fused: bool = False) -> int:
    """Queries per chunk of ``binned_ap_loss``: within the memory budget, and cache-sized on a CPU
    (on a GPU with the default budget, one chunk for a whole B = 4096 batch)."""
    per_entry = FUSED_HISTOGRAM_BYTES_PER_ENTRY if fused else HISTOGRAM_BYTES_PER_ENTRY
    entries = budget.budget_bytes(device) // per_entry
    if budget.uses_cache_blocks(device):
        entries = min(entries, CPU_HISTOGRAM_ENTRIES)
    return max(1, entries // max(num_items, 1))


def scatter_histograms(v: Tensor, p: Tensor, m: Tensor, centres: Tensor, width: float) -> tuple[Tensor, Tensor, list]:
    """(h+, h) (c, L) of values v (c, N) with 0/1 weights p, m (c, N), and the neighbours they used."""
    nearest = nearest_bins(v, centres)
    h_pos, h_all = v.new_zeros(v.shape[0], len(centres)), v.new_zeros(v.shape[0], len(centres))
    neighbours = [neighbour_bin(v, nearest, offset, centres, width) for offset in NEIGHBOURS]
    for index, weight, _ in neighbours:
        h_pos.scatter_add_(1, index, weight * p)
        h_all.scatter_add_(1, index, weight * m)
    return h_pos, h_all, neighbours


def scatter_gradients(v: Tensor, p: Tensor, m: Tensor, width: float, neighbours: list, g_pos: Tensor,
                      g_all: Tensor) -> Tensor:
    """d/d v (c, N) of sum_l g+_l h+_l + g_l h_l, through the kernel weights of ``neighbours``."""
    grad = torch.zeros_like(v)
    for index, weight, centre in neighbours:
        # d weight / d v = -sign(v - c) / width where the weight is > 0 (0 on the hinge, as relu).
        slope = (v - centre).sign_().mul_(weight > 0).div_(-width)
        grad += slope.mul_(g_pos.gather(1, index).mul_(p).add_(g_all.gather(1, index).mul_(m)))
    return grad


def binned_ap_loss(values: Tensor, targets: Tensor, mask: Tensor, centres: Tensor, width: float,
                   reduction: str, chunk_size: Optional[int]) -> Tensor:
    """1 - histogram AP per query, in chunks of queries.

    Each value adds its kernel weight to the bins around it. On CUDA the fused kernels of
    ``fused_histograms`` do it in one pass; elsewhere a scatter of the three nearest bins, one
    neighbour at a time. Either way it costs O(Q * N) time and memory, never a (Q, N, bins)
    kernel. The gradient is taken at once, per chunk: autograd from the AP to the histograms
    (small), then through the kernel by hand.
    """
    check_chunk_size(chunk_size)
    pos = targets & mask
    fused = use_fused(values)
    chunk_size = chunk_size or histogram_rows(values.shape[1], values.device, fused)
    need_grad = torch.is_grad_enabled() and values.requires_grad
    losses, grads = [], []
    with torch.no_grad(), torch.autocast(device_type=values.device.type, enabled=False):
        for start in range(0, values.shape[0], chunk_size):
            rows = slice(start, start + chunk_size)
            v = values[rows]
            if fused:
                h_pos, h_all = fused_histograms.histograms(v, pos[rows], mask[rows], centres, width)
            else:
                p, m = pos[rows].to(v.dtype), mask[rows].to(v.dtype)
                h_pos, h_all, neighbours = scatter_histograms(v, p, m, centres, width)
            with torch.enable_grad():
                h_pos.requires_grad_(), h_all.requires_grad_()
                loss = 1.0 - histogram_ap_from_counts(h_pos, h_all, pos[rows].sum(1))
                if need_grad:
                    g_pos, g_all = torch.autograd.grad(loss.sum(), (h_pos, h_all))
            losses.append(loss.detach())
            if need_grad and fused:
                grads.append(fused_histograms.histogram_gradients(v, pos[rows], mask[rows], centres, width, g_pos, g_all))
            elif need_grad:
                grads.append(scatter_gradients(v, p, m, width, neighbours, g_pos, g_all))
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
    num_bins: int = NUM_BINS.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - FastAP (Eq. 14). scores, targets, mask: (Q, N); scores are cosine similarities.

    Squared distances d = 2 - 2s of unit vectors lie in [0, 4]; ``num_bins`` intervals give
    num_bins + 1 bin centres 0, 4/num_bins, ..., 4 and a triangular kernel of width
    4/num_bins (supp. C.1). Few bins = wide bins = a margin (Fig. 4c).
    """
    scores, targets, mask = check_scores(scores, targets, mask)
    check_reduction(reduction)
    NUM_BINS.check(num_bins)
    centres = torch.linspace(0.0, 4.0, num_bins + 1, dtype=scores.dtype, device=scores.device)
    return binned_ap_loss(2.0 - 2.0 * scores, targets, mask, centres, 4.0 / num_bins, reduction, chunk_size)


class FastAP(RankLoss):
    """Embedding-level FastAP. Gradients come from autograd through the soft histogram."""

    functional = staticmethod(fast_ap)
    declared = declare(NUM_BINS)

    def __init__(self, num_bins: int = NUM_BINS.default, *, include_self: bool = False, reduction: str = "mean",
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
