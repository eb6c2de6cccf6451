"""The implementations researchers compare us with, for bench/gpu.py.

``cubic_smooth_ap`` is SmoothAP as the paper's equations read, through the (B, B, B) tensor of every
comparison. That is what the public SmoothAP code builds, so it has the same time and memory
(written here from the equations; no code of theirs). pytorch-metric-learning's FastAPLoss and
SmoothAPLoss are imported when installed.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def cubic_smooth_ap(embeddings: Tensor, labels: Tensor, tau: float = 0.01) -> Tensor:
    """1 - SmoothAP (Brown et al. Eq. 7-8) with d[q, k, j] = s_qj - s_qk for every query, positive-or-not
    k and item j: (B, B, B) float tensors. The query is excluded from its own ranking, as in ``smooth_ap``.
    embeddings (B, D), labels (B,) -> scalar."""
    e = F.normalize(embeddings.float(), dim=1)
    scores = e @ e.T
    b = len(labels)
    not_self = ~torch.eye(b, dtype=torch.bool, device=e.device)
    positive = (labels[:, None] == labels[None, :]) & not_self  # (q, j)
    step = torch.sigmoid((scores[:, None, :] - scores[:, :, None]) / tau)  # (q, k, j)
    step = step * (not_self[None] & not_self[:, None, :])  # j != k and j != q
    rank_all = 1 + step.sum(-1)  # (q, k)
    rank_pos = 1 + (step * positive[:, None, :]).sum(-1)
    ap = (rank_pos / rank_all * positive).sum(1) / positive.sum(1).clamp_min(1)
    return 1 - ap[positive.any(1)].mean()


def pml_loss(name: str) -> Optional[Callable[[Tensor, Tensor], Tensor]]:
    """pytorch-metric-learning's FastAPLoss (10 bins) or SmoothAPLoss (temperature 0.01) on fine labels
    (B,), or None when it is not installed."""
    try:
        from pytorch_metric_learning import losses as pml
    except ImportError:
        return None
    module = pml.FastAPLoss(num_bins=10) if name == "FastAPLoss" else pml.SmoothAPLoss(temperature=0.01)
    return lambda embeddings, labels: module(embeddings, labels)


def pml_version() -> Optional[str]:
    try:
        from pytorch_metric_learning import __version__
    except ImportError:
        return None
    return __version__
