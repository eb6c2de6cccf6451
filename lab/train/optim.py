"""Device, mixed precision, optimizer parameter groups and the learning-rate schedule."""
from __future__ import annotations

import bisect
import math
from typing import Optional

import torch
from torch import nn

from .config import TrainConfig

DEVICES = ("auto", "cpu", "cuda", "mps")


def select_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """"auto": CUDA (this rank's GPU), then Apple MPS, then CPU. Otherwise "cpu", "cuda", "cuda:1", "mps"."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.split(":")[0] not in DEVICES[1:]:
        raise ValueError(f"device must be one of {DEVICES} (optionally 'cuda:N'), got {name!r}")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} but CUDA is not available here; use device='auto' or 'cpu'")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={name!r} but MPS is not available here; use device='auto' or 'cpu'")
    return device


def amp_dtype(amp: str) -> Optional[torch.dtype]:
    """The autocast dtype of a resolved ``amp`` (None: float32)."""
    if amp == "auto":  # depends on the device and the model: lab.train.runtime.resolve_amp decides it
        raise ValueError("amp 'auto' must be resolved first (lab.train.runtime.resolve_amp; the Trainer does it)")
    return {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]


def param_groups(model: nn.Module, loss: nn.Module, cfg: TrainConfig) -> list[dict]:
    """Backbone at ``lr``, head at ``lr_head``, the loss's own parameters at ``lr_loss``.

    A model without ``backbone``/``head`` submodules is trained as one group at ``lr``.
    """
    lr_head = cfg.lr if cfg.lr_head is None else cfg.lr_head
    lr_loss = lr_head if cfg.lr_loss is None else cfg.lr_loss
    if hasattr(model, "backbone") and hasattr(model, "head"):
        parts = [("backbone", model.backbone, cfg.lr), ("head", model.head, lr_head)]
    else:
        parts = [("backbone", model, cfg.lr)]
    parts.append(("loss", loss, lr_loss))
    groups = []
    for name, module, lr in parts:
        params = [p for p in module.parameters() if p.requires_grad]
        if params:
            groups.append({"name": name, "params": params, "lr": lr})
    return groups


def build_optimizer(groups: list[dict], cfg: TrainConfig) -> torch.optim.Optimizer:
    extra = {} if cfg.weight_decay is None else {"weight_decay": cfg.weight_decay}
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[cfg.optimizer]
    return cls(groups, lr=cfg.lr, **extra)


def lr_factor(step: int, cfg: TrainConfig, total_steps: int, milestone_steps: list[int]) -> float:
    """Multiplier of every group's base lr after ``step`` optimizer steps: linear warm-up, then
    the schedule (multistep: times ``gamma`` at each milestone; cosine: down to 0 at the end)."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.scheduler == "multistep":
        return cfg.gamma ** bisect.bisect_right(milestone_steps, step)
    if cfg.scheduler == "cosine":
        progress = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return 1.0


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig, total_steps: int,
                    steps_per_epoch: int) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR stepped once per optimizer step; milestones are in epochs when ``cfg.epochs`` > 0."""
    scale = steps_per_epoch if cfg.epochs > 0 else 1
    milestone_steps = [round(m * scale) for m in cfg.milestones]
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, cfg, total_steps, milestone_steps)
    )
