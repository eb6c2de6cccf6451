"""Run by tests/test_pml_interop.py as ``torchrun --nproc_per_node 2 -m tests.pml_ddp_worker OUT`` (gloo, CPU).

Each rank holds half of one global batch and calls a RankLab loss through pytorch-metric-learning's
``DistributedLossWrapper`` (RankLab's widened subclass), plain and efficient; it saves the loss and the
gradient of its half to OUT/rank{r}.pt for the test to compare with one process computing the same.
"""
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from lab.losses import SupAP
from lab.losses.pml import DistributedLossWrapper


def global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(16, 8, generator=generator), torch.arange(4).repeat_interleave(4)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    emb, labels = global_batch()
    half = slice(rank * 8, (rank + 1) * 8)
    out = {}
    for efficient in (False, True):
        local = emb[half].clone().requires_grad_(True)
        value = DistributedLossWrapper(SupAP(), efficient=efficient)(local, labels[half])
        value.backward()
        out[efficient] = {"loss": value.detach(), "grad": local.grad.clone(), "world_size": world}
    torch.save(out, Path(sys.argv[1]) / f"rank{os.environ['RANK']}.pt")
    dist.destroy_process_group()
