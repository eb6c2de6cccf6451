"""Run by tests/test_train_ddp.py, from the repository root, as ``python -m tests.ddp_worker OUT`` and under
``torchrun --nproc_per_node 2 -m tests.ddp_worker OUT`` (gloo, CPU).

Trains one step plain and one step staged, saving each rank's gradients, parameters after
the step and cross-batch memory to OUT/rank{r}.pt (OUT/single.pt without torchrun).
"""
import os
import sys
from pathlib import Path

import torch

from lab.losses import build_loss
from lab.train import Trainer
from tests._train_fixtures import small_model, tiny_config, tiny_splits


def one_step(**changes) -> dict:
    train, test = tiny_splits()
    # BN frozen: with batch statistics each rank would normalise its own half (see distributed.py)
    trainer = Trainer(tiny_config(steps=1, xbm_size=40, **changes), train_set=train, test_set=test,
                      model=small_model(freeze_bn=True), loss=build_loss("roadmap"))
    metrics = trainer.step()
    return {"grads": {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None},
            "params": {n: p.detach().clone() for n, p in trainer.model.named_parameters()},
            "memory": [t.clone() for t in trainer.memory.get()], "loss": metrics["loss"],
            "world_size": trainer.dist.world_size}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    results = {"plain": one_step(), "staged": one_step(stage_size=3)}
    name = f"rank{os.environ['RANK']}.pt" if "RANK" in os.environ else "single.pt"
    torch.save(results, out / name)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
