"""Multi-process training with torch.distributed (``torchrun --nproc_per_node N -m lab train ...``).

A rank loss is not a sum over images: every query needs the whole batch. So each rank
embeds its slice of the global batch, the slices are all-gathered WITH gradient, and every
rank computes the same loss on the global batch. DDP then averages the parameter gradients.
BatchNorm in train mode normalises each rank's slice with its own statistics (as usual with
DDP); freeze_bn makes 2 ranks x B/2 exactly equal to 1 process x B (tests/test_train_ddp.py).
Launch: ``torchrun --nproc_per_node 2 -m lab train ... --per-class 4`` (torchrun takes ``--m``
for an abbreviation of its own options).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import Tensor

from ..core import env


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group described by torchrun's environment (RANK, WORLD_SIZE, ...).

    Without those variables (a plain ``python`` run) this is a single process. NCCL on CUDA,
    gloo otherwise. An already initialised group is reused.
    """
    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size(), env.local_rank())
    world_size = env.world_size()
    if world_size <= 1:
        return DistInfo()
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":  # NCCL wants each process on its own GPU before the group forms
        torch.cuda.set_device(env.local_rank())
    # Rank 0 evaluates alone while the others wait at a barrier: a large gallery can take longer
    # than the default 10-30 minute collective timeout.
    dist.init_process_group(backend=backend, timeout=timedelta(hours=2))
    return DistInfo(dist.get_rank(), dist.get_world_size(), env.local_rank())


class _GatherWithGrad(torch.autograd.Function):
    """all_gather whose backward returns this rank's slice of the SUMMED incoming gradients.

    Each rank's loss depends on every rank's embeddings, so the gradient of the sum of the
    ranks' losses w.r.t. this rank's embeddings collects contributions from all ranks.
    """

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.rank, ctx.world_size, ctx.size = dist.get_rank(), dist.get_world_size(), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(ctx.world_size)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.size : (ctx.rank + 1) * ctx.size]


def gather_with_grad(x: Tensor) -> Tensor:
    """(B_local, ...) -> (world_size * B_local, ...), rank order; differentiable. Identity without a group."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    return _GatherWithGrad.apply(x)


@torch.no_grad()
def gather(x: Tensor) -> Tensor:
    """all_gather without gradient (labels, indices, detached embeddings)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)


def average_gradients(params: list[torch.nn.Parameter]) -> None:
    """Average .grad over ranks for parameters DDP does not manage (the loss's own parameters)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= dist.get_world_size()


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def cleanup() -> None:
    """Leave the process group (at the end of a torchrun job)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
