"""Exact ranks under graded relevance by sorting, O(Q * N * U) for U distinct relevance values per query.

Shared by the graded losses (their exact, gradient-free parts) and the graded metrics. Ties
are pessimistic: H(0) = 1, so an item counts every item scoring at least as high.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

import torch
from torch import Tensor


class GradedRanks(NamedTuple):
    """Per item, in the original item order; 0 for items that are not positives."""

    h_rank_plus: Tensor  # (Q, N) rel(k) + sum_{j in Omega^+, j != k} min(rel(k), rel(j)) H(s_j - s_k) (Eq. 18)
    rank_plus: Tensor  # (Q, N) 1 + #{j != k : rel(j) >= rel(k), s_j >= s_k} (Eq. 3)
    rank: Tensor  # (Q, N) 1 + #{j != k kept : s_j >= s_k}
    relevance: Tensor  # (Q, N) relevance, 0 on masked items


def relevance_steps(relevance: Tensor) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield (v, v - v_prev), both (Q,), for the distinct positive relevance values of each row
    in increasing order; rows with fewer values get v = inf and a step of 0.

    min(a, b) = sum over steps of (v - v_prev) * [a >= v] * [b >= v] for a, b among the values.
    """
    prev = torch.zeros(relevance.shape[0], dtype=relevance.dtype, device=relevance.device)
    while True:
        v = relevance.masked_fill(relevance <= prev[:, None], float("inf")).min(1).values
        if not bool(torch.isfinite(v).any()):
            return
        yield v, torch.where(torch.isfinite(v), v - prev, torch.zeros_like(v))
        prev = torch.where(torch.isfinite(v), v, prev)


def exact_graded_ranks(scores: Tensor, relevance: Tensor, mask: Tensor,
                       presorted: Optional[tuple[Tensor, Tensor]] = None) -> GradedRanks:
    """scores, relevance (>= 0, 0 on masked items), mask: (Q, N) -> ``GradedRanks``. No gradient.

    Items sorted by decreasing score; for each distinct relevance value v, a cumulative count
    of the items of relevance >= v, read at the last item tied with k, gives both ranks.
    ``presorted`` = (order, last): a sort of these scores and mask already made (the sorted
    item indices and, per position, the position of the last item tied with it) is reused.
    """
    with torch.no_grad():
        if presorted is None:
            s = scores.detach().masked_fill(~mask, float("-inf"))
            s_sorted, order = torch.sort(s, dim=1, descending=True)
            neg = -s_sorted.contiguous()
            last = torch.searchsorted(neg, neg, right=True) - 1  # the last item tied with each one
        else:
            order, last = presorted
        rel = relevance.detach().gather(1, order)
        h_rank, rank_plus = torch.zeros_like(rel), torch.zeros_like(rel)
        for v, step in relevance_steps(rel):
            at_least = rel >= v[:, None]
            count = at_least.to(rel.dtype).cumsum(1).gather(1, last)  # items of relevance >= v up to k's ties
            h_rank += step[:, None] * at_least * count
            rank_plus += (rel == v[:, None]) * count

        def unsort(x: Tensor) -> Tensor:
            return torch.empty_like(x).scatter_(1, order, x)

        rank = torch.where(rel > 0, (last + 1).to(rel.dtype), torch.zeros_like(rel))
        return GradedRanks(unsort(h_rank), unsort(rank_plus), unsort(rank), relevance.detach())
