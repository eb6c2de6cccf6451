"""The proxy-based decomposability loss L_DG* (SupRank Eq. 8, HAPPIER's L_DG).

A normalised-softmax cross-entropy: each fine class y has a learnable proxy p_y, and
L_DG* = -log softmax_y(v^T p_z / eta) with v and every p_z L2-normalised. Pulling each
embedding to its class proxy calibrates the scores across batches like L_DG (Eq. 7) does.
The proxies are ordinary ``nn.Parameter``s: the training loop optimises them, typically in a
parameter group of their own, ``{"params": loss.parameters(), "lr": ...}``.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.checks import check_embeddings, check_labels, check_reduction, fine
from ..core.hparams import ETA, declare
from ..core.normalize import unit_rows
from .base import RankLoss
from .calls import on_device


def check_count(name: str, value: int) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


class ProxyDecompositionLoss(RankLoss):
    """L_DG* (Eq. 8): cross-entropy of cos(v, p_z) / eta against one proxy per fine class.

    num_classes: number of fine classes (labels are ids in [0, num_classes)); embed_dim: D.
    forward(embeddings (B, D), labels (B,) or (B, L)) -> scalar, or (B,) with reduction="none".
    ``indices_tuple``, ``ref_emb`` / ``ref_embeddings``, ``ref_labels`` and ``mask`` are accepted for a uniform
    call signature (RankLab's and pytorch-metric-learning's) and ignored: the proxies play the part of the
    references, so a miner's tuple has no comparison between embeddings to restrict.
    Reference: ``tests/reference_graded.py::proxy_loss_loop``.
    """

    needs_num_classes = True
    functional = None  # no score-level form: the loss needs the embeddings themselves
    declared = declare(ETA)

    def __init__(self, num_classes: int, embed_dim: int, eta: float = ETA.default, *, reduction: str = "mean") -> None:
        super().__init__()
        check_count("num_classes", num_classes)
        check_count("embed_dim", embed_dim)
        ETA.check(eta)
        check_reduction(reduction)
        self.num_classes, self.embed_dim, self.eta, self.reduction = num_classes, embed_dim, eta, reduction
        self.hparams = {"num_classes": num_classes, "embed_dim": embed_dim, "eta": eta, "reduction": reduction}
        self.include_self = False
        # nn.Linear's default initialisation; only the direction of each proxy matters.
        bound = 1.0 / math.sqrt(embed_dim)
        self.proxies = nn.Parameter(torch.empty(num_classes, embed_dim).uniform_(-bound, bound))

    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: Optional[tuple[Tensor, ...]] = None,
                ref_emb: Optional[Tensor] = None, ref_labels: Optional[Tensor] = None, *,
                ref_embeddings: Optional[Tensor] = None, mask: Optional[Tensor] = None) -> Tensor:
        check_embeddings("embeddings", embeddings)
        labels = on_device(labels, embeddings.device)  # pytorch-metric-learning's trainers keep labels on the CPU
        labels = fine(check_labels("labels", labels, embeddings.shape[0], embeddings.device))
        if embeddings.shape[1] != self.embed_dim:
            raise ValueError(f"embeddings have dim {embeddings.shape[1]} but the loss was built with "
                             f"embed_dim={self.embed_dim}")
        if self.proxies.device != embeddings.device:
            raise ValueError(f"the proxies are on {self.proxies.device} but the embeddings on {embeddings.device}; "
                             "move the loss with .to(device)")
        if bool((labels < 0).any()) or bool((labels >= self.num_classes).any()):
            raise ValueError(f"labels must be class ids in [0, num_classes={self.num_classes}), got values in "
                             f"[{int(labels.min())}, {int(labels.max())}]")
        check_embeddings("proxies", self.proxies)  # e.g. NaN after a diverged step, or a row of zeros
        dtype = torch.float64 if embeddings.dtype == torch.float64 else torch.float32
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            v = unit_rows(embeddings, dtype)
            p = unit_rows(self.proxies, dtype)
            return F.cross_entropy(v @ p.T / self.eta, labels.long(), reduction=self.reduction)
