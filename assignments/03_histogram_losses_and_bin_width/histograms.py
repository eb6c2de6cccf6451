"""Assignment 3 — histogram losses: soft binning and FastAP. Fill in the two functions marked TODO.

Conventions (as in the rest of the lab):
  scores  (Q, N) float tensor, cosine similarity of each query to each item
  targets (Q, N) bool tensor, True if the item is a positive for the query
  mask    (Q, N) bool tensor, False = the item is ignored (e.g. the query itself)
Positives are ``targets & mask``; the valid items are ``mask``.
"""
from __future__ import annotations

import torch
from torch import Tensor


def soft_histogram(values: Tensor, centres: Tensor, width: float, weights: Tensor) -> Tensor:
    """Weighted soft bin counts with the triangular kernel (FastAP supp. C.1, Eq. 22-23) -> (Q, L).

    values (Q, N), weights (Q, N) float, centres (L,), width > 0 (the spacing of the centres):
      h[q, l] = Σ_n weights[q, n] · max(0, 1 − |values[q, n] − centres[l]| / width)
    """
    ### BEGIN SOLUTION
    kernel = (1 - (values[:, :, None] - centres[None, None, :]).abs() / width).clamp_min(0)
    return (kernel * weights[:, :, None]).sum(1)
    ### END SOLUTION


def fast_ap(scores: Tensor, targets: Tensor, mask: Tensor, num_bins: int) -> Tensor:
    """1 − FastAP per query (Cakir et al., Eq. 14) -> (Q,); 0 for a query without positive.

    Distances d = 2 − 2s (squared Euclidean distance of unit vectors, in [0, 4]) are binned
    with ``num_bins`` intervals: num_bins + 1 centres 0, 4/num_bins, ..., 4 and width
    4/num_bins, closest bin first. With h⁺ / h the soft counts of positives / valid items
    and H⁺ / H their cumulative sums:  FastAP = (1/N⁺) Σ_j H⁺_j h⁺_j / H_j, where a bin
    with H_j = 0 contributes 0.
    """
    ### BEGIN SOLUTION
    centres = torch.linspace(0, 4, num_bins + 1, dtype=scores.dtype, device=scores.device)
    dist = 2 - 2 * scores
    pos = (targets & mask).to(scores.dtype)
    h_pos = soft_histogram(dist, centres, 4 / num_bins, pos)
    h_all = soft_histogram(dist, centres, 4 / num_bins, mask.to(scores.dtype))
    big_h_pos, big_h = h_pos.cumsum(1), h_all.cumsum(1)
    # Clamp, not torch.where: where would still back-propagate NaN through 0 / 0.
    fast = (big_h_pos * h_pos / big_h.clamp_min(1e-12)).sum(1) / pos.sum(1).clamp_min(1)
    return torch.where(pos.sum(1) > 0, 1 - fast, torch.zeros_like(fast))
    ### END SOLUTION
