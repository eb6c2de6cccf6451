"""Unit rows: the one normalisation every loss and metric uses.

``unit_rows`` is right for every finite row: ``F.normalize`` alone leaves rows whose norm is
below its eps (1e-12) unnormalised and turns rows whose squared norm overflows (|x| beyond about
1.8e19 in float32) into zeros, and a float64 row cast to float32 first overflows to infinity
beyond 3.4e38. Here each row is first scaled by a power of two that brings its largest |entry|
into [0.5, 1): only exponents change, so a row of ordinary size gives bit for bit what
``F.normalize`` gave, and a row at 1e-30 or 1e30 the same cosines as at 1.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def unit_rows(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` (B, D), each row scaled to unit L2 norm, as ``dtype``; differentiable.

    ``x`` must have passed ``check_embeddings`` (finite, no all-zero row, which has no direction):
    the checks wait on the device once there, not again here. The scaling runs in the wider of
    x's dtype and ``dtype`` (a float64 row at 1e39 is scaled before it meets float32); its factor
    is detached, as the result does not depend on it.
    """
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
