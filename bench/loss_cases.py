"""What bench/losses.py times: one forward + backward of a loss, on either engine, or of a peer.

Batches of B L2-normalised ``DIM``-d embeddings (the trainer's default width) with two label
levels (fine = B / per_class classes, coarse = 8 fine classes each, for the hierarchical losses);
the batch retrieves from itself.
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional

import torch
from torch import Tensor

import lab.losses as L
from lab.losses.base import pairwise_inputs
from lab.models import build_model
from bench import frozen_autograd_engine as frozen

PER_CLASS, DIM = 4, 64


def build(name: str, num_classes: int, engine: str = "new") -> torch.nn.Module:
    """The loss ``name``; with engine="today", the frozen old engine's score-level functions in every part
    (bench/frozen_autograd_engine.py: "today" is the label the benchmark tables print)."""
    cls = L.LOSSES[name]
    params = inspect.signature(cls).parameters
    extra = {k: v for k, v in (("num_classes", num_classes), ("embed_dim", DIM)) if k in params}
    torch.manual_seed(0)  # same proxies for both engines
    module = cls(**extra)
    if engine == "today":
        for part in module.modules():
            fn = getattr(part, "functional", None)
            if fn is not None and hasattr(frozen, fn.__name__):
                part.functional = getattr(frozen, fn.__name__)
    return module


def batch(size: int, per_class: int) -> tuple[Tensor, Tensor]:
    """(B, DIM) embeddings (a leaf) and (B, 2) labels, ``per_class`` samples per fine class."""
    g = torch.Generator().manual_seed(0)
    fine = torch.arange(size) // per_class
    return torch.randn(size, DIM, generator=g).requires_grad_(), torch.stack([fine, fine // 8], dim=1)


class ScoreStep:
    """The loss alone, from precomputed cosine scores: the engine without the embedding layer.

    Each call is a forward (per-query losses) and a backward of their sum; the last per-query
    losses and score gradient are kept to compare the engines.
    """

    def __init__(self, name: str, size: int, per_class: int, engine: str) -> None:
        emb, labels = batch(size, per_class)
        self.module = build(name, size // per_class, engine)
        scores, q_labels, r_labels, mask = pairwise_inputs(emb.detach(), labels, None, None, None,
                                                           self.module.include_self)
        self.scores, self.mask = scores.requires_grad_(), mask
        self.targets = self.module.targets_for(q_labels, r_labels, mask)
        self.losses: Optional[Tensor] = None

    def __call__(self) -> None:
        self.scores.grad = None
        hparams = {**self.module.hparams, "reduction": "none"}
        losses = self.module.functional(self.scores, self.targets, mask=self.mask, **hparams)
        losses.sum().backward()
        self.losses = losses.detach()

    def difference(self, other: "ScoreStep") -> tuple[float, float]:
        """Largest |difference| of the per-query losses and of their score gradients (after a call of each)."""
        return (float((self.losses - other.losses).abs().max()),
                float((self.scores.grad - other.scores.grad).abs().max()))


def embedding_step(loss_fn: Callable[[Tensor, Tensor], Tensor], size: int, per_class: int) -> Callable[[], None]:
    """Forward + backward of ``loss_fn(embeddings, labels)`` (cosine scores included)."""
    emb, labels = batch(size, per_class)

    def run() -> None:
        emb.grad = None
        loss_fn(emb, labels).backward()
    return run


def pml_loss(name: str) -> Callable[[Tensor, Tensor], Tensor]:
    """pytorch-metric-learning's FastAPLoss (10 bins) or SmoothAPLoss (temperature 0.01) on the fine labels."""
    from pytorch_metric_learning import losses as pml
    module = pml.FastAPLoss(num_bins=10) if name == "FastAPLoss" else pml.SmoothAPLoss(temperature=0.01)
    return lambda emb, labels: module(emb, labels[:, 0])


def lab_loss(name: str, size: int, per_class: int = PER_CLASS) -> Callable[[Tensor, Tensor], Tensor]:
    return build(name, size // per_class)


def fast_ap_difference(size: int) -> float:
    """|pytorch-metric-learning FastAPLoss - lab fast_ap| on the same batch (the same objective)."""
    emb, labels = batch(size, PER_CLASS)
    with torch.no_grad():
        return float((pml_loss("FastAPLoss")(emb, labels) - lab_loss("fast_ap", size)(emb, labels)).abs())


class TrainingStep:
    """A small-CNN training step at batch size B, split into its two parts: the model's forward +
    backward (from a fixed gradient of the embeddings) and the loss's forward + backward (from
    detached embeddings); and the whole step, model + loss, to check that the parts add up."""

    def __init__(self, size: int) -> None:
        torch.manual_seed(0)
        self.model = build_model("small_cnn", DIM, 1)
        self.images = torch.randn(size, 1, 32, 32)
        self.labels = torch.stack([torch.arange(size) // PER_CLASS] * 2, dim=1)
        self.embeddings = self.model(self.images).detach().requires_grad_()
        self.grad = torch.randn_like(self.embeddings) / size

    def model_part(self) -> None:
        self.model.zero_grad()
        self.model(self.images).backward(self.grad)

    def loss_part(self, loss_fn: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            self.embeddings.grad = None
            loss_fn(self.embeddings, self.labels).backward()
        return run

    def whole(self, loss_fn: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            self.model.zero_grad()
            loss_fn(self.model(self.images), self.labels).backward()
        return run
