"""Exact per-query metrics from the relevant items alone: their scores, levels and counts.

For each relevant item k of a query, rank(k) = #{j : s_j >= s_k} over the whole gallery
(pessimistic ties, :func:`lab.metrics.counting.count_at_least`); everything else the metrics
need is a count *among the relevant items*, read off histograms of their ranks among
themselves, r(k) = #{relevant j : s_j <= s_k} (s_j >= s_k if and only if r(j) >= r(k)):

* AP (ROADMAP Eq. 1): rank^+(k) = #{positives j : s_j >= s_k};
* mAP@R: the positives with rank(k) <= R; R@k: 1 + the negatives scoring at least as high as the best positive;
* H-AP (SupRank Eq. 18-20): H-rank^+(k) = sum over relevant j with s_j >= s_k of min(rel_j, rel_k);
* NDCG (Eq. 23): rel_k / log2(1 + rank(k)), the ideal DCG from the level sizes;
* ASI (Appendix C-A1): the relevant items tied with k and of its level fill the places just
  after #{other items j : s_j >= s_k} + #{relevant j ranked before them} (ties: lower level first).

Results equal the sort-based functions of :mod:`lab.metrics.exact` and
:mod:`lab.metrics.hierarchical` on the same scores (tests/test_metrics_fast.py).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from .counting import count_at_least
from .relevant import PAD, Lists

ASI_BLOCK = 2**21  # entries of the (rows, levels, places) arrays of ASI held at once


def _ratio_mean(numerator: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Row sums of numerator over row sums of weight (0 where no weight)."""
    total = weight.sum(1)
    return numerator.sum(1) / np.where(total > 0, total, 1)


def list_metrics(scores: Tensor, lists: Lists, num_levels: int, ks: Sequence[int], alpha: float = 1.0,
                 graded: bool = False, level_keys: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Per-query R@k, mAP@R, mAP (finest level = ``num_levels``) and, if ``graded``, H-AP, NDCG,
    ASI and the AP of each label column (``level_keys``, finest first). -> {key: (c,) float64}.

    scores (c, N): the chunk's score rows (-inf where an item is left out, e.g. the query),
    compared in float32; ``lists``: its relevant items and their levels, (c, P) each. Every row
    needs at least one item of level ``num_levels`` (the retrieval keeps only such queries).
    """
    items, lev = lists
    ok = items != PAD
    c, p = items.shape
    depth = num_levels + 1
    scores = scores.detach().float()  # the thresholds are float32 copies of these scores
    where = np.where(ok, items, 0)
    if scores.is_cuda:
        raw = scores.gather(1, torch.from_numpy(where).to(scores.device)).cpu().numpy()
    else:
        raw = np.take_along_axis(scores.numpy(), where, axis=1)
    thresholds = np.where(ok, raw, np.inf).astype(np.float32)
    counts = count_at_least(scores, thresholds)
    rank, among = counts.at_least.astype(np.float64), counts.among  # rank(k) and r(k), 0 on empty slots
    safe_rank = np.where(ok, rank, 1.0)
    # tied[i, r, l]: relevant items of level l with r(j) = r; suffix sums over r: r(j) >= r.
    key = (np.arange(c)[:, None] * (p + 1) + among) * depth + lev
    tied = np.bincount(key.ravel(), minlength=c * (p + 1) * depth).reshape(c, p + 1, depth)
    per_level = np.cumsum(tied[:, ::-1], axis=1)[:, ::-1].reshape(-1, depth)[key // depth]  # (c, P, L + 1)
    # from_level[..., l] = #{relevant j of level >= l : s_j >= s_k}
    from_level = np.cumsum(per_level[:, :, ::-1], axis=2)[:, :, ::-1]

    out = _binary(lev == num_levels, rank, safe_rank, per_level[:, :, num_levels], ks)
    if graded:
        for column, name in enumerate(level_keys):  # AP^(l): positives share the label at this column
            positive = lev >= num_levels - column
            precision = from_level[:, :, num_levels - column] / safe_rank
            out[name] = _ratio_mean(np.where(positive, precision, 0.0), positive)
        sizes = tied.sum(1)  # |Omega^(l)|, (c, L + 1)
        out["H-AP"] = _h_ap(lev, sizes, safe_rank, per_level, num_levels, alpha)
        out["NDCG"] = _ndcg(lev, sizes, safe_rank, num_levels)
        out["ASI"] = _asi(lev, sizes, tied, key, among, rank - from_level[:, :, 1], num_levels)
    return out


def _binary(positive: np.ndarray, rank: np.ndarray, safe_rank: np.ndarray, rank_plus: np.ndarray,
            ks: Sequence[int]) -> dict[str, np.ndarray]:
    """R@k (a positive within the top k), mAP@R and AP of the finest level."""
    num_pos = positive.sum(1)
    precision = np.where(positive, rank_plus / safe_rank, 0.0)
    # The best positive's place with ties broken against the query: after every negative scoring at
    # least as high (rank - rank^+), but not after the positives tied with it (exact.hits_from_ranks).
    best = np.where(positive, rank - rank_plus + 1, np.inf).min(1)
    out = {f"R@{k}": (best <= k).astype(np.float64) for k in ks}
    in_top_r = positive & (rank <= num_pos[:, None])
    out["mAP@R"] = np.where(in_top_r, precision, 0.0).sum(1) / np.maximum(num_pos, 1)
    out["mAP"] = precision.sum(1) / np.maximum(num_pos, 1)
    return out


def _h_ap(lev: np.ndarray, sizes: np.ndarray, safe_rank: np.ndarray, per_level: np.ndarray, num_levels: int,
          alpha: float) -> np.ndarray:
    """H-AP (Eq. 19) with the relevance of Eq. 20, rel = (l / L)^alpha / |Omega^(l)|."""
    weight = (np.arange(num_levels + 1) / num_levels) ** alpha
    weight[0] = 0.0
    table = weight / np.maximum(sizes, 1)  # (c, L + 1)
    rel = np.take_along_axis(table, lev, axis=1)
    # min(a, b) = sum over increasing thresholds v of (v - v_prev) [a >= v] [b >= v]
    h_rank, previous = np.zeros_like(rel), np.zeros((len(rel), 1))
    for v in np.sort(table[:, 1:], axis=1).T:
        v = v[:, None]
        reaching = (table >= v) & (np.arange(num_levels + 1) > 0)  # (c, L + 1): levels of relevance >= v
        above = np.einsum("cpl,cl->cp", per_level, reaching.astype(per_level.dtype))  # relevance >= v, s_j >= s_k
        h_rank += (v - previous) * (lev > 0) * (rel >= v) * above
        previous = v
    return np.where(lev > 0, h_rank / safe_rank, 0.0).sum(1) / np.maximum(rel.sum(1), 1e-300)


def _discount_sums(length: int) -> np.ndarray:
    """D[p] = sum_{i=1..p} 1 / log2(1 + i), D[0] = 0."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, length + 2)))])


def _ndcg(lev: np.ndarray, sizes: np.ndarray, safe_rank: np.ndarray, num_levels: int) -> np.ndarray:
    """NDCG (Eq. 23) with rel = 2^l - 1; the ideal list puts the deepest levels first."""
    gain = 2.0 ** lev - 1.0
    dcg = (gain / np.log2(1.0 + safe_rank)).sum(1)
    discount = _discount_sums(lev.shape[1])
    end, ideal = np.zeros(len(lev), dtype=np.int64), np.zeros(len(lev))
    for level in range(num_levels, 0, -1):
        start, end = end, end + sizes[:, level]
        ideal += (2.0**level - 1.0) * (discount[end] - discount[start])
    return dcg / np.where(ideal > 0, ideal, 1.0)


def _asi(lev: np.ndarray, sizes: np.ndarray, tied: np.ndarray, key: np.ndarray, among: np.ndarray,
         others_above: np.ndarray, num_levels: int) -> np.ndarray:
    """ASI: (1/R) sum_{n=1..R} SI(n), SI(n) = sum_l min(#level l in the top n, in the ideal top n) / n.

    The m relevant items of level l tied with k fill the places start + 1 .. start + m, start =
    #{other items j : s_j >= s_k} + #{relevant j : s_j > s_k} + #{relevant j tied, lower level}.
    The deepest level never has more items in the top n than the ideal list: without ties its
    part is a sum of harmonic numbers over its items; the other levels are counted place by place.
    """
    c, p = lev.shape
    total = sizes[:, 1:].sum(1)  # R, relevant items per query
    lower = np.cumsum(tied, axis=2) - tied
    block = tied.ravel()[key]
    start = (others_above + (total[:, None] - among) + lower.ravel()[key]).astype(np.int64)
    untied = bool((block[lev > 0] == 1).all())  # then each item has its own place
    out = np.zeros(c)
    levels = num_levels
    if untied:  # sum_{n = place..R} 1 / n for each deepest item placed within the top R
        harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, p + 1))])
        place = np.minimum(start + 1, p + 1)
        deepest = (lev == num_levels) & (place <= total[:, None])
        out += np.where(deepest, harmonic[total][:, None] - harmonic[np.minimum(place, p + 1) - 1], 0.0).sum(1)
        levels = num_levels - 1
    if levels:
        out += _asi_by_place(lev, sizes, start, block, total, levels, untied)
    return out / np.maximum(total, 1)


def _asi_by_place(lev: np.ndarray, sizes: np.ndarray, start: np.ndarray, block: np.ndarray, total: np.ndarray,
                  levels: int, untied: bool) -> np.ndarray:
    """sum_{n=1..R} sum_{l <= levels} min(#level l in the top n, in the ideal top n) / n, place by place;
    a tied block adds 1/m at each end of its places to a slope array (running sums: items per place)."""
    c, p = lev.shape
    n = np.arange(1, p + 1)
    share = np.where(lev > 0, 1.0 / np.maximum(block, 1), 0.0)
    out = np.zeros(c)
    step = max(1, ASI_BLOCK // (levels * (p + 2)))
    for lo in range(0, c, step):
        rows = slice(lo, lo + step)
        b, size = len(lev[rows]), len(lev[rows]) * levels * (p + 2)
        counted = (lev[rows] > 0) & (lev[rows] <= levels)
        base = (np.arange(b)[:, None] * levels + np.maximum(lev[rows] - 1, 0).clip(max=levels - 1)) * (p + 2)
        first = np.where(counted, np.minimum(start[rows] + 1, p + 1), p + 1)
        if untied:
            per_place = np.bincount((base + first).ravel(), minlength=size).reshape(b, levels, p + 2)
        else:
            after = np.where(counted, np.minimum(start[rows] + block[rows] + 1, p + 1), p + 1)
            weight = share[rows].ravel()
            slope = np.bincount((base + first).ravel(), weight, size) - np.bincount((base + after).ravel(), weight, size)
            per_place = np.rint(np.cumsum(slope.reshape(b, levels, p + 2), axis=2))
        ranked = np.cumsum(per_place[:, :, 1 : p + 1], axis=2)  # (b, levels, P): #level l among the top n
        ahead = (np.cumsum(sizes[rows, :0:-1], axis=1)[:, ::-1] - sizes[rows, 1:])[:, :levels]  # ideal: deeper first
        ideal = np.clip(n - ahead[:, :, None], 0, sizes[rows, 1 : levels + 1, None])
        si = np.minimum(ranked, ideal).sum(1) / n
        out[rows] = np.where(n <= total[rows, None], si, 0.0).sum(1)
    return out
