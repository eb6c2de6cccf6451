"""Sums over items of a step surrogate of score differences: the inner loop of every rank loss.

For each query row and anchor k (a positive), ``S_k = sum_j f(s_j - s_k)`` over the items j of
the row, f = sigma(t / tau) (SmoothAP) or H^- (SupRank Eq. 4). Items left out of a sum carry the
score -inf: f(-inf) = 0 and so is its derivative, so no weight vector is needed. The (queries,
anchors, items) block is cut into tiles, and each tile goes through a few in-place passes
(difference, scale, sigmoid, row sum). The caller's plan sizes the tiles (``plan.Plan.tile_entries``):
cache-sized on a CPU, the whole block on an accelerator, since there every pass is a kernel launch.
The gradient is analytic, sigma' = sigma (1 - sigma) / tau, taken on the stored
sigmoids, or on recomputed ones when the block is larger than the caller's memory budget.

This is the PyTorch path and the reference of the fused kernels (``fused_sums``), which compute
the same sums on CUDA without storing any tile.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor

from .plan import CPU_TILE_ENTRIES


def tiles(rows: int, anchors: int, items: int, limit: int = CPU_TILE_ENTRIES) -> list[tuple[int, int, int, int]]:
    """(q0, q1, p0, p1) tiles of a (rows, anchors, items) block, each at most ``limit`` entries
    (or one anchor of one row when a single row of items is wider)."""
    per_row = anchors * items
    if per_row <= limit:
        step = max(1, limit // max(per_row, 1))
        return [(q, min(q + step, rows), 0, anchors) for q in range(0, rows, step)]
    step = max(1, limit // items)
    return [(q, q + 1, p, min(p + step, anchors)) for q in range(rows) for p in range(0, anchors, step)]


@functools.lru_cache(maxsize=64)
def h_minus_constants(delta: float, tau: float, dtype: torch.dtype) -> tuple[float, float]:
    """(delta rounded to ``dtype``, the threshold of h_minus's comparison t <= delta; sigma (1 - sigma) of
    delta / tau in ``dtype``). Host numbers, computed once per (delta, tau, dtype), not once per block."""
    rounded = torch.tensor(delta, dtype=dtype)
    at_delta = rounded.div(tau).sigmoid()
    return float(rounded), float(at_delta * (1 - at_delta))


class ExactParts:
    """The parts of H^-(t) without sigmoid (SupRank Eq. 4): 0.5 [t >= 0] + rho [t > delta] (t - delta).

    Per tile and per anchor, the number of items below it and the excess sum_j [t > delta] (t - delta),
    with float passes only (the sign of a clamped difference), as in ``h_minus`` where t <= delta
    picks the sigmoid branch.
    """

    def __init__(self, anchors: Tensor, delta: float, tile_size: int) -> None:
        self.delta = delta
        self.below = torch.zeros_like(anchors)  # minus #{j : t < 0}
        self.excess = torch.zeros_like(anchors)  # sum_j [t > delta] (t - delta)
        self.scratch = anchors.new_empty(tile_size)

    def add(self, t: Tensor, tile: tuple[int, int, int, int]) -> Tensor:
        """Count one tile of differences t; returns [t > delta] as 0/1 (in a buffer reused by the next tile)."""
        q0, q1, p0, p1 = tile
        part = torch.clamp_max(t, 0, out=self.scratch[: t.numel()].view(t.shape)).sign_()
        self.below[q0:q1, p0:p1] = part.sum(-1)
        torch.sub(t, self.delta, out=part).clamp_min_(0)
        self.excess[q0:q1, p0:p1] = part.sum(-1)
        return part.sign_()

    def values(self, num_items: int, rho: float) -> Tensor:
        return 0.5 * (num_items + self.below) + rho * self.excess


class PairSums:
    """S_k = sum_j H(s_j - s_k) for one chunk, H = sigma(t / tau) or, with ``rho`` and ``delta``, H^-.

    items (c, M), -inf = left out; anchors (c, P), finite. ``sums`` is (c, P); with ``need_grad``,
    ``backward(dS)`` gives the gradient. Each tile's derivative tau * H'(t) (sigma (1 - sigma), and
    tau * rho beyond delta for H^-) is kept for it when the block holds ``block_entries`` entries or
    fewer, and recomputed otherwise; no tile holds more than ``tile_entries`` entries.
    """

    def __init__(self, items: Tensor, anchors: Tensor, tau: float, rho: Optional[float] = None,
                 delta: Optional[float] = None, need_grad: bool = False, block_entries: int = CPU_TILE_ENTRIES,
                 tile_entries: int = CPU_TILE_ENTRIES) -> None:
        self.items, self.anchors, self.tau, self.rho = items, anchors, tau, rho
        rows, num_anchors, num_items = anchors.shape[0], anchors.shape[1], items.shape[1]
        self.delta, self.slope_at_delta = (None, None) if delta is None else h_minus_constants(delta, tau, items.dtype)
        self.tiles = tiles(rows, num_anchors, num_items, min(tile_entries, block_entries))
        largest = max((q1 - q0) * (p1 - p0) * num_items for q0, q1, p0, p1 in self.tiles)
        size = rows * num_anchors * num_items
        keep = need_grad and size <= block_entries
        # Tiles are written into one buffer: the whole block when the derivatives are kept, else one tile.
        self.buffer = items.new_empty(size if keep else largest)
        exact = None if delta is None else ExactParts(anchors, self.delta, largest)
        self.stored: list[Tensor] = []
        self.sums = items.new_empty(rows, num_anchors)
        offset = 0
        for tile in self.tiles:
            step, beyond = self.sigmoid_tile(tile, exact, self.buffer[offset:] if keep else self.buffer)
            q0, q1, p0, p1 = tile
            self.sums[q0:q1, p0:p1] = step.sum(-1)
            if keep:
                self.stored.append(self.derivative(step, beyond))
                offset += step.numel()
        if exact is not None:
            self.sums += exact.values(num_items, rho)

    def sigmoid_tile(self, tile: tuple[int, int, int, int], exact: Optional[ExactParts],
                     out: Tensor) -> tuple[Tensor, Optional[Tensor]]:
        """sigma(min(t, delta) / tau) of one tile of t = s_j - s_k (in ``out``), and [t > delta] for H^-."""
        q0, q1, p0, p1 = tile
        t = out[: (q1 - q0) * (p1 - p0) * self.items.shape[1]].view(q1 - q0, p1 - p0, self.items.shape[1])
        torch.sub(self.items[q0:q1, None, :], self.anchors[q0:q1, p0:p1, None], out=t)
        beyond = None
        if self.delta is not None:
            beyond = exact.add(t, tile) if exact is not None else (t > self.delta).to(t.dtype)
            t.clamp_max_(self.delta)
        return t.div_(self.tau).sigmoid_(), beyond

    def derivative(self, step: Tensor, beyond: Optional[Tensor]) -> Tensor:
        """tau * H'(t) from the tile of sigmoids, in place."""
        step.addcmul_(step, step, value=-1)
        if beyond is not None:
            # Beyond delta the tile holds sigma(delta / tau), whose slope it now has; H^-'s slope there is rho.
            step.add_(beyond, alpha=self.rho * self.tau - self.slope_at_delta)
        return step

    def backward(self, grad_sums: Tensor, grad_items: Tensor) -> Tensor:
        """Add d/d items to ``grad_items`` (c, M) and return d/d anchors (c, P)."""
        grad_anchors = torch.zeros_like(self.anchors)
        scale = grad_sums / self.tau
        for i, tile in enumerate(self.tiles):
            step = self.stored[i] if self.stored else self.derivative(*self.sigmoid_tile(tile, None, self.buffer))
            q0, q1, p0, p1 = tile
            step.mul_(scale[q0:q1, p0:p1, None])
            grad_items[q0:q1] += step.sum(1)
            grad_anchors[q0:q1, p0:p1] -= step.sum(2)
        self.stored, self.buffer = [], None
        return grad_anchors


def count_at_least(items: Tensor, anchors: Tensor, tile_entries: int = CPU_TILE_ENTRIES) -> Tensor:
    """#{j : s_j >= s_k} -> (c, P) in the items' dtype, no gradient. H(0) = 1: ties count (ROADMAP Eq. 3)."""
    counts = items.new_empty(anchors.shape)
    for q0, q1, p0, p1 in tiles(anchors.shape[0], anchors.shape[1], items.shape[1], tile_entries):
        above = items[q0:q1, None, :] >= anchors[q0:q1, p0:p1, None]
        counts[q0:q1, p0:p1] = above.sum(-1, dtype=counts.dtype)
    return counts
