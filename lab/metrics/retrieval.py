"""Embedding-level evaluation: R@k, mAP@R and mAP of a query set against a gallery."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from ..core.checks import check_chunk_size, check_ks, check_references, fine
from ..core.graded_ranks import GradedRanks, exact_graded_ranks
from ..core.relevance import check_alpha, hap_relevance, ndcg_relevance, num_levels, shared_levels
from .exact import Sorted, ap_from_ranks, hits_from_ranks, map_at_r_from_ranks, ranks_for, sort_scores
from .hierarchical import asi, h_ap_from_ranks, ndcg_from_ranks

BACKENDS = ("faiss", "torch")
EVAL_KS = (1, 2, 4, 8)  # the R@k ROADMAP reports on CUB (and the default here)
RETRIEVAL_KEYS = (*(f"R@{k}" for k in EVAL_KS), "mAP@R")  # what the lab's tables and figures show by default
# Score entries held at once: chunk of queries x gallery size (2**24 float32 = 64 MB).
MAX_CHUNK_ELEMENTS = 2**24


def _faiss_index(refs: Tensor):
    import faiss  # imported lazily: faiss is slow to import and only this backend needs it

    index = faiss.IndexFlatIP(refs.shape[1])
    if hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0:
        index = faiss.index_cpu_to_all_gpus(index)
    index.add(refs.detach().cpu().float().numpy())
    return index


def _ranked_lists(queries: Tensor, refs: Tensor, query_index: Optional[Tensor], backend: str, index):
    """Scores (c, N') of every gallery item for a chunk of queries and the items' indices.

    With ``query_index`` (self-retrieval) each query's own entry is removed by index, so a
    duplicate image elsewhere in the gallery still counts as a positive.
    """
    n = refs.shape[0]
    if backend == "torch":
        scores = queries @ refs.T
        items = torch.arange(n, device=scores.device).expand_as(scores)
    else:
        dist, idx = index.search(queries.detach().cpu().float().numpy(), n)
        scores = torch.from_numpy(dist).to(queries.device)
        items = torch.from_numpy(idx).to(queries.device)
    if query_index is None:
        return scores, items
    keep = items != query_index[:, None]
    return scores[keep].view(len(scores), n - 1), items[keep].view(len(scores), n - 1)


def _level_names(level_names: Optional[Sequence[str]], num: int) -> list[str]:
    if level_names is None:
        return [f"level{i}" for i in range(num)]
    names = list(level_names)
    if len(names) != num or any(not isinstance(n, str) or not n for n in names) or len(set(names)) != num:
        raise ValueError(f"level_names must be {num} distinct non-empty strings (finest first), got {level_names!r}")
    return names


def _hierarchical_sums(scores: Tensor, sorted_: Sorted, levels: Tensor, alpha: float,
                       names: list[str]) -> dict[str, float]:
    """Sums over a chunk of queries of H-AP, NDCG, ASI and the AP of each label level."""
    num = len(names)
    every = torch.ones_like(levels, dtype=torch.bool)
    presorted = (sorted_.order, sorted_.rank - 1)

    def graded(relevance: Tensor) -> GradedRanks:
        return exact_graded_ranks(scores, relevance, every, presorted)

    out = {"H-AP": float(h_ap_from_ranks(graded(hap_relevance(levels, num, alpha=alpha))).sum()),
           "NDCG": float(ndcg_from_ranks(graded(ndcg_relevance(levels))).sum()),
           "ASI": float(asi(scores, levels.float()).sum())}
    for column, name in enumerate(names):  # AP^(l) of Eq. 34: positives share the label at this column
        out[f"AP@{name}"] = float(ap_from_ranks(ranks_for(sorted_, levels >= num - column)).sum())
    return out


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
) -> dict[str, float]:
    """R@k (hit rate), mAP@R and mAP, averaged over queries, as fractions in [0, 1].

    With hierarchical labels (L > 1 columns, finest first) also ``"H-AP"`` (SupRank Eq. 19
    with the relevance of Eq. 20, ``alpha``), ``"NDCG"`` (rel = 2^l - 1), ``"ASI"`` and the
    AP at each label column, ``"AP@level0"`` (finest, = mAP) ... or ``"AP@<name>"`` with
    ``level_names``; computed over the same queries as the other keys.

    query_emb (Q, D), query_labels (Q,) or (Q, L) (finest level used); ref_emb (N, D),
    ref_labels (N,) or (N, L). Without references each query retrieves from the other
    queries. Cosine similarity. Queries with no other item of their class are left out and
    counted in ``"excluded_queries"``. ``backend="torch"`` gives the same numbers as faiss.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    ks = check_ks(ks)
    check_alpha(alpha)
    check_chunk_size(chunk_size)
    query_labels, ref_emb, ref_labels, self_retrieval = check_references(
        query_emb, query_labels, ref_emb, ref_labels, names=("query_emb", "query_labels", "ref_emb", "ref_labels"))

    device = query_emb.device
    queries = F.normalize(query_emb.detach().float(), dim=1)
    refs = F.normalize(ref_emb.detach().float().to(device), dim=1)
    q_lab, r_lab = fine(query_labels).contiguous(), fine(ref_labels).to(device).contiguous()

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

    index = _faiss_index(refs) if backend == "faiss" else None
    size = chunk_size or max(1, MAX_CHUNK_ELEMENTS // refs.shape[0])
    sums = {f"R@{k}": 0.0 for k in ks} | {"mAP@R": 0.0, "mAP": 0.0}
    hierarchical = num_levels(query_labels) > 1
    if hierarchical:
        names = _level_names(level_names, num_levels(query_labels))
        q_all, r_all = query_labels.to(device), ref_labels.to(device)
        sums |= {key: 0.0 for key in ("H-AP", "NDCG", "ASI", *[f"AP@{name}" for name in names])}
    chunks = range(0, len(kept), size)
    for start in tqdm(chunks, desc="retrieval metrics", disable=not progress, leave=False):
        rows = kept[start : start + size]
        scores, items = _ranked_lists(queries[rows], refs, rows if self_retrieval else None, backend, index)
        targets = r_lab[items] == q_lab[rows, None]
        sorted_ = sort_scores(scores, torch.ones_like(targets))  # one sort serves every metric
        ranks = ranks_for(sorted_, targets)
        for k, value in zip(ks, (hits_from_ranks(ranks, ks) > 0).sum(0).tolist()):
            sums[f"R@{k}"] += value
        sums["mAP@R"] += float(map_at_r_from_ranks(ranks).sum())
        sums["mAP"] += float(ap_from_ranks(ranks).sum())
        if hierarchical:
            levels = shared_levels(q_all[rows], r_all, items)
            for key, value in _hierarchical_sums(scores, sorted_, levels, alpha, names).items():
                sums[key] += value
    out = {name: total / len(kept) for name, total in sums.items()}
    out["num_queries"] = len(kept)
    out["excluded_queries"] = len(q_lab) - len(kept)
    return out
