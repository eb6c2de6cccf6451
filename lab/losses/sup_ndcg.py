"""Sup-NDCG (SupRank Eq. 24): the DCG of Eq. 23 with SupRank's rank surrogate."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.hparams import DELTA, RHO, TAU, declare
from ..core.relevance import ideal_dcg
from .base import HierarchicalRankLoss, reduce
from .engine import Block, per_query
from .sup_hap import check_graded_loss, graded_sup_ranks


def sup_ndcg(
    scores: Tensor,
    relevance: Tensor,
    *,
    mask: Optional[Tensor] = None,
    reduction: str = "mean",
    tau: float = TAU.default,
    rho: float = RHO.default,
    delta: float = DELTA.default,
    chunk_size: Optional[int] = None,
) -> Tensor:
    """1 - Sup-NDCG (Eq. 24). scores, relevance (float >= 0, 0 = negative), mask: (Q, N).

    DCG_s = sum over positives k of rel(k) / log2(1 + rank^+(k) + rank^-_s(k)), rank^+ over items
    of relevance >= rel(k) (exact), rank^-_s over items of lower relevance (H^-); divided by the
    exact iDCG (relevances sorted in decreasing order). rank_s >= rank, so the loss upper-bounds
    1 - NDCG. Embedding-level losses use rel = 2^l - 1; any relevance >= 0 works here.
    Returns a scalar, or (Q,) with reduction="none" (0 for queries without positive).
    Reference: ``tests/reference_graded.py::sup_ndcg_loop``.
    """
    scores, relevance, mask, pos = check_graded_loss(scores, relevance, mask, reduction, tau, rho, delta)

    def block_dcg(b: Block) -> Tensor:
        _, rank_pos, rank_neg = graded_sup_ranks(b, tau, rho, delta)
        gain = torch.where(b.pos, b.relevance, 0.0)
        # clamp: off the positives every rank is 0; real positives have rank^+ >= 1.
        return (gain / torch.log2(1.0 + (rank_pos + rank_neg).clamp_min(1.0))).sum(1)

    dcg = per_query(block_dcg, scores, pos, mask, chunk_size, relevance=relevance)
    idcg = ideal_dcg(relevance)
    losses = 1.0 - dcg / torch.where(idcg > 0, idcg, torch.ones_like(idcg))
    return reduce(losses, pos.any(1), reduction)


class SupNDCG(HierarchicalRankLoss):
    """Embedding-level Sup-NDCG with rel = 2^l - 1 (Sec. V-B); labels (B,) or (B, L), finest first."""

    functional = staticmethod(sup_ndcg)
    relevance = "ndcg"
    declared = declare(TAU, RHO, DELTA)

    def __init__(self, tau: float = TAU.default, rho: float = RHO.default, delta: float = DELTA.default, *,
                 include_self: bool = False, reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        self.save_hparams(locals())
