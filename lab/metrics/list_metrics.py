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

Everything is torch on the scores' device, shapes fixed by the chunk (no value is read on the
host, so a GPU never waits for it). Results equal the sort-based functions of
:mod:`lab.metrics.exact` and :mod:`lab.metrics.hierarchical` on the same scores
(tests/test_metrics_fast.py).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from .counting import count_at_least
from .relevant import PAD, Lists

ASI_BLOCK = 2**21  # entries of the (rows, levels, places) arrays of ASI held at once
F64 = torch.float64


def _histogram(keys: Tensor, size: int, weights: Optional[Tensor] = None) -> Tensor:
    """Counts (int64) or weight sums (float64) of each key in [0, size). ``scatter_add_``, not
    ``bincount``: on CUDA that one reads the keys' range on the host."""
    keys = keys.reshape(-1)
    src = torch.ones((), dtype=torch.int64, device=keys.device).expand_as(keys) if weights is None \
        else weights.reshape(-1)
    return torch.zeros(size, dtype=src.dtype, device=keys.device).scatter_add_(0, keys, src)


def _suffix_sums(x: Tensor, dim: int) -> Tensor:
    """Sums from each index to the end along ``dim``."""
    return x.flip(dim).cumsum(dim).flip(dim)


def _ratio_mean(numerator: Tensor, weight: Tensor) -> Tensor:
    """Row sums of numerator over row sums of weight (0 where no weight)."""
    total = weight.sum(1)
    return numerator.sum(1) / torch.where(total > 0, total, 1)


def list_metrics(scores: Tensor, lists: Lists, num_levels: int, ks: Sequence[int], alpha: float = 1.0,
                 graded: bool = False, level_keys: Sequence[str] = (), full_map: bool = True) -> dict[str, Tensor]:
    """Per-query R@k, mAP@R, mAP (finest level = ``num_levels``) and, if ``graded``, H-AP, NDCG,
    ASI and the AP of each label column (``level_keys``, finest first). -> {key: (c,) float64},
    on the scores' device. ``full_map=False`` (not with ``graded``): no "mAP", and a positive's
    rank is counted exactly only up to R + max(ks) - 1, beyond which neither R@k nor mAP@R reads it.

    scores (c, N): the chunk's score rows (-inf where an item is left out, e.g. the query),
    compared in float32; ``lists``: its relevant items and their levels, (c, P) each, on the
    same device. Every row needs at least one item of level ``num_levels`` (the retrieval keeps
    only such queries).
    """
    items, lev = lists
    ok = items != PAD
    c, p = items.shape
    depth = num_levels + 1
    scores = scores.detach().float()  # the thresholds are float32 copies of these scores
    thresholds = scores.gather(1, items.clamp_min(0)).masked_fill_(~ok, float("inf"))
    cap = None
    if not full_map:
        if graded:
            raise ValueError("full_map=False leaves out ranks that the graded metrics need: use it with graded=False")
        # rank > R: not in mAP@R; rank > R + k - 1: at least k negatives above every positive, no hit at k
        cap = (lev == num_levels).sum(1) + max(ks) - 1
    counts = count_at_least(scores, thresholds, cap)
    rank, among = counts.at_least.to(F64), counts.among  # rank(k) and r(k), 0 on empty slots
    safe_rank = torch.where(ok, rank, 1.0)
    # tied[i, r, l]: relevant items of level l with r(j) = r; suffix sums over r: r(j) >= r.
    rows = torch.arange(c, device=items.device)[:, None]
    key = (rows * (p + 1) + among) * depth + lev
    tied = _histogram(key, c * (p + 1) * depth).view(c, p + 1, depth)
    per_level = _suffix_sums(tied, 1).view(-1, depth)[key // depth]  # (c, P, L + 1)
    # from_level[..., l] = #{relevant j of level >= l : s_j >= s_k}
    from_level = _suffix_sums(per_level, 2)

    out = _binary(lev == num_levels, rank, safe_rank, per_level[:, :, num_levels], ks)
    if not full_map:
        del out["mAP"]
    if graded:
        for column, name in enumerate(level_keys):  # AP^(l): positives share the label at this column
            positive = lev >= num_levels - column
            precision = from_level[:, :, num_levels - column] / safe_rank
            out[name] = _ratio_mean(torch.where(positive, precision, 0.0), positive)
        sizes = tied.sum(1)  # |Omega^(l)|, (c, L + 1)
        out["H-AP"] = _h_ap(lev, sizes, safe_rank, per_level, num_levels, alpha)
        out["NDCG"] = _ndcg(lev, sizes, safe_rank, num_levels)
        out["ASI"] = _asi(lev, sizes, tied, key, among, counts.at_least - from_level[:, :, 1], num_levels)
    return out


def _binary(positive: Tensor, rank: Tensor, safe_rank: Tensor, rank_plus: Tensor,
            ks: Sequence[int]) -> dict[str, Tensor]:
    """R@k (a positive within the top k), mAP@R and AP of the finest level."""
    num_pos = positive.sum(1)
    precision = torch.where(positive, rank_plus / safe_rank, 0.0)
    # The best positive's place with ties broken against the query: after every negative scoring at
    # least as high (rank - rank^+), but not after the positives tied with it (exact.hits_from_ranks).
    best = torch.where(positive, rank - rank_plus + 1, float("inf")).amin(1)
    out = {f"R@{k}": (best <= k).to(F64) for k in ks}
    in_top_r = positive & (rank <= num_pos[:, None])
    out["mAP@R"] = torch.where(in_top_r, precision, 0.0).sum(1) / num_pos.clamp_min(1)
    out["mAP"] = precision.sum(1) / num_pos.clamp_min(1)
    return out


def _h_ap(lev: Tensor, sizes: Tensor, safe_rank: Tensor, per_level: Tensor, num_levels: int,
          alpha: float) -> Tensor:
    """H-AP (Eq. 19) with the relevance of Eq. 20, rel = (l / L)^alpha / |Omega^(l)|."""
    levels = torch.arange(num_levels + 1, device=lev.device)
    weight = (levels.to(F64) / num_levels) ** alpha
    weight[0] = 0.0
    table = weight / sizes.clamp_min(1)  # (c, L + 1)
    rel = table.gather(1, lev)
    # min(a, b) = sum over increasing thresholds v of (v - v_prev) [a >= v] [b >= v]
    h_rank, previous = torch.zeros_like(rel), torch.zeros(len(rel), 1, dtype=F64, device=lev.device)
    for v in torch.sort(table[:, 1:], dim=1).values.T:
        v = v[:, None]
        reaching = (table >= v) & (levels > 0)  # (c, L + 1): levels of relevance >= v
        above = (per_level * reaching[:, None, :]).sum(2)  # relevance >= v, s_j >= s_k (no integer matmul on CUDA)
        h_rank += (v - previous) * ((lev > 0) & (rel >= v)) * above
        previous = v
    return torch.where(lev > 0, h_rank / safe_rank, 0.0).sum(1) / rel.sum(1).clamp_min(1e-300)


def _ndcg(lev: Tensor, sizes: Tensor, safe_rank: Tensor, num_levels: int) -> Tensor:
    """NDCG (Eq. 23) with rel = 2^l - 1; the ideal list puts the deepest levels first."""
    gain = 2.0 ** lev.to(F64) - 1.0
    dcg = (gain / torch.log2(1.0 + safe_rank)).sum(1)
    places = torch.arange(1, lev.shape[1] + 1, dtype=F64, device=lev.device)
    discount = torch.cat([places.new_zeros(1), torch.cumsum(1.0 / torch.log2(1.0 + places), 0)])  # D[p], D[0] = 0
    end, ideal = torch.zeros_like(sizes[:, 0]), torch.zeros_like(dcg)
    for level in range(num_levels, 0, -1):
        start, end = end, end + sizes[:, level]
        ideal += (2.0**level - 1.0) * (discount[end] - discount[start])
    return dcg / torch.where(ideal > 0, ideal, 1.0)


def _asi(lev: Tensor, sizes: Tensor, tied: Tensor, key: Tensor, among: Tensor, others_above: Tensor,
         num_levels: int) -> Tensor:
    """ASI: (1/R) sum_{n=1..R} SI(n), SI(n) = sum_l min(#level l in the top n, in the ideal top n) / n.

    The m relevant items of level l tied with k fill the places start + 1 .. start + m, start =
    #{other items j : s_j >= s_k} + #{relevant j : s_j > s_k} + #{relevant j tied, lower level}.
    The deepest level never has more items in the top n than the ideal list: each of its items at
    place q <= R adds sum_{n = q..R} 1/n = H_R - H_{q-1}; a tied block adds the mean over its m
    places, (G(min(start + m, R)) - G(min(start, R))) / m per item, G(x) = x H_R - sum_{q<x} H_q.
    The other levels are counted place by place.
    """
    p = lev.shape[1]
    total = sizes[:, 1:].sum(1)  # R, relevant items per query
    lower = tied.cumsum(2) - tied
    block = tied.view(-1)[key]
    start = others_above + (total[:, None] - among) + lower.view(-1)[key]
    counts = torch.arange(1, p + 1, dtype=F64, device=lev.device)
    harmonic = torch.cat([counts.new_zeros(1), torch.cumsum(1.0 / counts, 0)])  # H_0 .. H_P
    partial = torch.cat([counts.new_zeros(1), torch.cumsum(harmonic, 0)])  # sum_{q<x} H_q, x = 0 .. P + 1
    h_total = harmonic[total][:, None]

    def g(x: Tensor) -> Tensor:
        x = torch.minimum(x, total[:, None])
        return x * h_total - partial[x]

    deepest = lev == num_levels
    size = block.clamp_min(1)
    out = torch.where(deepest, (g(start + size) - g(start)) / size, 0.0).sum(1)
    if num_levels > 1:
        out += _asi_by_place(lev, sizes, start, block, total, num_levels - 1)
    return out / total.clamp_min(1)


def _asi_by_place(lev: Tensor, sizes: Tensor, start: Tensor, block: Tensor, total: Tensor, levels: int) -> Tensor:
    """sum_{n=1..R} sum_{l <= levels} min(#level l in the top n, in the ideal top n) / n, place by place;
    a tied block adds 1/m at each end of its places to a slope array (running sums: items per place)."""
    c, p = lev.shape
    n = torch.arange(1, p + 1, dtype=F64, device=lev.device)
    share = torch.where(lev > 0, 1.0 / block.clamp_min(1), 0.0)
    out = torch.zeros(c, dtype=F64, device=lev.device)
    step = max(1, ASI_BLOCK // (levels * (p + 2)))
    for lo in range(0, c, step):
        rows = slice(lo, lo + step)
        b = len(lev[rows])
        size = b * levels * (p + 2)
        counted = (lev[rows] > 0) & (lev[rows] <= levels)
        base = (torch.arange(b, device=lev.device)[:, None] * levels + (lev[rows] - 1).clamp(0, levels - 1)) * (p + 2)
        first = torch.where(counted, (start[rows] + 1).clamp_max(p + 1), p + 1)
        after = torch.where(counted, (start[rows] + block[rows] + 1).clamp_max(p + 1), p + 1)
        weight = share[rows]
        slope = _histogram(base + first, size, weight) - _histogram(base + after, size, weight)
        per_place = torch.round(torch.cumsum(slope.view(b, levels, p + 2), 2))
        ranked = torch.cumsum(per_place[:, :, 1 : p + 1], 2)  # (b, levels, P): #level l among the top n
        deeper = sizes[rows, 1:]
        ahead = (_suffix_sums(deeper, 1) - deeper)[:, :levels]  # ideal list: deeper levels first
        ideal = torch.minimum((n - ahead[:, :, None]).clamp_min(0), deeper[:, :levels, None].to(F64))
        si = torch.minimum(ranked, ideal).sum(1) / n
        out[rows] = torch.where(n <= total[rows, None], si, 0.0).sum(1)
    return out
