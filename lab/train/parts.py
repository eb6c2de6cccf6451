"""What a run trains with, built once from its config: :func:`build_parts` makes the :class:`Parts` a
Trainer is made of (datasets, model, loss, optimizer, batch stream, schedule, and what goes with them).

The order is part of the run's trajectory: the size check looks at an image with the run's generator and
gives its draws back; the model's initial weights are then the run's first draws, a proxy loss's proxies
the next ones. Names are checked before the (possibly slow) datasets are built.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ..core import env
from ..data.labeled_images import batchable
from ..losses import LOSSES, build_loss
from ..models import TimmBackbone, check_model_name
from .config import TrainConfig
from .distributed import DistInfo
from .footprint import check_fits
from .loading import BatchStream, DeviceBatchStream, build_batch_sampler, build_datasets, model_for, probe_batches
from .memory import CrossBatchMemory
from .optim import amp_dtype, build_optimizer, build_scheduler, param_groups
from .randomness import RunRandom
from .runtime import RuntimePlan, resolve_amp, runtime_plan


@dataclass(frozen=True)
class Parts:
    """A run's parts, as the Trainer keeps them (under the same names)."""

    config: TrainConfig  # amp="auto" resolved: the config the run records (config.yaml, checkpoints)
    amp_note: str  # why that amp (the CLI prints it)
    amp_dtype: Optional[torch.dtype]
    plan: RuntimePlan  # what this device gets (runtime.py), the read protocol among it
    train_set: Any
    test_set: Any
    eval_transform: Any
    model: nn.Module
    net: nn.Module  # the model, wrapped by DistributedDataParallel under torchrun
    loss_fn: nn.Module
    memory: Optional[CrossBatchMemory]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    stream: Union[BatchStream, DeviceBatchStream]
    steps_per_epoch: int
    total_steps: int
    probe: tuple[Tensor, Tensor]  # probe_batches: the decomposability gap's fixed batches


def build_parts(cfg: TrainConfig, device: torch.device, dist: DistInfo, random: RunRandom, *, train_set: Any = None,
                test_set: Any = None, model: Optional[nn.Module] = None, loss: Optional[nn.Module] = None,
                eval_transform: Any = None) -> Parts:
    """The parts of a run of ``cfg`` on ``device``; datasets, model and loss may be passed in (tests, notebooks),
    else they are built from the config. ``random``: the run's generators, which the model and loss draw from."""
    if loss is None and cfg.loss not in LOSSES:
        raise ValueError(f"unknown loss {cfg.loss!r}; choose one of: {', '.join(sorted(LOSSES))}")
    if model is None:
        check_model_name(cfg.model)
    if train_set is None:
        train_set, test_set, eval_transform = build_datasets(cfg)
    labels = train_set.labels.view(len(train_set.labels), -1)
    # Before the model or a batch exists: a size that cannot fit is one line, not minutes of swapping. Its look
    # at the first image draws from the run's generator and gives the draws back.
    with random.owned(), random.preserved():
        in_chans = check_fits(cfg, device, train_set, model=model, world_size=dist.world_size)
    if model is None:
        with random.owned():  # the initial weights: the run's first draws
            model = model_for(cfg, in_chans)
    timm_backbone = isinstance(getattr(model, "backbone", None), TimmBackbone)
    # amp="auto" becomes bf16 or none here, for every caller (CLI, notebook, dashboard); the resolved
    # config is the one the run records (config.yaml, checkpoints) and compares when it resumes.
    cfg, amp_note = resolve_amp(cfg, device, timm_backbone)
    plan = runtime_plan(device, cfg, batchable=batchable(train_set), timm_backbone=timm_backbone,
                        local_world_size=env.local_world_size())
    model.to(device).train()
    if plan.channels_last:
        model.to(memory_format=torch.channels_last)
    dim = getattr(model, "embed_dim", cfg.embed_dim)
    # Proxy-based losses own one learnable proxy per training class (ids 0 .. max).
    if loss is None:
        with random.owned():  # a proxy loss draws its proxies
            loss = build_loss(cfg.loss, num_classes=int(labels[:, 0].max()) + 1, embed_dim=dim, **cfg.loss_kwargs)
    loss_fn = loss.to(device)
    net = model
    if dist.enabled:
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = build_optimizer(param_groups(model, loss_fn, cfg), cfg)
    sampler = build_batch_sampler(labels, cfg, cfg.seed, dist.world_size, dist.rank)
    if plan.device_batches:
        stream = DeviceBatchStream(train_set, sampler, device, cfg.seed, dist.rank,
                                   progress=cfg.progress and dist.is_main)
    else:
        stream = BatchStream(train_set, sampler, plan.num_workers, plan.pin_memory, cfg.seed, plan.prefetch_factor)
    steps_per_epoch = len(stream)
    total_steps = math.ceil(cfg.epochs * steps_per_epoch) if cfg.epochs > 0 else cfg.steps
    scheduler = build_scheduler(optimizer, cfg, total_steps, steps_per_epoch)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.amp == "fp16")
    memory = CrossBatchMemory(cfg.xbm_size, dim, labels.shape[1]).to(device) if cfg.xbm_size else None
    return Parts(config=cfg, amp_note=amp_note, amp_dtype=amp_dtype(cfg.amp), plan=plan, train_set=train_set,
                 test_set=test_set, eval_transform=eval_transform, model=model, net=net, loss_fn=loss_fn, memory=memory,
                 optimizer=optimizer, scheduler=scheduler, scaler=scaler, stream=stream,
                 steps_per_epoch=steps_per_epoch, total_steps=total_steps, probe=probe_batches(labels, cfg))
