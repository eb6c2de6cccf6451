"""Embedding-level evaluation: R@k, mAP@R and mAP of a query set against a gallery.

Exact, without sorting the gallery for every query: the similarity blocks of a chunk of queries
are scanned once for the few items each query must rank (:mod:`lab.metrics.counting`,
:mod:`lab.metrics.list_metrics`). ``method="sort"`` is the reference: it sorts every row and
reads the metrics off the sort (:mod:`lab.metrics.exact`), O(N log N) per query; both give the
same numbers on the same similarities, ties included.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from ..core.checks import check_chunk_size, check_ks, check_references, fine
from ..core.graded_ranks import GradedRanks, exact_graded_ranks
from ..core.relevance import check_alpha, hap_relevance, ndcg_relevance, num_levels, shared_levels
from .exact import Sorted, ap_from_ranks, hits_from_ranks, map_at_r_from_ranks, ranks_for, sort_scores
from .hierarchical import asi, h_ap_from_ranks, ndcg_from_ranks
from .list_metrics import list_metrics
from .relevant import LabelIndex

BACKENDS = ("faiss", "torch")
METHODS = ("count", "sort")
EVAL_KS = (1, 2, 4, 8)  # the R@k ROADMAP reports on CUB (and the default here)
RETRIEVAL_KEYS = (*(f"R@{k}" for k in EVAL_KS), "mAP@R")  # what the lab's tables and figures show by default
# Score entries held at once: chunk of queries x gallery size (2**22 float32 = 16 MB, cache-sized).
MAX_CHUNK_ELEMENTS = 2**22


def _score_block(queries: Tensor, refs: Tensor, backend: str) -> Tensor:
    """(c, N) float32 similarities of a chunk of (normalised) queries to every reference item."""
    if backend == "torch":
        return queries @ refs.T
    import faiss  # imported lazily: faiss is slow to import and only this backend needs it

    q, r = (x.detach().cpu().float().numpy() for x in (queries, refs))
    return torch.from_numpy(faiss.pairwise_distances(q, r, faiss.METRIC_INNER_PRODUCT))


def _level_names(level_names: Optional[Sequence[str]], num: int) -> list[str]:
    if level_names is None:
        return [f"level{i}" for i in range(num)]
    names = list(level_names)
    if len(names) != num or any(not isinstance(n, str) or not n for n in names) or len(set(names)) != num:
        raise ValueError(f"level_names must be {num} distinct non-empty strings (finest first), got {level_names!r}")
    return names


def _sorted_chunk(scores: Tensor, self_index: Optional[Tensor], q_labels: Tensor, r_labels: Tensor, ks,
                  alpha: float, names: Optional[list[str]]) -> dict[str, np.ndarray]:
    """The reference: per-query metrics (c,) of a chunk by sorting every row (labels (c, L) and (N, L))."""
    n = scores.shape[1]
    items = torch.arange(n, device=scores.device).expand_as(scores)
    if self_index is not None:  # the query's own entry removed by index
        keep = items != self_index[:, None]
        scores, items = scores[keep].view(len(scores), n - 1), items[keep].view(len(scores), n - 1)
    targets = fine(r_labels)[items] == fine(q_labels)[:, None]
    sorted_ = sort_scores(scores, torch.ones_like(targets))  # one sort serves every metric
    ranks = ranks_for(sorted_, targets)
    hits = (hits_from_ranks(ranks, ks) > 0).double().cpu().numpy()
    out = {f"R@{k}": hits[:, i] for i, k in enumerate(ks)}
    out["mAP@R"] = map_at_r_from_ranks(ranks).double().cpu().numpy()
    out["mAP"] = ap_from_ranks(ranks).double().cpu().numpy()
    if names is not None:
        out |= _hierarchical_values(scores, sorted_, shared_levels(q_labels, r_labels, items), alpha, names)
    return out


def _hierarchical_values(scores: Tensor, sorted_: Sorted, levels: Tensor, alpha: float,
                         names: list[str]) -> dict[str, np.ndarray]:
    """H-AP, NDCG, ASI and the AP of each label level of a chunk of queries, (c,) each."""
    num = len(names)
    every = torch.ones_like(levels, dtype=torch.bool)
    presorted = (sorted_.order, sorted_.rank - 1)

    def graded(relevance: Tensor) -> GradedRanks:
        return exact_graded_ranks(scores, relevance, every, presorted)

    out = {"H-AP": h_ap_from_ranks(graded(hap_relevance(levels, num, alpha=alpha))),
           "NDCG": ndcg_from_ranks(graded(ndcg_relevance(levels))),
           "ASI": asi(scores, levels.float())}
    for column, name in enumerate(names):  # AP^(l) of Eq. 34: positives share the label at this column
        out[f"AP@{name}"] = ap_from_ranks(ranks_for(sorted_, levels >= num - column))
    return {key: value.double().cpu().numpy() for key, value in out.items()}


def retrieval_metrics(
    query_emb: Tensor,
    query_labels: Tensor,
    ref_emb: Optional[Tensor] = None,
    ref_labels: Optional[Tensor] = None,
    ks: Sequence[int] = EVAL_KS,
    backend: str = "faiss",
    chunk_size: Optional[int] = None,
    progress: bool = False,
    alpha: float = 1.0,
    level_names: Optional[Sequence[str]] = None,
    method: str = "count",
) -> dict[str, float]:
    """R@k (hit rate), mAP@R and mAP, averaged over queries, as fractions in [0, 1].

    With hierarchical labels (L > 1 columns, finest first) also ``"H-AP"`` (SupRank Eq. 19
    with the relevance of Eq. 20, ``alpha``), ``"NDCG"`` (rel = 2^l - 1), ``"ASI"`` and the
    AP at each label column, ``"AP@level0"`` (finest, = mAP) ... or ``"AP@<name>"`` with
    ``level_names``; computed over the same queries as the other keys.

    query_emb (Q, D), query_labels (Q,) or (Q, L) (finest level used); ref_emb (N, D),
    ref_labels (N,) or (N, L). Without references each query retrieves from the other
    queries (its own entry removed by index: a duplicate image still counts). Cosine
    similarity; ties are pessimistic (a tie with a negative ranks it above the positive).
    Queries with no other item of their class are left out and counted in ``"excluded_queries"``.
    ``backend``: who computes the similarity blocks, ``"torch"`` (on the embeddings' device)
    or ``"faiss"`` (its CPU kernel); the same numbers. ``method="sort"``: the slow reference.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    ks = check_ks(ks)
    check_alpha(alpha)
    check_chunk_size(chunk_size)
    query_labels, ref_emb, ref_labels, self_retrieval = check_references(
        query_emb, query_labels, ref_emb, ref_labels, names=("query_emb", "query_labels", "ref_emb", "ref_labels"))

    device = query_emb.device
    queries = F.normalize(query_emb.detach().float(), dim=1)
    refs = F.normalize(ref_emb.detach().float().to(device), dim=1)
    q_all = query_labels.view(len(query_labels), -1)
    r_all = ref_labels.to(device).view(len(ref_labels), -1)
    q_lab, r_lab = fine(q_all).contiguous(), fine(r_all).contiguous()

    # Positives per query, by label counts; the query's own copy does not count.
    uniq, r_counts = torch.unique(r_lab, return_counts=True)
    pos_in_refs = torch.zeros_like(q_lab)
    where = torch.searchsorted(uniq, q_lab).clamp_max(len(uniq) - 1)
    found = uniq[where] == q_lab
    pos_in_refs[found] = r_counts[where[found]]
    num_pos = pos_in_refs - int(self_retrieval)
    kept = torch.nonzero(num_pos > 0).squeeze(1)
    if len(kept) == 0:
        raise ValueError("no query has another item of its class among the references: nothing to evaluate")

    num = num_levels(query_labels)
    names = _level_names(level_names, num) if num > 1 else None
    size = chunk_size or max(1, MAX_CHUNK_ELEMENTS // refs.shape[0])
    keys = [f"R@{k}" for k in ks] + ["mAP@R", "mAP"]
    if names is not None:
        keys += ["H-AP", "NDCG", "ASI", *[f"AP@{name}" for name in names]]
    # Per query, in the order of ``kept``: the means below add them up in one order whatever the chunks.
    values = {key: np.zeros(len(kept)) for key in keys}
    index = LabelIndex(q_all, r_all, all_levels=names is not None)
    # Chunks of queries with lists of similar length pad little. Both methods take the same chunks:
    # a query's similarities can differ in the last bit from one chunk shape to another.
    by_length = index.by_length(q_all[kept])
    chunks = range(0, len(kept), size)
    on_cpu = device.type == "cpu"  # numpy indexing: no thread start-up for a small gather
    for start in tqdm(chunks, desc="retrieval metrics", disable=not progress, leave=False):
        positions = by_length[start : start + size]
        rows = kept[torch.from_numpy(positions).to(kept.device)]
        chunk_queries = torch.from_numpy(queries.numpy()[rows.numpy()]) if on_cpu else queries[rows]
        scores = _score_block(chunk_queries, refs, backend)
        self_index = rows.to(scores.device) if self_retrieval else None
        if method == "sort":
            chunk = _sorted_chunk(scores, self_index, q_all[rows], r_all.to(scores.device), ks, alpha, names)
        else:
            own = rows.cpu().numpy() if self_retrieval else None
            if own is not None:
                if scores.is_cuda:
                    scores[torch.arange(len(rows), device=scores.device), self_index] = float("-inf")
                else:
                    scores.numpy()[np.arange(len(rows)), own] = -np.inf
            lists = index.lists(q_all[rows], own)
            chunk = list_metrics(scores, lists, index.num, ks, alpha, graded=names is not None,
                                 level_keys=[f"AP@{name}" for name in names or ()])
        for key, per_query in chunk.items():
            values[key][positions] = per_query
    out = {key: float(per_query.sum()) / len(kept) for key, per_query in values.items()}
    out["num_queries"] = len(kept)
    out["excluded_queries"] = len(q_lab) - len(kept)
    return out
