"""The histogram engine of FastAP and SoftBinAP: AP from soft histograms, in chunks of queries.

Each value v_j of a query's row adds its triangular-kernel weight to the bins around it, into the
soft counts h+ (positives) and h (kept items); the AP is then ``lab.core.steps.histogram_ap_from_counts``
(FastAP Eq. 14, Revaud's AP_Q). On CUDA the fused kernels of ``fused_histograms`` build the counts
in one pass; elsewhere a scatter of the three nearest bins, one neighbour at a time. Either way it
costs O(Q N) time and memory, never a (Q, N, bins) kernel. The gradient is taken at once, per
chunk: autograd from the AP to the histograms (small), then through the kernel by hand.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ...core.checks import check_chunk_size
from ...core.steps import NEIGHBOURS, histogram_ap_from_counts, nearest_bins, neighbour_bin
from . import fused_histograms
from .blocks import with_gradient
from .plan import plan_for


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
                   chunk_size: Optional[int] = None) -> Tensor:
    """1 - histogram AP of each query -> (Q,), differentiable in ``values`` (Q, N).

    ``centres`` (L,) are the bin centres, best bin first; ``width`` the kernel's half-width.
    """
    check_chunk_size(chunk_size)
    pos = targets & mask
    the_plan = plan_for(*values.shape, values.device, values.dtype, "histograms", chunk_size=chunk_size)
    need_grad = torch.is_grad_enabled() and values.requires_grad
    losses, grads = [], []
    with torch.no_grad(), torch.autocast(device_type=values.device.type, enabled=False):
        for start in range(0, values.shape[0], the_plan.chunk_rows):
            rows = slice(start, start + the_plan.chunk_rows)
            v = values[rows]
            if the_plan.fused:
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
            if need_grad and the_plan.fused:
                grads.append(fused_histograms.histogram_gradients(v, pos[rows], mask[rows], centres, width, g_pos,
                                                                  g_all))
            elif need_grad:
                grads.append(scatter_gradients(v, p, m, width, neighbours, g_pos, g_all))
    losses = torch.cat(losses)
    return with_gradient(values, losses, torch.cat(grads)) if need_grad else losses
