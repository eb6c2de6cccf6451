"""Forward and backward of one batch: plain, or staged for batches larger than memory.

Both embed this rank's images, gather the global batch (see distributed.py), call
``loss_fn(embeddings, labels, indices) -> (loss, parts)`` on it and leave the (scaled)
parameter gradients in ``.grad``. They return (loss, parts, global embeddings detached,
global labels, global indices).
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from .distributed import DistInfo, gather, gather_with_grad
from .randomness import RunRandom

LossFn = Callable[[Tensor, Tensor, Tensor], tuple[Tensor, dict]]


def plain_backward(net: nn.Module, images: Tensor, labels: Tensor, index: Tensor, loss_fn: LossFn,
                   scaler: torch.amp.GradScaler, autocast: dict):
    """One forward with graph of this rank's images (B, C, H, W), gathered with gradient."""
    with torch.autocast(**autocast):
        local = net(images)
    emb = gather_with_grad(local.float())
    labels, index = gather(labels), gather(index)
    total, parts = loss_fn(emb, labels, index)
    scaler.scale(total).backward()
    return total, parts, emb.detach(), labels, index


def staged_backward(model: nn.Module, net: nn.Module, images: Tensor, labels: Tensor, index: Tensor,
                    loss_fn: LossFn, scaler: torch.amp.GradScaler, autocast: dict, stage_size: int, dist: DistInfo,
                    rng: RunRandom):
    """Revaud et al. supp. Alg. 1 / FastAP Sec. 4.1: parameter gradients of the full batch
    with the activation memory of one chunk (``model`` unwrapped, ``net`` maybe DDP-wrapped).

    1. embed chunk by chunk without graph; 2. loss on all embeddings, d loss / d embeddings;
    3. re-forward each chunk with graph and back-propagate its slice of that gradient.
    Exact when the forward is a function of each image alone: no BatchNorm in train mode
    (BN statistics would be per chunk, i.e. ghost batch norm; use freeze_bn) — dropout is
    replayed exactly, the state of the run's generator (``rng``) of stage 1 being restored for stage 3.
    """
    chunks = images.split(stage_size)
    generator = rng.generator(images.device)
    bn = [m for m in model.modules() if isinstance(m, _BatchNorm) and m.training]
    bn_saved = [{k: v.clone() for k, v in m.state_dict().items()} for m in bn]
    rng_states, parts = [], []
    with torch.no_grad(), torch.autocast(**autocast):
        for chunk in chunks:
            rng_states.append(generator.get_state())
            parts.append(model(chunk).float())
    for m, saved in zip(bn, bn_saved):  # running statistics get updated once, in stage 3
        m.load_state_dict(saved)
    emb = gather(torch.cat(parts)).requires_grad_(True)
    labels, index = gather(labels), gather(index)
    total, loss_parts = loss_fn(emb, labels, index)
    scaler.scale(total).backward()  # emb.grad (scaled like every parameter gradient)
    # Every rank holds the same global loss and DDP averages gradients over ranks: scale by
    # world_size so the average is the gradient of the one global loss.
    rank, size = dist.rank, len(images)
    grad = emb.grad[rank * size : (rank + 1) * size] * dist.world_size
    after_loss = generator.get_state()
    for k, chunk in enumerate(chunks):
        last = k == len(chunks) - 1
        sync = contextlib.nullcontext() if last or not dist.enabled else net.no_sync()
        with sync:
            generator.set_state(rng_states[k])
            with torch.autocast(**autocast):
                out = net(chunk).float()
            start = k * stage_size
            out.backward(grad[start : start + len(chunk)])
    generator.set_state(after_loss)
    return total, loss_parts, emb.detach(), labels, index
