"""Exact retrieval metrics at score level: (scores, targets, mask) -> (Q,).

Ties are resolved pessimistically, as the Heaviside H(0) = 1 of ROADMAP Eq. 3: an item's
rank counts every item scoring at least as high, so with ties the AP equals scikit-learn's
``average_precision_score``. A query without any positive has no AP: its entry is NaN and
a warning says how many there are (use ``torch.nanmean`` or drop them).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from ..core.checks import check_ks, check_scores


class Sorted(NamedTuple):
    """Each query's items sorted by decreasing score, once: every binary metric reads from it."""

    order: Tensor  # (Q, N) item index at each sorted position
    rank: Tensor  # (Q, N) pessimistic rank at each position: #items with a score >= this one
    valid: Tensor  # (Q, N) bool, not masked, in sorted order


class Ranks(NamedTuple):
    """Items of each query sorted by decreasing score, with tie-aware (pessimistic) ranks."""

    rank: Tensor  # (Q, N) 1 + #items with a higher score + #other items tied, in sorted order
    rank_pos: Tensor  # (Q, N) same count restricted to positives
    is_pos: Tensor  # (Q, N) bool, positive (and not masked), in sorted order
    num_pos: Tensor  # (Q,)


def sort_scores(scores: Tensor, mask: Tensor) -> Sorted:
    """Sort once (masked items last, at -inf); ranks count every item scoring at least as high."""
    s = scores.detach().masked_fill(~mask, float("-inf"))
    s_sorted, order = torch.sort(s, dim=1, descending=True)
    # Sorted ascending, -s turns "number of items >= s" into a searchsorted.
    neg_sorted = -s_sorted.contiguous()
    rank = torch.searchsorted(neg_sorted, neg_sorted, right=True)
    return Sorted(order, rank, mask.gather(1, order))


def ranks_for(sorted_: Sorted, targets: Tensor) -> Ranks:
    """rank^+ of the positives ``targets`` (Q, N, item order) read off a shared sort."""
    is_pos = targets.gather(1, sorted_.order) & sorted_.valid
    rank_pos = is_pos.cumsum(1).gather(1, sorted_.rank - 1)
    dtype = torch.get_default_dtype()
    return Ranks(sorted_.rank.to(dtype), rank_pos.to(dtype), is_pos, is_pos.sum(1))


def sorted_ranks(scores: Tensor, targets: Tensor, mask: Optional[Tensor] = None) -> Ranks:
    """(scores, targets, mask) (Q, N) -> ``Ranks`` in sorted order."""
    scores, targets, mask = check_scores(scores, targets, mask, limit=None)
    r = ranks_for(sort_scores(scores, mask), targets & mask)
    return r._replace(rank=r.rank.to(scores.dtype), rank_pos=r.rank_pos.to(scores.dtype))


def _undefined(num_pos: Tensor, values: Tensor, name: str) -> Tensor:
    """NaN (and a warning) for the queries without positive; values (Q,) or (Q, K)."""
    missing = num_pos == 0
    if missing.any():
        warnings.warn(f"{int(missing.sum())} of {len(num_pos)} queries have no positive: their {name} is NaN",
                      RuntimeWarning, stacklevel=3)
    return values.masked_fill(missing.view(-1, *[1] * (values.dim() - 1)), float("nan"))


def ap_from_ranks(r: Ranks) -> Tensor:
    """Mean over positives k of rank^+(k) / rank(k); 0 (not NaN) without positive. -> (Q,)"""
    precision = torch.where(r.is_pos, r.rank_pos / r.rank, torch.zeros_like(r.rank))
    return precision.sum(1) / r.num_pos.clamp_min(1)


def map_at_r_from_ranks(r: Ranks) -> Tensor:
    """(1/R) sum over the first R positions of precision@i at positives, R = #positives. -> (Q,)"""
    in_top_r = r.rank <= r.num_pos[:, None]
    precision = torch.where(r.is_pos & in_top_r, r.rank_pos / r.rank, torch.zeros_like(r.rank))
    return precision.sum(1) / r.num_pos.clamp_min(1)


def hits_from_ranks(r: Ranks, ks: Sequence[int]) -> Tensor:
    """Number of positives within the top k, for each k, ties broken against the query: a negative
    tied with a positive goes first, but positives tied with each other still fill the places after
    the negatives (two duplicate positives on top: a hit at k = 1). The m-th positive's place is
    #{negatives j : s_j >= s_k} + m = rank(k) - rank^+(k) + m. -> (Q, len(ks))"""
    kk = torch.tensor(list(ks), device=r.rank.device, dtype=r.rank.dtype)
    place = r.rank - r.rank_pos + r.is_pos.cumsum(1).to(r.rank.dtype)
    return ((place[:, :, None] <= kk) & r.is_pos[:, :, None]).sum(1).to(r.rank.dtype)


def average_precision(scores: Tensor, targets: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """AP per query (ROADMAP Eq. 1): mean over positives k of rank^+(k) / rank(k). -> (Q,)"""
    r = sorted_ranks(scores, targets, mask)
    return _undefined(r.num_pos, ap_from_ranks(r), "AP")


def map_at_r(scores: Tensor, targets: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """mAP@R per query (Musgrave et al.; ROADMAP supp. Eq. 11), R = number of positives.

    (1/R) * sum over the first R retrieved of precision@i if the i-th item is positive.
    """
    r = sorted_ranks(scores, targets, mask)
    return _undefined(r.num_pos, map_at_r_from_ranks(r), "mAP@R")


def _top_k_counts(scores: Tensor, targets: Tensor, mask: Optional[Tensor], k: Union[int, Sequence[int]]):
    ks = list(check_ks(k, name="k"))
    r = sorted_ranks(scores, targets, mask)
    kk = torch.tensor(ks, device=r.rank.device, dtype=r.rank.dtype)
    return hits_from_ranks(r, ks), kk, r.num_pos, isinstance(k, int)


def recall_at_k(scores: Tensor, targets: Tensor, mask: Optional[Tensor] = None,
                k: Union[int, Sequence[int]] = (1, 2, 4, 8)) -> Tensor:
    """R@k as used in image retrieval (ROADMAP supp. Eq. 10, SupRank Eq. 13): 1 if a positive
    is among the top k, else 0. (Q,) for an int k, (Q, len(k)) for a list."""
    hits, _, num_pos, single = _top_k_counts(scores, targets, mask, k)
    out = _undefined(num_pos, (hits > 0).to(hits.dtype), "R@k")
    return out[:, 0] if single else out


def true_recall_at_k(scores: Tensor, targets: Tensor, mask: Optional[Tensor] = None,
                     k: Union[int, Sequence[int]] = (1, 2, 4, 8)) -> Tensor:
    """TR@k (SupRank Eq. 14): #positives in the top k / min(k, #positives). (Q,) or (Q, len(k))."""
    hits, kk, num_pos, single = _top_k_counts(scores, targets, mask, k)
    denom = torch.minimum(kk, num_pos[:, None].to(kk.dtype)).clamp_min(1)
    out = _undefined(num_pos, hits / denom, "TR@k")
    return out[:, 0] if single else out


def precision_at_1(scores: Tensor, targets: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """P@1: 1 if the top-ranked item is positive (a tie with a negative counts as a miss). (Q,)"""
    hits, _, num_pos, _ = _top_k_counts(scores, targets, mask, 1)
    return _undefined(num_pos, hits[:, 0], "P@1")
