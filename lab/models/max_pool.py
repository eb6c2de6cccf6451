"""2x2 max pooling for the small CNN, bit for bit ``nn.MaxPool2d(2)``, faster on a CPU.

PyTorch's CPU kernel for a (B, C, H, W) tensor in the default (NCHW) layout is about 10x slower than the
same kernel on a channels-last (NHWC) copy of it (one thread, B = 256, C = 32, 32 x 32: 75 ms against 6.5 ms,
by hand). With the two copies, the small CNN's poolings take 0.3-0.7 of their time, its evaluation 13-17 %
less and its training step 6-17 % less (``bench/pool_speed.py``, docs/benchmarks.md). A max is exact whatever
the layout, and both kernels scan a window in the same order, so the values and the index of each window's
maximum (ties included: the first one) are the same, and so are the gradients that flow back through those
indices. Here the input is copied to channels last, pooled, and the result copied back to NCHW: everything
around the pooling (the convolutions, whose rounding does depend on the layout) sees exactly the tensors it saw
before. On a GPU, ``F.max_pool2d``.

Training: forward with indices on the channels-last copy, backward through ATen's own max-pool backward with
those indices (``_MaxPool2x2``). Evaluation (no gradient wanted): the forward alone.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

KERNEL = 2  # kernel = stride = 2, no padding: the windows do not overlap


class _MaxPool2x2(torch.autograd.Function):
    """(B, C, H, W) -> (B, C, H // 2, W // 2), its backward that of ``F.max_pool2d(x, 2)``."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        y, indices = F.max_pool2d(x.contiguous(memory_format=torch.channels_last), KERNEL, return_indices=True)
        indices = indices.contiguous()
        ctx.save_for_backward(x, indices)  # x: the ReLU's output, which autograd keeps for the ReLU anyway
        ctx.mark_non_differentiable(indices)
        return y.contiguous()

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        x, indices = ctx.saved_tensors
        return torch.ops.aten.max_pool2d_with_indices_backward(
            grad.contiguous(), x, [KERNEL, KERNEL], [KERNEL, KERNEL], [0, 0], [1, 1], False, indices)


def max_pool_2x2(x: Tensor) -> Tensor:
    """``F.max_pool2d(x, 2)`` for a 4-d ``x``: the same values and gradients, through channels last on a CPU."""
    if x.device.type != "cpu" or x.dim() != 4:
        return F.max_pool2d(x, KERNEL)
    if torch.is_grad_enabled() and x.requires_grad:
        return _MaxPool2x2.apply(x)
    return F.max_pool2d(x.contiguous(memory_format=torch.channels_last), KERNEL).contiguous()


class MaxPool2x2(nn.Module):
    """``nn.MaxPool2d(2)`` (no parameters, the same state dict), computed by :func:`max_pool_2x2`."""

    def forward(self, x: Tensor) -> Tensor:
        return max_pool_2x2(x)

    def extra_repr(self) -> str:
        return "kernel_size=2, stride=2 (channels-last on a CPU)"
