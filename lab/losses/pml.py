"""pytorch-metric-learning's (PML's) loss wrappers, widened to accept RankLab's losses.

Every RankLab loss takes PML's call (``loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)``,
:mod:`lab.losses.calls`), so PML's trainers, miners and ``losses.MultipleLosses`` use them as they are. Three
of PML's wrappers refuse a loss before calling it, not because the call would fail:

- ``losses.CrossBatchMemory`` and ``losses.SelfSupervisedLoss`` compare the loss's class *name* with a fixed
  list of PML's own losses;
- ``utils.distributed.DistributedLossWrapper`` requires an instance of PML's ``BaseMetricLossFunction``.

The classes here are those wrappers, unchanged but for that check, which also accepts any
:class:`lab.losses.RankLoss` (subclasses included). This module imports PML (``pip install
pytorch-metric-learning``, or the ``[pml]`` extra); ``import lab.losses`` does not.

    from pytorch_metric_learning import miners
    from lab.losses import ROADMAP
    from lab.losses.pml import CrossBatchMemory

    loss = CrossBatchMemory(ROADMAP(), embedding_size=128, memory_size=4096)
    value = loss(embeddings, labels)  # the batch ranks the memory (itself included, its own copy masked)
"""
from __future__ import annotations

import torch

from ..core.extras import require

require("lab.losses.pml")  # first: without PML, one line naming the extra

from pytorch_metric_learning import losses as _pml_losses
from pytorch_metric_learning.utils import distributed as _pml_distributed

from .base import RankLoss


def rank_loss_names() -> set[str]:
    """The class names of every RankLoss subclass defined so far (PML's wrappers check a name, not a type)."""
    names, todo = set(), [RankLoss]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


class CrossBatchMemory(_pml_losses.CrossBatchMemory):
    """PML's ``CrossBatchMemory`` (XBM), accepting RankLab's losses too.

    Each call enqueues the batch, then calls ``loss(embeddings, labels, indices_tuple, memory, memory_labels)``
    with all (query, memory item) pairs but each query's own copy: a rank loss ranks the whole memory.
    """

    @staticmethod
    def supported_losses() -> list[str]:
        return [*_pml_losses.CrossBatchMemory.supported_losses(), *sorted(rank_loss_names())]


class SelfSupervisedLoss(_pml_losses.SelfSupervisedLoss):
    """PML's ``SelfSupervisedLoss``, accepting RankLab's losses too: ``loss(embeddings, ref_emb)`` with row i of
    each an augmentation of the same input, so each query has exactly one positive (its other view)."""

    @staticmethod
    def supported_losses() -> list[str]:
        return [*_pml_losses.SelfSupervisedLoss.supported_losses(), *sorted(rank_loss_names())]


class DistributedLossWrapper(_pml_distributed.DistributedLossWrapper):
    """PML's ``DistributedLossWrapper``, accepting RankLab's losses too; for PML's losses it is PML's own.

    ``efficient=False``: every rank computes the loss of the global batch (the other ranks' embeddings
    gathered without gradient), times the world size, so DDP's average gives the global batch's gradient.
    ``efficient=True``: the local queries rank the global batch (their own copies masked), times the world size.
    """

    def __init__(self, loss: torch.nn.Module, efficient: bool = False) -> None:
        if not isinstance(loss, RankLoss):
            super().__init__(loss, efficient)
            return
        # PML's __init__ minus its type check (the CrossBatchMemory case it also checks is not a RankLoss).
        torch.nn.Module.__init__(self)
        self.loss = loss
        self.efficient = efficient
