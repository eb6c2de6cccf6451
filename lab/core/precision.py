"""float32 matrix products: the opt-in TF32 switch, and TF32 emulated on the CPU to measure it.

TF32 (NVIDIA Ampere and later) multiplies float32 matrices on tensor cores with each input rounded
to a 10-bit mantissa (float32 has 23) and float32 accumulation: about 6x faster for the three
(B, D) x (D, B) products of smooth_ap at B = 16384 on an H100 (../shared/gpu/README.md), at the
cost of ~3 decimal digits per input. torch's switch is process-wide, so lab changes it in one place,
:func:`matmul_precision`, which restores it. Convolutions are not touched: cuDNN runs float32
convolutions in TF32 by default already (``torch.backends.cudnn.conv.fp32_precision``).

No GPU here: :func:`emulated_tf32` rounds the float32 inputs of every matrix product (forward and
backward) to TF32 on any device, so the effect of the switch on a loss or a training run can be
measured on the CPU (``python -m bench.tf32``). It measures the rounding, not the speed.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

MATMUL_PRECISIONS = ("highest", "high")  # TrainConfig.matmul_precision: float32 (today) or TF32 on CUDA
_CUDA_SETTING = {"highest": "ieee", "high": "tf32"}  # torch.backends.cuda.matmul.fp32_precision's words

DROPPED_BITS = 13  # float32's 23 mantissa bits - TF32's 10


def check_matmul_precision(precision: str) -> None:
    if precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul_precision must be one of {MATMUL_PRECISIONS}, got {precision!r}")


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """Run the block with CUDA's float32 matrix products in ``precision``: "highest" (IEEE float32)
    or "high" (TF32), then restore the previous setting. No effect on the CPU's products.

    Through ``torch.backends.cuda.matmul.fp32_precision`` (torch >= 2.9, no warning on 2.11-2.14):
    after that API has set a value, torch refuses the legacy ``get_float32_matmul_precision`` unless
    the value is back where it was, which the restore guarantees."""
    check_matmul_precision(precision)
    backend = torch.backends.cuda.matmul
    previous = backend.fp32_precision
    wanted = _CUDA_SETTING[precision]
    if wanted == previous:  # nothing to change (the usual case): leave torch's state untouched
        yield
        return
    backend.fp32_precision = wanted
    try:
        yield
    finally:
        backend.fp32_precision = previous


def round_to_tf32(x: Tensor) -> Tensor:
    """float32 ``x`` rounded to TF32's 10-bit mantissa, to nearest, ties to even (as float32 values
    whose low 13 mantissa bits are zero). inf and NaN stay; a value that rounds past the largest
    float32 becomes inf, as IEEE rounding does."""
    if x.dtype != torch.float32:
        raise ValueError(f"round_to_tf32 takes a float32 tensor, got dtype {x.dtype}")
    bits = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF  # the unsigned bit pattern
    lowest_kept = (bits >> DROPPED_BITS) & 1
    half = (1 << (DROPPED_BITS - 1)) - 1  # just under half an ulp of TF32; + the kept bit breaks ties to even
    rounded = ((bits + half + lowest_kept) >> DROPPED_BITS) << DROPPED_BITS
    rounded = torch.where(rounded >= 2**31, rounded - 2**32, rounded).to(torch.int32).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x).view_as(x)


_PRODUCTS = {  # aten matrix products -> positions of the two matrices (a bias stays float32, as on the GPU)
    torch.ops.aten.mm.default: (0, 1), torch.ops.aten.bmm.default: (0, 1),
    torch.ops.aten.addmm.default: (1, 2), torch.ops.aten.baddbmm.default: (1, 2),
}


class _EmulatedTF32(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        positions = _PRODUCTS.get(func)
        if positions is not None:
            args = list(args)
            for i in positions:
                if isinstance(args[i], Tensor) and args[i].dtype == torch.float32:
                    args[i] = round_to_tf32(args[i])
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def emulated_tf32() -> Iterator[None]:
    """Every float32 matrix product in the block (matmul, linear, einsum, ...: they reach aten's mm,
    bmm, addmm, baddbmm), forward and backward, takes its two matrices rounded to TF32; the products
    and sums stay float32. An emulation of ``matmul_precision("high")`` on any device."""
    with _EmulatedTF32():
        yield
