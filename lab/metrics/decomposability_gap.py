"""The decomposability gap of ROADMAP Eq. 6 / SupRank Eq. 6, measured on embeddings."""
from __future__ import annotations

import torch
from torch import Tensor

from ..core.checks import check_embeddings, check_labels, fine
from .exact import average_precision
from .retrieval import per_query_metrics


def decomposability_gap(embeddings: Tensor, labels: Tensor, batch_ids: Tensor) -> float:
    """Mean over queries of AP within the query's batch minus AP over the whole set.

    embeddings (N, D), labels (N,) or (N, L) (finest level used), batch_ids (N,) integers
    assigning each item to a batch. Each query retrieves the other items of its batch (what
    a batch loss sees) and, separately, all other items (what evaluation sees); the gap
    DG = mean(AP_batch) - mean(AP_global) >= 0 on average and grows as batches shrink.
    Queries without a positive in their batch are left out.

    Both APs are the evaluation's (:func:`lab.metrics.per_query_metrics`: counted, not sorted,
    within the memory budget), so a batch holding every item gives a gap of exactly 0 and the
    whole test split (15k items) costs seconds, not an N x N sort.
    """
    check_embeddings("embeddings", embeddings)
    labels = fine(check_labels("labels", labels, embeddings.shape[0], embeddings.device))
    batch_ids = check_labels("batch_ids", batch_ids, embeddings.shape[0], embeddings.device)
    if batch_ids.dim() != 1:
        raise ValueError(f"batch_ids must be 1-D, got shape {tuple(batch_ids.shape)}")
    emb = embeddings.detach()
    batch_ap = torch.full((len(emb),), float("nan"), dtype=torch.float64)
    for b in torch.unique(batch_ids):
        rows = torch.nonzero(batch_ids == b).squeeze(1)
        if len(torch.unique(labels[rows])) < len(rows):  # some query of the batch has a positive in it
            batch_ap[rows.cpu()] = per_query_metrics(emb[rows], labels[rows], ks=(1,))["mAP"].cpu()
    usable = ~batch_ap.isnan()
    if not usable.any():
        raise ValueError("no query has a positive inside its batch: the gap is undefined")
    global_ap = per_query_metrics(emb, labels, ks=(1,))["mAP"].cpu()
    return float((batch_ap[usable] - global_ap[usable]).mean())


# ================================================================================================
# Bounds on the gap of one query (ROADMAP Eq. 8-9, SupRank Eq. 26-27) and the toys of supp. A.2.
# Appended section: imports are local to it.
# ================================================================================================
import functools  # noqa: E402
from typing import Callable, Sequence  # noqa: E402

BatchCounts = tuple[int, ...]
MAX_ORDER_STATES = 1_000_000  # distinct batch compositions make the worst-order search exponential


def query_gap(scores: Tensor, targets: Tensor, batch_ids: Tensor) -> float:
    """DG of Eq. 6 for one query: mean over its batches of AP_b minus the AP over all items.

    scores (N,), targets (N,) bool, batch_ids (N,) integers. Batches without a positive have
    no AP and are left out of the mean (as in :func:`decomposability_gap`).
    """
    if scores.dim() != 1 or targets.shape != scores.shape or batch_ids.shape != scores.shape:
        raise ValueError(f"scores, targets and batch_ids must be 1-D of one length, got {tuple(scores.shape)}, "
                         f"{tuple(targets.shape)}, {tuple(batch_ids.shape)}")
    batches = [b for b in torch.unique(batch_ids) if (targets & (batch_ids == b)).any()]
    if not batches:
        raise ValueError("no batch holds a positive: the gap is undefined")
    masks = torch.stack([batch_ids == b for b in batches])  # (K, N): one row per batch
    rows = len(batches)
    batch_ap = average_precision(scores.expand(rows, -1), targets.expand(rows, -1), masks)
    global_ap = average_precision(scores[None], targets[None])[0]
    return float(batch_ap.mean() - global_ap)


def juxtaposed_batches(num_pos: Sequence[int], num_neg: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
    """The worst case of ROADMAP supp. Fig. 10 for one query: (scores (N,), targets (N,), batch_ids (N,)).

    Batch b holds num_pos[b] positives then num_neg[b] negatives (AP_b = 1), and every item of
    batch b scores above every item of batch b + 1: the global ranking is the batches laid
    end to end. Its gap equals ``dg_upper_bound(num_pos, num_neg, order="given")``.
    """
    num_pos, num_neg = _check_counts(num_pos=num_pos, num_neg=num_neg)
    targets = [flag for p, n in zip(num_pos, num_neg) for flag in [True] * p + [False] * n]
    batch_ids = [b for b, (p, n) in enumerate(zip(num_pos, num_neg)) for _ in range(p + n)]
    scores = torch.linspace(1.0, -1.0, len(targets), dtype=torch.float64)  # strictly decreasing: no ties
    return scores, torch.tensor(targets), torch.tensor(batch_ids)


def _check_counts(**columns: Sequence[int]) -> list[list[int]]:
    lists = [list(c) for c in columns.values()]
    names = list(columns)
    if not lists[0] or any(len(c) != len(lists[0]) for c in lists):
        raise ValueError(f"{', '.join(names)} must be non-empty sequences of one length (one entry per batch)")
    for name, c in zip(names, lists):
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in c):
            raise ValueError(f"{name} must hold integers >= 0, got {c!r}")
    return lists


def _min_over_orders(batches: list[BatchCounts], contrib: Callable[[BatchCounts, BatchCounts], float]) -> float:
    """min over batch orders of sum_b contrib(batch_b, column sums of the batches before b).

    The prefix only depends on the *set* of earlier batches, so this is a search over
    multisets of batch compositions (one state when all batches are alike).
    """
    types = sorted(set(batches))
    counts = tuple(batches.count(t) for t in types)
    states = 1
    for c in counts:
        states *= c + 1
    if states > MAX_ORDER_STATES:
        raise ValueError(f"{len(types)} distinct batch compositions are too many for order='worst'; use order='given'")

    @functools.lru_cache(maxsize=None)
    def best(used: tuple[int, ...]) -> float:
        prefix = tuple(sum(u * t[i] for u, t in zip(used, types)) for i in range(len(types[0])))
        options = [contrib(t, prefix) + best(used[:k] + (used[k] + 1,) + used[k + 1:])
                   for k, t in enumerate(types) if used[k] < counts[k]]
        return min(options) if options else 0.0

    return best(tuple(0 for _ in types))


def _in_order(batches: list[BatchCounts], contrib: Callable[[BatchCounts, BatchCounts], float]) -> float:
    total, prefix = 0.0, tuple(0 for _ in batches[0])
    for batch in batches:
        total += contrib(batch, prefix)
        prefix = tuple(a + b for a, b in zip(prefix, batch))
    return total


def _bound(batches: list[BatchCounts], contrib, num_pos: int, order: str) -> float:
    if order not in ("worst", "given"):
        raise ValueError(f"order must be 'worst' or 'given', got {order!r}")
    if num_pos < 1:
        raise ValueError("the query needs at least one positive")
    search = _min_over_orders if order == "worst" else _in_order
    return 1.0 - search(batches, contrib) / num_pos


def _eq8_terms(batch: BatchCounts, prefix: BatchCounts) -> float:
    (p, _), (sp, sn) = batch, prefix
    return sum((j + sp) / (j + sp + sn) for j in range(1, p + 1))


def dg_upper_bound(num_pos: Sequence[int], num_neg: Sequence[int], *, order: str = "worst") -> float:
    """ROADMAP Eq. 8 (SupRank Eq. 26): bound on DG for one query when AP_b = 1 in every batch.

    num_pos[b], num_neg[b]: |P^b|, |N^b| of batch b. The j-th positive of batch b is assumed
    ranked below all items of batches 1..b-1 (the juxtaposition of supp. Fig. 10):
    DG <= 1 - (1/sum_b |P^b|) sum_b sum_{j=1}^{|P^b|} (j + P_<b) / (j + P_<b + N_<b).
    (The inner sum runs over the |P^b| positives; the NeurIPS text's "B" is a typo, SupRank
    Eq. 26 has |Omega_b^+|.) ``order="given"``: batches stacked in the order listed, as
    printed; ``order="worst"`` (default): the order that makes the bound largest. The paper
    takes batches of one composition, where the two agree; otherwise only "worst" bounds
    every arrangement, and it is attained by :func:`juxtaposed_batches` in that order.
    """
    num_pos, num_neg = _check_counts(num_pos=num_pos, num_neg=num_neg)
    return _bound(list(zip(num_pos, num_neg)), _eq8_terms, sum(num_pos), order)


def _eq9_terms(batch: BatchCounts, prefix: BatchCounts) -> float:
    (g_pos, e_pos, _, _), (sg_pos, se_pos, sg_neg, se_neg) = batch, prefix
    sp, sn = sg_pos + se_pos, sg_neg + se_neg
    calibrated = sum((j + sg_pos) / (j + sg_pos + se_neg) for j in range(1, g_pos + 1))
    violating = sum((j + g_pos + sp) / (j + g_pos + sp + sn) for j in range(1, e_pos + 1))
    return calibrated + violating


def dg_upper_bound_calibrated(pos_above_alpha: Sequence[int], pos_below_alpha: Sequence[int],
                              neg_below_beta: Sequence[int], neg_above_beta: Sequence[int], *,
                              order: str = "worst") -> float:
    """ROADMAP Eq. 9 (SupRank Eq. 27): the bound of Eq. 8 refined by the calibration thresholds.

    Per batch b: G+_b = ``pos_above_alpha`` (positives with s >= alpha, L+_calibr. = 0 for them),
    E+_b = ``pos_below_alpha``, G-_b = ``neg_below_beta`` (s <= beta), E-_b = ``neg_above_beta``.
    A calibrated positive can only be outranked by the violating negatives E- of earlier
    batches; a violating one as in Eq. 8. With every constraint met (E+ = E- = 0) the bound
    is 0: a calibrated model's batch AP is its global AP. ``order`` as in :func:`dg_upper_bound`.

    Eq. 9 <= Eq. 8 whenever max_b E-_b / |N^b| <= min_b G+_b / |P^b| (e.g. all positives
    above alpha, or no negative above beta) — the paper's "tighter" needs this: with many
    violating negatives and few calibrated positives, Eq. 9 as printed is the larger one.
    """
    cols = _check_counts(pos_above_alpha=pos_above_alpha, pos_below_alpha=pos_below_alpha,
                         neg_below_beta=neg_below_beta, neg_above_beta=neg_above_beta)
    batches = list(zip(*cols))
    return _bound(batches, _eq9_terms, sum(cols[0]) + sum(cols[1]), order)


def calibration_counts(scores: Tensor, targets: Tensor, batch_ids: Tensor, alpha: float = 0.9,
                       beta: float = 0.6) -> dict[str, list[int]]:
    """G+, E+, G-, E- of each batch for one query (ROADMAP Sec. 3.2), keyed as the arguments of
    :func:`dg_upper_bound_calibrated`. scores, targets, batch_ids: (N,); batches in sorted id order."""
    if not alpha > beta:
        raise ValueError(f"alpha must be larger than beta, got alpha={alpha!r}, beta={beta!r}")
    out: dict[str, list[int]] = {"pos_above_alpha": [], "pos_below_alpha": [],
                                 "neg_below_beta": [], "neg_above_beta": []}
    for b in torch.unique(batch_ids):
        in_b = batch_ids == b
        pos, neg = scores[in_b & targets], scores[in_b & ~targets]
        out["pos_above_alpha"].append(int((pos >= alpha).sum()))
        out["pos_below_alpha"].append(int((pos < alpha).sum()))
        out["neg_below_beta"].append(int((neg <= beta).sum()))
        out["neg_above_beta"].append(int((neg > beta).sum()))
    return out
