"""Unit rows and cosine scores: the one normalisation every loss and metric uses.

``unit_rows`` is right for every finite row: ``F.normalize`` alone leaves rows whose norm is
below its eps (1e-12) unnormalised and turns rows whose squared norm overflows (|x| beyond about
1.8e19 in float32) into zeros, and a float64 row cast to float32 first overflows to infinity
beyond 3.4e38. Here each row is first scaled by a power of two that brings its largest |entry|
into [0.5, 1): only exponents change, so a row of ordinary size gives bit for bit what
``F.normalize`` gave, and a row at 1e-30 or 1e30 the same cosines as at 1.

``cosine_scores`` gives bitwise-identical rows bitwise-identical scores, whatever their positions:
a matrix product rounds an entry differently by where it falls in the kernel's tiles (1.0 or
0.9999999999999999 for a row against its own copy), and an exact step (Sup-AP's rank^+) would
count that last bit as an order, so the loss would depend on the order of the batch.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor


# Rows whose largest |entry| lies here are normalised right by F.normalize alone, in float32 too: the norm
# stays above its eps (1e-12 < 2**-36) and the sum of squares below float32's range for any D < 2**47.
PLAIN = (2.0 ** -36, 2.0 ** 40)


def unit_rows(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` (B, D), each row scaled to unit L2 norm, as ``dtype``; differentiable.

    ``x`` must have passed ``check_embeddings`` (finite, no all-zero row, which has no direction).
    Rows within ``PLAIN`` (every ordinary batch) go to F.normalize as they are, in the same graph as
    ever, so gradients and training runs keep their bits; otherwise each row is first scaled by a power
    of two, in the wider of x's dtype and ``dtype`` (a float64 row at 1e39 is scaled before it meets
    float32), its factor detached, as the result does not depend on it. Which of the two: one wait on
    the device (two numbers).
    """
    with torch.no_grad():
        low, high = (float(v) for v in torch.aminmax(x.detach().abs().amax(1)))
    if PLAIN[0] <= low and high <= PLAIN[1]:
        # Every ordinary batch: F.normalize on x itself, the graph the losses always had. Scaling first gives
        # the same values, but its extra node sums x's gradients in another order (the last bits of every
        # training run moved: same seed, other run).
        return F.normalize(x.to(dtype), dim=1)
    work = torch.promote_types(x.dtype, dtype)
    with torch.no_grad():
        largest = x.detach().abs().amax(1, keepdim=True).to(work)  # exact: a widening cast
        _, exponent = torch.frexp(largest)  # largest = m * 2**exponent, m in [0.5, 1)
        # 2**-exponent in two halves: one factor alone overflows for subnormal rows (float32: 2**148).
        half = exponent // 2
        two = torch.tensor(2.0, dtype=work, device=x.device)
        first, second = torch.pow(two, -half), torch.pow(two, half - exponent)  # exact powers of two
    scaled = x.to(work) * first * second
    return F.normalize(scaled.to(dtype), dim=1)


def _unique_rows(x: Tensor) -> Optional[tuple[Tensor, Tensor]]:
    """(distinct rows (U, D) in sorted order, index (B,) of each row's distinct row), or None when
    the rows are all different. Rows whose first 8 bytes all differ are different: a sort of B
    integers proves it for the usual batch, at a tenth of the cost of sorting whole rows."""
    x = x.detach()
    if len(torch.unique(_leading_bytes(x))) == len(x):
        return None
    unique, inverse = torch.unique(x, dim=0, return_inverse=True)
    return None if len(unique) == len(x) else (unique, inverse)


def _leading_bytes(x: Tensor) -> Tensor:
    """(B,) int64: the first 8 bytes of each row (two float32 entries, one float64), zero-padded;
    equal rows give equal keys (+ 0.0 turns -0.0 into 0.0, which a product treats alike)."""
    raw = (x[:, : max(1, 8 // x.element_size())] + 0.0).contiguous().view(torch.uint8)
    return F.pad(raw, (0, 8 - raw.shape[1])).view(torch.int64)[:, 0]


def duplicate_representatives(x: Tensor) -> Optional[Tensor]:
    """(B,) index of the first row equal to each row of ``x`` (B, D), or None when all rows differ."""
    found = _unique_rows(x)
    if found is None:
        return None
    unique, inverse = found
    first = torch.full((len(unique),), len(x), dtype=torch.long, device=x.device)
    first.scatter_reduce_(0, inverse, torch.arange(len(x), device=x.device), "amin")
    return first[inverse]


class _SharedProduct(torch.autograd.Function):
    """q @ r.T computed once per distinct pair of rows and gathered; the gradient is q @ r.T's
    (each copy of a row gets its own share, not its first copy all of it)."""

    @staticmethod
    def forward(ctx, q: Tensor, r: Tensor, unique_q: Tensor, inverse_q: Tensor, unique_r: Tensor,
                inverse_r: Tensor) -> Tensor:
        ctx.save_for_backward(q, r)
        return (unique_q @ unique_r.T)[inverse_q[:, None], inverse_r[None, :]]

    @staticmethod
    def backward(ctx, grad: Tensor):
        q, r = ctx.saved_tensors
        return grad @ r, grad.T @ q, None, None, None, None


def cosine_scores(q: Tensor, r: Tensor) -> Tensor:
    """q @ r.T for unit rows q (B, D) and r (N, D), the same dtype; differentiable.

    Rule: bitwise-equal rows of q give bitwise-equal rows of scores, and bitwise-equal rows of r
    bitwise-equal columns. Without duplicates this is the plain product; with them each distinct
    pair is scored once and gathered (a side without duplicates keeps its order).
    """
    found_q = _unique_rows(q)
    found_r = found_q if r is q else _unique_rows(r)
    if found_q is None and found_r is None:
        return q @ r.T
    unique_q, inverse_q = found_q or _as_distinct(q)
    unique_r, inverse_r = found_r or _as_distinct(r)
    return _SharedProduct.apply(q, r, unique_q, inverse_q, unique_r, inverse_r)


def _as_distinct(x: Tensor) -> tuple[Tensor, Tensor]:
    """What ``_unique_rows`` would say of rows that all differ, keeping their order."""
    return x.detach(), torch.arange(len(x), device=x.device)
