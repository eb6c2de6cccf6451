"""The relevant items of each query, as short lists read from the labels (no (Q, N) label matrix).

A query's relevant items are the references sharing at least one of its label columns
(semantic level l >= 1, :func:`lab.core.relevance.shared_levels`); with flat labels, its class.
For labels that form a tree (each column determines the coarser ones), references sorted by
their labels, coarsest column first, put every label of every column in one contiguous run, and
the runs of a query's labels are nested: its list is the run of its coarsest label, and an item's
level is the number of the query's runs it lies in. Other labels merge the runs of all columns.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from ..core.relevance import shared_levels

PAD = -1  # item index of an empty slot of a list


class Lists(NamedTuple):
    """Per query of a chunk: (c, P) reference indices (PAD where empty) and their levels (0 there)."""

    items: np.ndarray
    levels: np.ndarray


class _Runs(NamedTuple):
    """One label column of the references in an order where each label is one run."""

    values: np.ndarray  # distinct labels, ascending
    starts: np.ndarray  # where each label's run starts in the order
    counts: np.ndarray


def _runs(labels_in_order: np.ndarray) -> _Runs:
    new = np.ones(len(labels_in_order), dtype=bool)
    new[1:] = labels_in_order[1:] != labels_in_order[:-1]
    starts = np.flatnonzero(new)
    values = labels_in_order[starts]
    by_value = np.argsort(values, kind="stable")
    counts = np.diff(np.append(starts, len(labels_in_order)))
    return _Runs(values[by_value], starts[by_value], counts[by_value])


def _find(runs: _Runs, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, count) of the run of each wanted label; count 0 where the references lack it."""
    where = np.searchsorted(runs.values, wanted).clip(max=len(runs.values) - 1)
    found = runs.values[where] == wanted
    return runs.starts[where], np.where(found, runs.counts[where], 0)


def _is_tree(labels: np.ndarray) -> bool:
    """True if each label column determines the next (coarser) one, for every row given."""
    return all(len(np.unique(labels[:, i : i + 2], axis=0)) == len(np.unique(labels[:, i]))
               for i in range(labels.shape[1] - 1))


class LabelIndex:
    """The references' labels, indexed once; :meth:`lists` gives the relevant items of queries.

    query_labels (Q, L) and ref_labels (N, L) integer tensors, finest column first.
    ``all_levels`` False: only the finest level is relevant (flat metrics).
    """

    def __init__(self, query_labels: Tensor, ref_labels: Tensor, all_levels: bool) -> None:
        self.ref_labels = ref_labels.view(len(ref_labels), -1).cpu()
        self.num = self.ref_labels.shape[1] if all_levels else 1
        refs = self.ref_labels.numpy()[:, : self.num]
        queries = query_labels.view(len(query_labels), -1).cpu().numpy()[:, : self.num]
        self.tree = _is_tree(np.concatenate([queries, refs]))
        if self.tree:  # one order: coarsest column first, each label a run, runs nested
            self.order = np.lexsort(refs.T)
            self.runs = [_runs(refs[self.order, i]) for i in range(self.num)]
        else:  # one order per column
            self.orders = [np.argsort(refs[:, i], kind="stable") for i in range(self.num)]
            self.runs = [_runs(refs[order, i]) for i, order in enumerate(self.orders)]

    def _lengths(self, q: np.ndarray) -> np.ndarray:
        columns = [self.num - 1] if self.tree else range(self.num)
        return sum(_find(self.runs[i], q[:, i])[1] for i in columns)

    def by_length(self, query_labels: Tensor) -> np.ndarray:
        """Queries (Q, L) by increasing length of their lists: chunks of them pad little."""
        return np.argsort(self._lengths(query_labels.view(len(query_labels), -1).cpu().numpy()), kind="stable")

    def lists(self, query_labels: Tensor, self_index: Optional[np.ndarray] = None) -> Lists:
        """Relevant items of a chunk of queries, query_labels (c, L); ``self_index`` (c,): each
        query's own reference index (self-retrieval), left out of its list."""
        q = query_labels.view(len(query_labels), -1).cpu()
        q_np = q.numpy()[:, : self.num]
        if self.tree:
            items, levels = self._tree_lists(q_np)
        else:
            parts = []
            for i, order in enumerate(self.orders):
                start, count = _find(self.runs[i], q_np[:, i])
                parts.append(_slice(order, start, count))
            items = _merge(np.concatenate(parts, axis=1))
            levels = shared_levels(q[:, : self.num], self.ref_labels[:, : self.num],
                                   torch.from_numpy(items.clip(min=0))).numpy()
        if self_index is not None:
            items = np.where(items == self_index[:, None], PAD, items)
        return Lists(items, np.where(items == PAD, 0, levels))

    def _tree_lists(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start, count = _find(self.runs[-1], q[:, -1])
        width = int(count.max(initial=0))
        position = start[:, None] + np.arange(width)
        inside = np.arange(width) < count[:, None]
        items = np.where(inside, self.order[position.clip(max=len(self.order) - 1)], PAD)
        levels = np.zeros(items.shape, dtype=np.int64)
        for i, runs in enumerate(self.runs):  # the query's run of each column: nested in the coarser ones
            first, size = _find(runs, q[:, i])
            levels += inside & (position >= first[:, None]) & (position < (first + size)[:, None])
        return items, levels


def _slice(order: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """(c, P) references order[start : start + count] per row (PAD past the end)."""
    offsets = np.arange(int(count.max(initial=0)))
    return np.where(offsets < count[:, None], order[(start[:, None] + offsets).clip(max=len(order) - 1)], PAD)


def _merge(candidates: np.ndarray) -> np.ndarray:
    """Rows of candidate indices (PAD allowed) -> the same sets without repeats (PAD-filled)."""
    big = np.iinfo(np.int64).max
    ordered = np.sort(np.where(candidates == PAD, big, candidates), axis=1)
    repeat = np.zeros(ordered.shape, dtype=bool)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return np.where(repeat | (ordered == big), PAD, ordered)
