"""The sums of ``pair_sums`` as fused Triton kernels, which never store a (query, anchor, item) block.

For each query row q and anchor k (a positive), the engine needs S[q, k] = sum_j f(s_j - s_k):
- f = sigma(t / tau) for SmoothAP and Smooth-R@k;
- f = SupRank's H^- (Eq. 4) for the rank^- of Sup-AP, ROADMAP, Sup-R@k, Sup-H-AP and Sup-NDCG;
- f = the exact step H (H(0) = 1) for rank^+, without gradient.

Two kernels cover the forward and the backward pass.
- ``_anchor_sums`` runs one program per (query, block of anchors). It walks the query's items
  tile by tile in registers and writes S and, in the same pass, D[q, k] = sum_j tau f'(t).
  The anchors' gradient is then -dS D / tau.
- ``_item_gradients`` runs one program per (query, block of items). It walks the anchors and
  writes G[q, j] = sum_k (dS[q, k] / tau) tau f'(t), the items' gradient.

Memory is O(Q (P + M)) whatever the number of positives P. The time is 2 sigmoids per
(query, anchor, item) triple, all on the device, with a handful of launches per call.

``plan.fused_path`` picks this path for float32 scores on CUDA when Triton is installed. The PyTorch
tiles of ``pair_sums`` are the fallback (CPU, MPS, other dtypes, no Triton) and the tests' reference.
On a CPU the kernels run in Triton's interpreter when ``TRITON_INTERPRET=1`` was set before this
module was imported; ``RANKLAB_FUSED=1`` then sends CPU tensors here (the tests do).
``RANKLAB_FUSED=0`` turns the kernels off everywhere (for comparisons).
"""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor

from ._triton import tl, triton
from .plan import FUSED_ENV  # noqa: F401  (bench/gpu.py reads it here)
from .plan import SUMS_REGISTER_TILE_ENTRIES

SIGMOID, H_MINUS, STEP = 0, 1, 2  # the kernels' MODE: which f they sum (the callers pass these)
MAX_BLOCK_P = 32


if triton is not None:
    # The modes as the kernels read them: a @triton.jit function reads a global only as a constexpr.
    _H_MINUS_MODE, _STEP_MODE = tl.constexpr(H_MINUS), tl.constexpr(STEP)

    @triton.jit
    def _step(t, inv_tau, tau, rho, delta, MODE: tl.constexpr):
        """f(t) and tau f'(t) of one tile of differences t (items left out are t = -inf)."""
        if MODE == _STEP_MODE:  # exact step, H(0) = 1: a tie counts as ranked above
            value = (t >= 0).to(tl.float32)
            slope = tl.zeros_like(t)
        else:
            if MODE == _H_MINUS_MODE:  # H^-: the sigmoid stops at delta, where the linear part takes over
                x = tl.minimum(t, delta) * inv_tau
            else:
                x = t * inv_tau
            # exp(-|x|) <= 1 never overflows: t = -inf gives 0, a saturated sigmoid 0 or 1, never NaN.
            e = tl.exp(-tl.abs(x))
            sig = tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
            value = sig
            slope = sig * (1.0 - sig)
            if MODE == _H_MINUS_MODE:
                value = value + tl.where(t >= 0, 0.5, 0.0) + rho * tl.maximum(t - delta, 0.0)
                slope = tl.where(t > delta, rho * tau, slope)
        return value, slope

    @triton.jit
    def _anchor_sums(items, anchors, sums, slopes, num_items, num_anchors, items_stride, anchors_stride,
                     inv_tau, tau, rho, delta, MODE: tl.constexpr, SLOPES: tl.constexpr,
                     BLOCK_P: tl.constexpr, BLOCK_M: tl.constexpr):
        """S[q, k] = sum_j f(s_j - s_k) and D[q, k] = sum_j tau f'(s_j - s_k) for a block of anchors k."""
        row = tl.program_id(0).to(tl.int64)
        k = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
        k_in = k < num_anchors
        a = tl.load(anchors + row * anchors_stride + k, mask=k_in, other=0.0).to(tl.float32)
        # Tile-shaped accumulators, reduced once at the end: no cross-lane sum inside the loop.
        total = tl.zeros([BLOCK_P, BLOCK_M], dtype=tl.float32)
        slope_total = tl.zeros([BLOCK_P, BLOCK_M], dtype=tl.float32)
        for start in range(0, num_items, BLOCK_M):
            j = start + tl.arange(0, BLOCK_M)
            s = tl.load(items + row * items_stride + j, mask=j < num_items, other=float("-inf")).to(tl.float32)
            value, slope = _step(s[None, :] - a[:, None], inv_tau, tau, rho, delta, MODE)
            total += value
            if SLOPES:
                slope_total += slope
        tl.store(sums + row * num_anchors + k, tl.sum(total, axis=1), mask=k_in)
        if SLOPES:
            tl.store(slopes + row * num_anchors + k, tl.sum(slope_total, axis=1), mask=k_in)

    @triton.jit
    def _item_gradients(items, anchors, weights, out, num_items, num_anchors, items_stride, anchors_stride,
                        inv_tau, tau, rho, delta, MODE: tl.constexpr, BLOCK_P: tl.constexpr,
                        BLOCK_M: tl.constexpr):
        """G[q, j] = sum_k w[q, k] tau f'(s_j - s_k) for a block of items j (w = dS / tau)."""
        row = tl.program_id(0).to(tl.int64)
        j = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
        j_in = j < num_items
        s = tl.load(items + row * items_stride + j, mask=j_in, other=float("-inf")).to(tl.float32)
        total = tl.zeros([BLOCK_P, BLOCK_M], dtype=tl.float32)
        for start in range(0, num_anchors, BLOCK_P):
            k = start + tl.arange(0, BLOCK_P)
            k_in = k < num_anchors
            a = tl.load(anchors + row * anchors_stride + k, mask=k_in, other=0.0).to(tl.float32)
            w = tl.load(weights + row * num_anchors + k, mask=k_in, other=0.0)
            _, slope = _step(s[None, :] - a[:, None], inv_tau, tau, rho, delta, MODE)
            total += slope * w[:, None]
        tl.store(out + row * num_items + j, tl.sum(total, axis=0), mask=j_in)


def _blocks(num_anchors: int) -> tuple[int, int]:
    """(BLOCK_P, BLOCK_M): anchors per program up to MAX_BLOCK_P, items filling a register tile."""
    block_p = min(MAX_BLOCK_P, triton.next_power_of_2(max(num_anchors, 1)))
    return block_p, SUMS_REGISTER_TILE_ENTRIES // block_p


@functools.lru_cache(maxsize=64)
def _scalars(tau: float, rho: Optional[float], delta: Optional[float]) -> tuple[float, float, float, float]:
    # delta rounded to float32, as the PyTorch path rounds it to the scores' dtype: t <= delta is the same test.
    delta32 = 0.0 if delta is None else float(torch.tensor(delta, dtype=torch.float32))
    return 1.0 / tau, tau, 0.0 if rho is None else float(rho), delta32


def anchor_sums(items: Tensor, anchors: Tensor, mode: int, tau: float = 1.0, rho: Optional[float] = None,
                delta: Optional[float] = None, slopes: bool = False) -> tuple[Tensor, Optional[Tensor]]:
    """(S, D) for items (c, M) (-inf = left out) and anchors (c, P): both (c, P) float32, D None
    unless ``slopes``."""
    items, anchors = items.contiguous(), anchors.contiguous()
    rows, num_anchors = anchors.shape
    sums = torch.empty(rows, num_anchors, dtype=torch.float32, device=items.device)
    derivative = torch.empty_like(sums) if slopes else sums  # an unused pointer when not asked for
    if rows and num_anchors:
        block_p, block_m = _blocks(num_anchors)
        grid = (rows, triton.cdiv(num_anchors, block_p))
        _anchor_sums[grid](items, anchors, sums, derivative, items.shape[1], num_anchors, items.stride(0),
                           anchors.stride(0), *_scalars(tau, rho, delta), MODE=mode, SLOPES=slopes,
                           BLOCK_P=block_p, BLOCK_M=block_m)
    return sums, derivative if slopes else None


def item_gradients(items: Tensor, anchors: Tensor, weights: Tensor, mode: int, tau: float,
                   rho: Optional[float] = None, delta: Optional[float] = None) -> Tensor:
    """G (c, M) float32: sum over anchors k of weights[q, k] tau f'(s_j - s_k)."""
    items, anchors, weights = items.contiguous(), anchors.contiguous(), weights.float().contiguous()
    rows, num_items = items.shape
    out = torch.zeros(rows, num_items, dtype=torch.float32, device=items.device)
    if rows and num_items and anchors.shape[1]:
        block_p, block_m = _blocks(anchors.shape[1])
        grid = (rows, triton.cdiv(num_items, block_m))
        _item_gradients[grid](items, anchors, weights, out, num_items, anchors.shape[1], items.stride(0),
                              anchors.stride(0), *_scalars(tau, rho, delta), MODE=mode, BLOCK_P=block_p,
                              BLOCK_M=block_m)
    return out


class FusedPairSums:
    """``pair_sums.PairSums`` on the fused kernels: same arguments, ``sums`` (c, P) and ``backward``.

    Only the (c, P) slopes D are kept for the backward pass; the items' gradient is recomputed
    there by ``_item_gradients`` (one more sigmoid per triple, no block in memory).
    """

    def __init__(self, items: Tensor, anchors: Tensor, tau: float, rho: Optional[float] = None,
                 delta: Optional[float] = None, need_grad: bool = False, block_entries: Optional[int] = None,
                 tile_entries: Optional[int] = None) -> None:
        self.items, self.anchors, self.tau, self.rho, self.delta = items, anchors, tau, rho, delta
        self.mode = SIGMOID if rho is None else H_MINUS
        self.sums, self.slopes = anchor_sums(items, anchors, self.mode, tau, rho, delta, slopes=need_grad)

    def backward(self, grad_sums: Tensor, grad_items: Tensor) -> Tensor:
        """Add d/d items to ``grad_items`` (c, M) and return d/d anchors (c, P)."""
        weights = grad_sums / self.tau
        grad_items += item_gradients(self.items, self.anchors, weights, self.mode, self.tau, self.rho, self.delta)
        return -weights * self.slopes


def count_at_least(items: Tensor, anchors: Tensor) -> Tensor:
    """#{j : s_j >= s_k} -> (c, P) float32, no gradient (``pair_sums.count_at_least`` fused)."""
    return anchor_sums(items, anchors, STEP)[0]
