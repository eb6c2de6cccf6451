"""Graded (hierarchical) retrieval metrics at score level: (scores, relevance, mask) -> (Q,).

relevance (Q, N) >= 0, 0 = negative (see :func:`lab.core.relevance.build_relevance`).
Ties are pessimistic as in :mod:`lab.metrics.exact`: rank(k) = 1 + #{j != k : s_j >= s_k}.
Memory O(Q * N) per distinct relevance value of a query (a few for hierarchical labels).
A query without positive gets NaN and a warning.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..core.graded_ranks import GradedRanks, exact_graded_ranks, relevance_steps
from ..core.relevance import check_relevance, ideal_dcg
from .exact import _undefined


def graded_ranks(scores: Tensor, relevance: Tensor, mask: Optional[Tensor] = None) -> GradedRanks:
    """H-rank^+ (Eq. 18), graded rank^+ and rank of every item, (Q, N) each, 0 off the positives. No grad."""
    scores, rel, mask = check_relevance(scores, relevance, mask, limit=None)
    return exact_graded_ranks(scores, rel, mask)


def h_ap_from_ranks(r: GradedRanks) -> Tensor:
    """H-AP of Eq. 19 from graded ranks; 0 (not NaN) for a query without positive. -> (Q,)"""
    terms = torch.where(r.relevance > 0, r.h_rank_plus / r.rank.clamp_min(1), torch.zeros_like(r.rank))
    return terms.sum(1) / r.relevance.sum(1).clamp_min(1e-30)


def ndcg_from_ranks(r: GradedRanks) -> Tensor:
    """NDCG of Eq. 23 from graded ranks; 0 (not NaN) for a query without positive. -> (Q,)"""
    dcg = (r.relevance / torch.log2(1 + r.rank.clamp_min(1))).sum(1)
    return dcg / ideal_dcg(r.relevance).clamp_min(1e-30)


def h_ap(scores: Tensor, relevance: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """H-AP (Eq. 19): sum over positives of H-rank^+(k) / rank(k), over sum_k rel(k). -> (Q,)

    Equals AP for 0/1 relevance, and the weighted sum of per-level APs with the relevance of
    Property 1 (``build_relevance(..., kind="wap")``).
    """
    r = graded_ranks(scores, relevance, mask)
    return _undefined((r.relevance > 0).sum(1), h_ap_from_ranks(r), "H-AP")


def ndcg(scores: Tensor, relevance: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """NDCG (Eq. 23): sum_k rel(k) / log2(1 + rank(k)) over the ideal DCG. -> (Q,)

    Pass rel = 2^l - 1 for the hierarchical NDCG of the paper (``kind="ndcg"``). With tied
    scores every tied item takes the worst rank of its group, so NDCG <= 1 still holds.
    """
    r = graded_ranks(scores, relevance, mask)
    return _undefined((r.relevance > 0).sum(1), ndcg_from_ranks(r), "NDCG")


def asi(scores: Tensor, relevance: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """ASI (SupRank Appendix C-A1): (1/R) sum_{n=1..R} SI(n), R = number of positives. -> (Q,)

    SI(n) = |{a_1..a_n} ∩ {b_1..b_n}| / n between the ranked list a and the ideal list b
    (decreasing relevance). Items of equal relevance are interchangeable in b, so the
    intersection counts, per relevance value, the smaller of its numbers of items in the two
    top-n lists. Tied scores are ordered worst first (lower relevance first). Pass the semantic
    levels l as relevance (Eq. 20's values can coincide across levels; ASI needs one per level).
    """
    scores, rel, mask = check_relevance(scores, relevance, mask, limit=None)
    s = scores.detach().masked_fill(~mask, float("-inf"))
    by_rel = torch.sort(rel, dim=1, stable=True).indices  # ties in score: lower relevance first
    order = by_rel.gather(1, torch.sort(s.gather(1, by_rel), dim=1, descending=True, stable=True).indices)
    ranked = rel.gather(1, order)
    ideal = rel.sort(1, descending=True).values
    inter = torch.zeros_like(ranked)
    for v, _ in relevance_steps(rel):
        inter += torch.minimum((ranked == v[:, None]).to(rel.dtype).cumsum(1),
                               (ideal == v[:, None]).to(rel.dtype).cumsum(1))
    num_pos = (rel > 0).sum(1)
    n = torch.arange(1, rel.shape[1] + 1, device=rel.device, dtype=rel.dtype)
    si = torch.where(n <= num_pos[:, None], inter / n, torch.zeros_like(inter))
    return _undefined(num_pos, si.sum(1) / num_pos.clamp_min(1), "ASI")
