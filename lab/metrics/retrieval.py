"""Embedding-level evaluation: R@k, mAP@R and mAP of a query set against a gallery.

Exact, without sorting the gallery for every query: the similarity blocks of a chunk of queries
are scanned once for the few items each query must rank (:mod:`lab.metrics.counting`,
:mod:`lab.metrics.list_metrics`). ``method="sort"`` is the reference: it sorts every row and
reads the metrics off the sort (:mod:`lab.metrics.exact`), O(N log N) per query; both give the
same numbers on the same similarities, ties included.
"""
from __future__ import annotations

import threading
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.checks import check_references, fine
from ..core.extras import require
from ..core.graded_ranks import GradedRanks, exact_graded_ranks
from ..core.normalize import PLAIN, _leading_bytes, duplicate_representatives, unit_rows
from ..core.relevance import hap_relevance, ndcg_relevance, num_levels, shared_levels
from .exact import Sorted, ap_from_ranks, hits_from_ranks, map_at_r_from_ranks, ranks_for, sort_scores
from .hierarchical import asi, h_ap_from_ranks, ndcg_from_ranks
from .chunking import budget_bytes, chunk_bounds
from .counting import counting_threads
from .parallel import chunk_workers, one_thread, run_chunks
from .list_metrics import list_metrics
from .options import EVAL_KS, RetrievalOptions, options_from, with_options_signature
from .relevant import LabelIndex

RETRIEVAL_KEYS = (*(f"R@{k}" for k in EVAL_KS), "mAP@R")  # what the lab's tables and figures show by default


def _work_device(device: torch.device) -> torch.device:
    """Where the evaluation runs: the embeddings' device, except where float64 is missing (MPS)."""
    return device if device.type in ("cpu", "cuda") else torch.device("cpu")


def _backend(backend: Optional[str], device: torch.device) -> str:
    """faiss computes on the CPU only: on a GPU the similarities are torch's, there."""
    return "torch" if backend is None or device.type != "cpu" else backend


def _similarities(refs_t: Tensor, backend: str, rows: int, columns: Optional[Tensor] = None):
    """A function (queries (c, D) normalised) -> (c, N) float32 similarities to every reference,
    refs_t (D, N). torch writes into one buffer of ``rows`` x N per worker thread, reused by each of its
    chunks (on the CPU no fresh pages each time); faiss computes on the CPU with its own kernel. ``columns`` (N,), when
    some references are copies: the first copy of each; every copy then reads that copy's column,
    so copies tie exactly as the tie rule says (faiss scores two copies differently by where its
    SIMD loop meets them), and both backends give the same numbers."""
    if backend == "torch":
        buffers = threading.local()  # one per worker thread

        def product(queries: Tensor) -> Tensor:
            if not hasattr(buffers, "block"):
                buffers.block = torch.empty(rows, refs_t.shape[1], device=refs_t.device)
            return torch.mm(queries, refs_t, out=buffers.block[: len(queries)])
    else:
        require("lab.metrics (backend='faiss')")  # without faiss: one line naming it (backend='torch' needs none)
        import faiss  # imported lazily: faiss is slow to import and only this backend needs it

        refs = refs_t.T.contiguous().numpy()

        def product(queries: Tensor) -> Tensor:
            return torch.from_numpy(faiss.pairwise_distances(queries.numpy(), refs, faiss.METRIC_INNER_PRODUCT))
    if columns is None:
        return product
    return lambda queries: product(queries).index_select(1, columns)


def _unit_rows(query_emb: Tensor, ref_emb: Optional[Tensor], device: torch.device
               ) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """(queries, references) as float32 unit rows on ``device`` (references: the queries themselves
    when ``ref_emb`` is None), and each reference's first copy (``duplicate_representatives``; None
    when none has a copy). unit_rows' range check and the check for copies, each a wait on the device
    when called alone, read their few numbers in one move to the host: the checks run on the rows
    F.normalize gives, which are unit_rows' own whenever the range check passes (every ordinary input)."""
    sides = [x.detach().to(device) for x in ((query_emb,) if ref_emb is None else (query_emb, ref_emb))]
    units = [F.normalize(x.to(torch.float32), dim=1) for x in sides]
    keys = torch.sort(_leading_bytes(units[-1])).values  # equal rows, equal keys: no equal keys, no copies
    may_repeat = (keys[1:] == keys[:-1]).any().double()[None]
    extents = [torch.stack(torch.aminmax(x.abs().amax(1))).double() for x in sides]  # smallest, largest max-abs
    *bounds, repeats = torch.cat(extents + [may_repeat]).tolist()  # the one wait
    plain = all(PLAIN[0] <= low and high <= PLAIN[1] for low, high in zip(bounds[::2], bounds[1::2]))
    if not plain:  # rows at 1e-30 or 1e30: unit_rows' scaled path (it checks the range again)
        units = [unit_rows(x, torch.float32) for x in sides]
    copies = duplicate_representatives(units[-1]) if repeats or not plain else None
    return units[0], units[-1], copies


def _level_names(level_names: Optional[Sequence[str]], num: int) -> list[str]:
    if level_names is None:
        return [f"level{i}" for i in range(num)]
    names = list(level_names)
    if len(names) != num or any(not isinstance(n, str) or not n for n in names) or len(set(names)) != num:
        raise ValueError(f"level_names must be {num} distinct non-empty strings (finest first), got {level_names!r}")
    return names


def _sorted_chunk(scores: Tensor, self_index: Optional[Tensor], q_labels: Tensor, r_labels: Tensor, ks,
                  alpha: float, names: Optional[list[str]]) -> dict[str, Tensor]:
    """The reference: per-query metrics (c,) of a chunk by sorting every row (labels (c, L) and (N, L))."""
    n = scores.shape[1]
    items = torch.arange(n, device=scores.device).expand_as(scores)
    if self_index is not None:  # the query's own entry removed by index: the items after it move up one
        items = items[:, : n - 1] + (items[:, : n - 1] >= self_index[:, None])
        scores = scores.gather(1, items)
    targets = fine(r_labels)[items] == fine(q_labels)[:, None]
    sorted_ = sort_scores(scores, torch.ones_like(targets))  # one sort serves every metric
    ranks = ranks_for(sorted_, targets)
    hits = (hits_from_ranks(ranks, ks) > 0).double()
    out = {f"R@{k}": hits[:, i] for i, k in enumerate(ks)}
    out["mAP@R"] = map_at_r_from_ranks(ranks).double()
    out["mAP"] = ap_from_ranks(ranks).double()
    if names is not None:
        out |= _hierarchical_values(scores, sorted_, shared_levels(q_labels, r_labels, items), alpha, names)
    return out


def _hierarchical_values(scores: Tensor, sorted_: Sorted, levels: Tensor, alpha: float,
                         names: list[str]) -> dict[str, Tensor]:
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
    return {key: value.double() for key, value in out.items()}


@with_options_signature
def retrieval_metrics(query_emb: Tensor, query_labels: Tensor, ref_emb: Optional[Tensor] = None,
                      ref_labels: Optional[Tensor] = None, **options) -> dict[str, float]:
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

    Runs on the embeddings' device (a GPU: everything stays there until the final means; MPS,
    which lacks float64, on the CPU). ``options``: keywords, each a field of
    :class:`lab.metrics.options.RetrievalOptions`, where its meaning and accepted values are given.
    """
    keys, order, values, total = _per_query(query_emb, query_labels, ref_emb, ref_labels, options_from(options))
    # Summed in query order, whatever order the chunks took: the same per-query values give the same
    # means, e.g. with one label column or with coarser ones added (their lists order the chunks otherwise).
    sums = values[:, torch.argsort(order)].sum(1).tolist()  # the one move to the host
    out = {key: value / len(order) for key, value in zip(keys, sums)}
    out["num_queries"] = len(order)
    out["excluded_queries"] = total - len(order)
    return out


@with_options_signature
def per_query_metrics(query_emb: Tensor, query_labels: Tensor, ref_emb: Optional[Tensor] = None,
                      ref_labels: Optional[Tensor] = None, **options) -> dict[str, Tensor]:
    """:func:`retrieval_metrics` query by query: {key: (Q,) float64} on the embeddings' work device,
    NaN for the queries it leaves out (no other item of their class). ``options``: those of
    :func:`retrieval_metrics`. What paired statistics and the decomposability gap need."""
    keys, order, values, total = _per_query(query_emb, query_labels, ref_emb, ref_labels, options_from(options))
    full = torch.full((len(keys), total), float("nan"), dtype=values.dtype, device=values.device)
    full[:, order] = values
    return dict(zip(keys, full))


def _per_query(query_emb: Tensor, query_labels: Tensor, ref_emb: Optional[Tensor], ref_labels: Optional[Tensor],
               options: RetrievalOptions) -> tuple[list[str], Tensor, Tensor, int]:
    """(keys, order (Q_kept,) query indices, values (len(keys), Q_kept) float64, Q): the kept
    queries by increasing list length, the order of the chunks."""
    ks, alpha, full_map = options.ks, options.alpha, options.full_map
    query_labels, ref_emb, ref_labels, self_retrieval = check_references(
        query_emb, query_labels, ref_emb, ref_labels, names=("query_emb", "query_labels", "ref_emb", "ref_labels"))

    device = _work_device(query_emb.device)
    backend = _backend(options.backend, device)
    queries, refs, copies = _unit_rows(query_emb, None if self_retrieval else ref_emb, device)
    refs_t = refs.T.contiguous()  # (D, N): one layout for mm
    q_all = query_labels.to(device).view(len(query_labels), -1)
    r_all = ref_labels.to(device).view(len(ref_labels), -1)
    n = refs_t.shape[1]

    num = num_levels(query_labels)
    if not full_map and num > 1:
        raise ValueError(f"full_map=False is for flat labels: query_labels has {num} levels, and H-AP, NDCG "
                         "and ASI need every relevant item's rank (use full_map=True)")
    names = _level_names(options.level_names, num) if num > 1 else None
    keys = [f"R@{k}" for k in ks] + ["mAP@R"] + (["mAP"] if full_map else [])
    if names is not None:
        keys += ["H-AP", "NDCG", "ASI", *[f"AP@{name}" for name in names]]
    index = LabelIndex(q_all, r_all, all_levels=names is not None)
    # Positives per query, from the labels' index on the host (no wait on the device for a unique or a
    # nonzero); the query's own copy does not count.
    q_host = q_all.cpu().long().numpy()
    kept_host = np.flatnonzero(index.class_sizes(q_host) - int(self_retrieval) > 0)
    if len(kept_host) == 0:
        raise ValueError("no query has another item of its class among the references: nothing to evaluate")
    kept = torch.from_numpy(kept_host).to(device)
    # Queries by increasing list length: chunks of similar lists pad little. Both methods take the same
    # chunks (a query's similarities can differ in the last bit from one chunk shape to another).
    widths = index.widths(q_host[kept_host])
    by_length = np.argsort(widths.sum(1), kind="stable")
    widths = widths[by_length]
    order = kept[torch.from_numpy(by_length).to(device)]
    # On the CPU with several threads, as many workers, each a chunk at a time on one torch thread: one
    # thread's product costs no more CPU time per score than two threads' on the same rows, and the
    # chunk's bookkeeping, serial in between, no longer leaves the other cores waiting. Each worker holds
    # its own chunk: the budget is shared out.
    budget = budget_bytes(device, options.memory_budget)
    workers = chunk_workers(device, backend, n, budget, options.chunk_size)
    budget //= workers
    bounds = chunk_bounds(widths, n, budget, device.type, index.num, options.chunk_size)
    similarities = _similarities(refs_t, backend, rows=max(end - start for start, end in bounds),
                                 columns=copies)
    values = torch.zeros(len(keys), len(kept), dtype=torch.float64, device=device)
    # The counts' share of the caller's threads (numpy, in Python threads) when one worker counts.
    threads = torch.get_num_threads() if workers == 1 else 1

    def chunk_values(bound: tuple[int, int]) -> None:
        start, end = bound
        rows = order[start:end]
        with one_thread(device):
            chunk_queries = queries.index_select(0, rows)
        scores = similarities(chunk_queries)  # the big product: with the caller's threads (or this worker's one)
        self_index = rows if self_retrieval else None
        if options.method == "sort":
            chunk = _sorted_chunk(scores, self_index, q_all[rows], r_all, ks, alpha, names)
        else:
            with one_thread(device), counting_threads(threads):
                if self_index is not None:
                    scores[torch.arange(len(rows), device=device), self_index] = float("-inf")
                lists = index.lists(q_all[rows], widths[start:end].max(0).tolist(), self_index)
                chunk = list_metrics(scores, lists, index.num, ks, alpha, graded=names is not None,
                                     level_keys=[f"AP@{name}" for name in names or ()], full_map=full_map)
        values[:, start:end] = torch.stack([chunk[key] for key in keys])  # disjoint columns: no lock

    run_chunks(chunk_values, bounds, workers, device, progress=options.progress)
    return keys, order, values, len(q_all)
