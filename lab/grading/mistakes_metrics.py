"""Known wrong versions of the exact metrics (AP, mAP@R, R@k), with the feedback each one earns."""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from .topic import Mistake


class Ranked(NamedTuple):
    pos: Tensor  # (Q, N) bool, the items counted as positives
    valid: Tensor  # (Q, N) bool, the items ranked at all
    rank: Tensor  # (Q, N) rank of each valid item (1 = first)
    rank_pos: Tensor  # (Q, N) number of positives ranked at or above each item


def ranked(scores, targets, mask, *, ties="pessimistic", mask_pos=True, mask_neg=True, valid_is_mask=False) -> Ranked:
    """Ranks under a tie convention: "pessimistic" (the lab's, H(0) = 1), "optimistic", or
    "sorted" (ties broken by item index, as a stable sort would)."""
    pos = targets & mask if mask_pos else targets.clone()
    valid = mask if valid_is_mask else pos | (~targets & mask if mask_neg else ~targets)
    s_j, s_i = scores[:, None, :], scores[:, :, None]  # [q, i, j]: is j above i?
    index = torch.arange(scores.shape[1])
    if ties == "pessimistic":
        above, self_term = s_j >= s_i, 0  # j = i is included by >=
    elif ties == "optimistic":
        above, self_term = s_j > s_i, 1
    else:
        above, self_term = (s_j > s_i) | ((s_j == s_i) & (index[None, None, :] < index[None, :, None])), 1
    rank = self_term + (above & valid[:, None, :]).sum(-1)
    rank_pos = self_term * pos + (above & pos[:, None, :]).sum(-1)
    return Ranked(pos, valid, rank.to(scores.dtype), rank_pos.to(scores.dtype))


def _finish(values: Tensor, pos: Tensor, empty: str) -> Tensor:
    has = pos.any(1)
    fill = {"nan": float("nan"), "zero": 0.0}.get(empty)
    return values if fill is None else torch.where(has, values, torch.full_like(values, fill))


def ap_metric(scores, targets, mask, *, rank_shift=0.0, rank_pos_shift=0.0, norm="pos", everywhere=False,
              cutoff=None, empty="nan", as_loss=False, zero_by_zero=None, first_only=False, **rank_opts) -> Tensor:
    """AP (cutoff=None) or mAP@R (cutoff="R" and variants), configurable the wrong ways."""
    r = ranked(scores, targets, mask, **rank_opts)
    num_pos = r.pos.sum(1, keepdim=True).to(scores.dtype)
    prec = (r.rank_pos + rank_pos_shift) / (r.rank + rank_shift)
    if zero_by_zero is not None:  # how a 0 / 0 precision was patched (e.g. a clamped denominator: 0)
        prec = torch.nan_to_num(prec, nan=zero_by_zero)
    counted = r.valid if everywhere else r.pos
    if first_only:  # the best-ranked positive only (ties: every positive at the top score)
        top = torch.where(r.pos, r.rank, torch.full_like(r.rank, float("inf"))).min(1, keepdim=True).values
        counted = counted & (r.rank == top)
    if cutoff is not None:
        limit = num_pos + {"R": 0, "R+1": 1, "R-1": -1}[cutoff]
        counted = counted & (r.rank <= limit)
    total = torch.where(counted, prec, torch.zeros_like(prec)).sum(1)
    hits = (r.pos & (r.rank <= num_pos)).sum(1).to(scores.dtype)
    denom = {"pos": num_pos[:, 0], "items": r.valid.sum(1).to(scores.dtype), "hits": hits,
             "one": torch.ones_like(hits)}[norm]
    out = total / denom
    return _finish(1 - out if as_loss else out, r.pos, empty)


def recall_metric(scores, targets, mask, k, *, shift=0, kind="hit", empty="nan", **rank_opts) -> Tensor:
    r = ranked(scores, targets, mask, **rank_opts)
    # The m-th positive's place: after the negatives the tie convention puts above it, and after the
    # m - 1 positives before it (tied positives in any order: the same places).
    index = torch.arange(scores.shape[1])
    before = (scores[:, None, :] > scores[:, :, None]) | (
        (scores[:, None, :] == scores[:, :, None]) & (index[None, None, :] <= index[None, :, None]))
    place = r.rank - r.rank_pos + (before & r.pos[:, None, :]).sum(-1).to(scores.dtype)
    hits = (r.pos & (place <= k + shift)).sum(1).to(scores.dtype)
    num_pos = r.pos.sum(1).to(scores.dtype)
    out = {"hit": (hits > 0).to(scores.dtype), "count": hits, "fraction": hits / num_pos,
           "true": hits / num_pos.clamp(max=k), "precision": hits / k}[kind]
    return _finish(out, r.pos, empty)


_MASK_TIES = {  # shared by the three metrics: (key, message, options)
    "forgot_mask": ("you forgot the mask: items with mask = False (the query itself, ignored items) are not in the "
                    "ranked list at all.", dict(mask_pos=False, mask_neg=False)),
    "query_as_positive": ("your {name} counts the query as its own positive: positives are `targets & mask`. The "
                          "query scores highest with itself, so it would always be retrieved first.",
                          dict(mask_pos=False)),
    "ties_optimistic": ("with tied scores your ranks are optimistic: the lab counts every item scoring ≥ s_k as "
                        "ranked at or above k (H(0) = 1, pessimistic ties, as scikit-learn's AP).",
                        dict(ties="optimistic")),
    "ties_sorted": ("with tied scores your ranks depend on the item order (a sort breaks ties by position): the lab "
                    "counts every item scoring ≥ s_k as ranked at or above k (H(0) = 1, pessimistic ties).",
                    dict(ties="sorted")),
    "zero_no_positive": ("a query without positive has no {name}: return NaN for it (the lab's metrics do; "
                         "averages then use torch.nanmean). Only the losses use 0.", dict(empty="zero")),
}


def _shared(name: str, build) -> list[Mistake]:
    """The shared mistakes; "query as positive" twice: the query ranked among the items, or not."""
    out = [Mistake(k, msg.format(name=name), build(**opts)) for k, (msg, opts) in _MASK_TIES.items()]
    msg = _MASK_TIES["query_as_positive"][0].format(name=name)
    return out + [Mistake("query_as_positive_unranked", msg, build(mask_pos=False, valid_is_mask=True))]


def _ap(**opts):
    return lambda scores, targets, mask: ap_metric(scores, targets, mask, **opts)


AVERAGE_PRECISION = _shared("AP", _ap) + [
    Mistake("rank_zero_based", "your ranks are off by one: ranks start at 1 (the top item has rank 1), so precision "
            "at the first item is rank⁺/rank = 1/1, not 1/0.", _ap(rank_shift=-1.0)),
    Mistake("rank_pos_exclusive", "your ranks are off by one: rank⁺(k) counts k itself (1 + #other positives "
            "above k); an exclusive cumulative sum leaves k out.", _ap(rank_pos_shift=-1.0)),
    Mistake("rank_plus_one", "your ranks are off by one: the top item has rank 1, not 2.", _ap(rank_shift=1.0)),
    Mistake("norm_items", "wrong normalisation: AP averages the precision over the positives (divide by |P|), "
            "not over all ranked items.", _ap(norm="items")),
] + [
    Mistake(f"rank_no_self_{patch}", "your ranks lack their 1: rank(k) = 1 + #other valid items j with s_j ≥ s_k and "
            "rank⁺(k) = 1 + #other positives above k — the 1 is k itself (ROADMAP Eq. 1). Without it the first "
            "positive gets precision 0/0.", _ap(rank_shift=-1.0, rank_pos_shift=-1.0, zero_by_zero=fill))
    for patch, fill in (("nan", None), ("zero", 0.0), ("one", 1.0))
] + [
    Mistake(f"first_positive_only_{norm}", "you only count the first positive in the ranking (that is the reciprocal "
            "rank 1/rank of the first hit): AP averages rank⁺(k)/rank(k) over EVERY positive k of the query.",
            _ap(first_only=True, norm=norm)) for norm in ("one", "pos")
] + [
    Mistake("precision_everywhere", "you add the precision at every rank; AP adds it only at the ranks of the "
            "positives (ROADMAP Eq. 1: mean over positives k of rank⁺(k)/rank(k)).", _ap(everywhere=True)),
    Mistake("returns_loss", "you return 1 − AP (the loss); the metric is the AP itself.", _ap(as_loss=True)),
]

MAP_AT_R = _shared("mAP@R", lambda **o: _ap(cutoff="R", **o)) + [
    Mistake("divide_by_hits", "mAP@R divides by R (the number of positives), not by the number of positives found "
            "in the top R: a positive missing from the top R must cost you (ROADMAP supp. Eq. 11).",
            _ap(cutoff="R", norm="hits")),
    Mistake("full_ap", "that is the full AP: mAP@R only counts the first R retrieved items, R = number of positives "
            "of the query.", _ap()),
    Mistake("cutoff_plus_one", "your cut-off is off by one: keep the first R items (ranks 1..R), not R + 1.",
            _ap(cutoff="R+1")),
    Mistake("cutoff_minus_one", "your cut-off is off by one: keep the first R items (ranks 1..R), not R − 1.",
            _ap(cutoff="R-1")),
    Mistake("precision_everywhere", "P(j) is the precision at j only if the j-th item is a positive, 0 otherwise; "
            "you add it at every rank of the top R.", _ap(cutoff="R", everywhere=True)),
    Mistake("rank_zero_based", "your ranks are off by one: the top item has rank 1.", _ap(cutoff="R", rank_shift=-1.0)),
    Mistake("rank_pos_exclusive", "your ranks are off by one: the number of positives up to rank j includes the "
            "j-th item itself.", _ap(cutoff="R", rank_pos_shift=-1.0)),
]


def _rec(**opts):
    return lambda scores, targets, mask, k: recall_metric(scores, targets, mask, k, **opts)


RECALL_AT_K = _shared("R@k", _rec) + [
    Mistake("fraction", "R@k in image retrieval is a hit rate: 1 if at least one positive is among the top k, "
            "else 0 (ROADMAP supp. Eq. 10) — not the fraction of the positives found.", _rec(kind="fraction")),
    Mistake("true_recall", "that is the 'true recall' #hits / min(k, R) (SupRank Eq. 14); R@k here is 1 if at least "
            "one positive is in the top k, else 0.", _rec(kind="true")),
    Mistake("precision", "that is precision@k (#hits / k); R@k is 1 if at least one positive is in the top k, else 0.",
            _rec(kind="precision")),
    Mistake("count", "return 1.0 or 0.0 per query (was a positive in the top k?), not the number of positives found.",
            _rec(kind="count")),
    Mistake("top_k_minus_one", "your ranks are off by one: the top k are ranks 1..k (rank ≤ k), "
            "you kept only k − 1 items.", _rec(shift=-1)),
    Mistake("top_k_plus_one", "your ranks are off by one: the top k are ranks 1..k, you kept k + 1 items "
            "(0-based indices vs 1-based ranks?).", _rec(shift=1)),
]
