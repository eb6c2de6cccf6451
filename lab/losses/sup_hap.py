"""Sup-H-AP (SupRank Eq. 21): the H-AP of Eq. 18-19 with SupRank's rank surrogate."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from ..core.checks import check_reduction
from ..core.graded_ranks import exact_graded_ranks, relevance_steps
from ..core.hparams import DELTA, HAP_ALPHA, RHO, TAU, declare
from ..core.relevance import check_relevance, check_relevance_kind
from ..core.steps import check_h_minus
from .base import HierarchicalRankLoss, reduce
from .engine import Block, per_query


def graded_sup_ranks(b: Block, tau: float, rho: float, delta: float) -> tuple[Tensor, Tensor, Tensor]:
    """(H-rank^+, rank^+, rank^-_s) of every item under graded relevance, all (c, N), 0 off the positives
    (Eq. 18, 3, 5).

    H-rank^+ and rank^+(k) = 1 + #{j != k : rel(j) >= rel(k), s_j >= s_k} are exact, without
    gradient, and computed by sorting. rank^-_s(k) sums H^-(s_j - s_k) over the items with
    rel(j) < rel(k) (negatives and less relevant positives): the instances SupRank penalises for
    being ranked above k. One pass per relevance value v of the row: anchors rel(k) = v, items
    rel(j) < v, so the pairs formed are the (positive, item) pairs, as with binary relevance.
    """
    exact = exact_graded_ranks(b.detached_scores, b.relevance, b.valid)
    rank_neg = torch.zeros_like(b.detached_scores)
    for value, _ in relevance_steps(b.relevance):
        level = b.level(b.relevance == value[:, None])
        sums = level.h_minus_sums(level.items(b.valid & (b.relevance < value[:, None])), tau, rho, delta)
        rank_neg = rank_neg.scatter_add(1, level.pos_index, torch.where(level.pos_valid, sums, 0.0))
    return exact.h_rank_plus, exact.rank_plus, rank_neg


def check_graded_loss(scores: Tensor, relevance: Tensor, mask: Optional[Tensor], reduction: str, tau: float,
                      rho: float, delta: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Input checks of the graded Sup-* losses -> (scores, relevance, mask, positives = relevance > 0)."""
    scores, relevance, mask = check_relevance(scores, relevance, mask)
    check_reduction(reduction)
    check_h_minus(tau, rho, delta)
    return scores, relevance, mask, relevance > 0


def sup_hap(
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
    """1 - Sup-H-AP (Eq. 21). scores, relevance (float >= 0, 0 = negative), mask: (Q, N).

    Sup-H-AP = (1 / sum_k rel(k)) * sum over positives k of H-rank^+(k) / (rank^+(k) + rank^-_s(k)),
    with H-rank^+ and rank^+ exact (no gradient) and rank^-_s over the items of strictly lower
    relevance (H^-). H^- >= H makes the loss an upper bound of 1 - H-AP. With 0/1 relevance
    it equals Sup-AP. Time O(Q * P * N), P = items with relevance > 0; memory bounded per chunk of queries.
    Returns a scalar, or (Q,) with reduction="none" (0 for queries without positive).
    Reference: ``tests/reference_graded.py::sup_hap_loop``.
    """
    scores, relevance, mask, pos = check_graded_loss(scores, relevance, mask, reduction, tau, rho, delta)

    def block_loss(b: Block) -> Tensor:
        h_rank, rank_pos, rank_neg = graded_sup_ranks(b, tau, rho, delta)
        # clamp: off the positives every rank is 0; real positives have rank^+ >= 1.
        terms = torch.where(b.pos, h_rank / (rank_pos + rank_neg).clamp_min(1.0), 0.0)
        total_rel = (b.relevance * b.pos).sum(1)
        return 1.0 - terms.sum(1) / torch.where(total_rel > 0, total_rel, torch.ones_like(total_rel))

    losses = per_query(block_loss, scores, pos, mask, chunk_size, relevance=relevance)
    return reduce(losses, pos.any(1), reduction)


class SupHAP(HierarchicalRankLoss):
    """Embedding-level Sup-H-AP; labels (B,) or (B, L), finest first. ``relevance="hap"`` uses
    Eq. 20 with the exponent hap_alpha (HAPPIER_F: > 1); ``relevance="wap"`` Property 1 with the level weights.
    The keyword hap_alpha was called alpha, which ROADMAP's calibration thresholds also use; the old name
    still works."""

    functional = staticmethod(sup_hap)
    forward_hparams = ("relevance", "hap_alpha", "weights")
    declared = declare(TAU, RHO, DELTA, HAP_ALPHA)
    renamed_hparams = {"alpha": "hap_alpha"}

    def __init__(self, tau: float = TAU.default, rho: float = RHO.default, delta: float = DELTA.default,
                 hap_alpha: float = HAP_ALPHA.default, relevance: str = "hap",
                 weights: Optional[Sequence[float]] = None, *, include_self: bool = False,
                 reduction: str = "mean", chunk_size: Optional[int] = None) -> None:
        super().__init__()
        HAP_ALPHA.check(hap_alpha)
        check_relevance_kind(relevance, hap_alpha, weights, name="relevance")
        self.relevance, self.hap_alpha, self.weights = relevance, hap_alpha, weights
        self.save_hparams(locals())
