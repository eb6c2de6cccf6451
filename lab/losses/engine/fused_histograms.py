"""The soft histograms of FastAP and SoftBinAP as fused Triton kernels: one pass over the scores.

``binned_ap_loss`` needs, per query row, the soft counts h+_l = sum_j p_j w_l(v_j) and
h_l = sum_j m_j w_l(v_j) over the bins l, with the triangular kernel w_l(v) = max(0, 1 - |v - c_l| / width)
(FastAP supp. Eq. 22-23, Revaud et al. supp. Eq. 7). Later it needs the gradient
dv_j = sum_l (g+_l p_j + g_l m_j) w_l'(v_j).

- ``_histograms`` runs one program per row. It evaluates every bin's kernel for a block of items
  in registers and sums it, so there are no atomics and no (rows, items) temporaries.
- ``_histogram_gradients`` walks the same blocks with the bins' incoming gradients g+ and g.

The kernel is evaluated for all bins, as in the definition (``lab.core.steps.soft_histogram``),
rather than for the two or three nearest. The cost is bins x more arithmetic, cheap against
memory traffic on a GPU. The PyTorch scatter of ``histograms`` is the fallback and the reference.
The dispatch is that of ``plan.fused_path``.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._triton import tl, triton
from .plan import HISTOGRAM_REGISTER_TILE_ENTRIES

if triton is not None:

    @triton.jit
    def _weights(v, centres, bin_in, width):
        """(BLOCK_L, BLOCK_N) kernel weights and their derivative d w / d v (0 where w = 0, as relu)."""
        diff = v[None, :] - centres[:, None]
        # Under IEEE division 1 - |d| / width > 0 holds exactly when |d| < width: the kink (slope 0 from
        # there on, as relu) is decided by that comparison, whatever the rounding of the quotient.
        inside = (tl.abs(diff) < width) & bin_in[:, None]
        weight = tl.maximum(1.0 - tl.div_rn(tl.abs(diff), width), 0.0)
        sign = tl.where(diff > 0, 1.0, tl.where(diff < 0, -1.0, 0.0))
        return tl.where(inside, weight, 0.0), tl.where(inside, tl.div_rn(-sign, width), 0.0)

    @triton.jit
    def _items(values, pos, valid, row, stride, num_items, start, BLOCK_N: tl.constexpr):
        """A block of one row's items: indices, in range, values, and the two masks as 0/1 floats."""
        j = start + tl.arange(0, BLOCK_N)
        j_in = j < num_items
        v = tl.load(values + row * stride + j, mask=j_in, other=0.0)
        p = tl.load(pos + row * num_items + j, mask=j_in, other=0).to(tl.float32)
        m = tl.load(valid + row * num_items + j, mask=j_in, other=0).to(tl.float32)
        return j, j_in, v, p, m

    @triton.jit
    def _histograms(values, pos, valid, centres, h_pos, h_all, num_items, num_bins, stride, width,
                    BLOCK_L: tl.constexpr, BLOCK_N: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        bins = tl.arange(0, BLOCK_L)
        bin_in = bins < num_bins
        c = tl.load(centres + bins, mask=bin_in, other=0.0)
        total_pos = tl.zeros([BLOCK_L, BLOCK_N], dtype=tl.float32)  # reduced once, after the loop
        total_all = tl.zeros([BLOCK_L, BLOCK_N], dtype=tl.float32)
        for start in range(0, num_items, BLOCK_N):
            j, j_in, v, p, m = _items(values, pos, valid, row, stride, num_items, start, BLOCK_N)
            w, _ = _weights(v, c, bin_in, width)
            total_pos += w * p[None, :]
            total_all += w * m[None, :]
        tl.store(h_pos + row * num_bins + bins, tl.sum(total_pos, axis=1), mask=bin_in)
        tl.store(h_all + row * num_bins + bins, tl.sum(total_all, axis=1), mask=bin_in)

    @triton.jit
    def _histogram_gradients(values, pos, valid, centres, g_pos, g_all, grad, num_items, num_bins, stride, width,
                             BLOCK_L: tl.constexpr, BLOCK_N: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        bins = tl.arange(0, BLOCK_L)
        bin_in = bins < num_bins
        c = tl.load(centres + bins, mask=bin_in, other=0.0)
        gp = tl.load(g_pos + row * num_bins + bins, mask=bin_in, other=0.0)
        ga = tl.load(g_all + row * num_bins + bins, mask=bin_in, other=0.0)
        for start in range(0, num_items, BLOCK_N):
            j, j_in, v, p, m = _items(values, pos, valid, row, stride, num_items, start, BLOCK_N)
            _, slope = _weights(v, c, bin_in, width)
            d = tl.sum(slope * gp[:, None], axis=0) * p + tl.sum(slope * ga[:, None], axis=0) * m
            tl.store(grad + row * num_items + j, d, mask=j_in)


def _blocks(num_bins: int) -> tuple[int, int]:
    block_l = triton.next_power_of_2(num_bins)
    return block_l, max(16, HISTOGRAM_REGISTER_TILE_ENTRIES // block_l)


def _bytes(mask: Tensor) -> Tensor:
    """A bool (c, N) mask as contiguous bytes, read by the kernels as 0/1 (no copy when contiguous)."""
    return mask.contiguous().view(torch.uint8)


def histograms(values: Tensor, pos: Tensor, valid: Tensor, centres: Tensor, width: float) -> tuple[Tensor, Tensor]:
    """(h+, h), both (c, L) float32, for values (c, N) float32 and bool masks pos, valid (c, N)."""
    rows, num_items = values.shape
    values, centres = values.contiguous(), centres.float().contiguous()
    h_pos = torch.zeros(rows, len(centres), dtype=torch.float32, device=values.device)
    h_all = torch.zeros_like(h_pos)
    if rows and num_items:
        block_l, block_n = _blocks(len(centres))
        _histograms[(rows,)](values, _bytes(pos), _bytes(valid), centres, h_pos, h_all, num_items, len(centres),
                             values.stride(0), float(width), BLOCK_L=block_l, BLOCK_N=block_n)
    return h_pos, h_all


def histogram_gradients(values: Tensor, pos: Tensor, valid: Tensor, centres: Tensor, width: float, g_pos: Tensor,
                        g_all: Tensor) -> Tensor:
    """d/d values (c, N) of sum_l g+_l h+_l + g_l h_l, from the bins' gradients g+, g (c, L)."""
    rows, num_items = values.shape
    values, centres = values.contiguous(), centres.float().contiguous()
    grad = torch.zeros(rows, num_items, dtype=torch.float32, device=values.device)
    if rows and num_items:
        block_l, block_n = _blocks(len(centres))
        _histogram_gradients[(rows,)](values, _bytes(pos), _bytes(valid), centres, g_pos.float().contiguous(),
                                      g_all.float().contiguous(), grad, num_items, len(centres), values.stride(0),
                                      float(width), BLOCK_L=block_l, BLOCK_N=block_n)
    return grad
