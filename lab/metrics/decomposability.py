"""The decomposability gap of ROADMAP Eq. 6 / SupRank Eq. 6, measured on embeddings."""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from ..losses.base import check_embeddings, check_labels, fine
from .exact import average_precision


def decomposability_gap(embeddings: Tensor, labels: Tensor, batch_ids: Tensor) -> float:
    """Mean over queries of AP within the query's batch minus AP over the whole set.

    embeddings (N, D), labels (N,) or (N, L) (finest level used), batch_ids (N,) integers
    assigning each item to a batch. Each query retrieves the other items of its batch (what
    a batch loss sees) and, separately, all other items (what evaluation sees); the gap
    DG = mean(AP_batch) - mean(AP_global) >= 0 on average and grows as batches shrink.
    Queries without a positive in their batch are left out.
    """
    check_embeddings("embeddings", embeddings)
    labels = fine(check_labels("labels", labels, embeddings.shape[0], embeddings.device))
    batch_ids = check_labels("batch_ids", batch_ids, embeddings.shape[0], embeddings.device)
    if batch_ids.dim() != 1:
        raise ValueError(f"batch_ids must be 1-D, got shape {tuple(batch_ids.shape)}")
    e = F.normalize(embeddings.detach().float(), dim=1)
    scores = e @ e.T
    targets = labels[:, None] == labels[None, :]
    mask = ~torch.eye(len(e), dtype=torch.bool, device=e.device)
    in_batch = batch_ids[:, None] == batch_ids[None, :]
    usable = (targets & mask & in_batch).any(1)
    if not usable.any():
        raise ValueError("no query has a positive inside its batch: the gap is undefined")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # queries left out are NaN on purpose
        global_ap = average_precision(scores[usable], targets[usable], mask[usable])
        batch_ap = average_precision(scores[usable], targets[usable], (mask & in_batch)[usable])
    return float((batch_ap - global_ap).mean())
