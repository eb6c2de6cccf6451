"""The relevant items of each query, as short lists read from the labels (no (Q, N) label matrix).

A query's relevant items are the references sharing at least one of its label columns
(semantic level l >= 1, :func:`lab.core.relevance.shared_levels`); with flat labels, its class.
For labels that form a tree (each column determines the coarser ones), references sorted by
their labels, coarsest column first, put every label of every column in one contiguous run, and
the runs of a query's labels are nested: its list is the run of its coarsest label, and an item's
level is the number of the query's runs it lies in. Other labels merge the runs of all columns.

The index is built once on the host (numpy); the lists of a chunk of queries are then read on
the labels' device, in torch, with widths the host already knows (:meth:`LabelIndex.widths`):
no value goes back to the host while the chunks are processed.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from ..core.relevance import shared_levels

PAD = -1  # item index of an empty slot of a list


class Lists(NamedTuple):
    """Per query of a chunk: (c, P) reference indices (PAD where empty) and their levels (0 there),
    int64 tensors on the labels' device."""

    items: Tensor
    levels: Tensor


class _Runs(NamedTuple):
    """One label column of the references in an order where each label is one run (numpy arrays on
    the host, or the same as tensors on the device)."""

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


def _count(runs: _Runs, wanted: np.ndarray) -> np.ndarray:
    """Size of the run of each wanted label (0 where the references lack it), on the host."""
    where = np.searchsorted(runs.values, wanted).clip(max=len(runs.values) - 1)
    return np.where(runs.values[where] == wanted, runs.counts[where], 0)


def _find(runs: _Runs, wanted: Tensor) -> tuple[Tensor, Tensor]:
    """(start, count) of the run of each wanted label, on the device; count 0 where absent."""
    values, starts, counts = runs
    where = torch.searchsorted(values, wanted.contiguous()).clamp_max(len(values) - 1)
    return starts[where], torch.where(values[where] == wanted, counts[where], 0)


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
        device = ref_labels.device
        self.ref_labels = ref_labels.view(len(ref_labels), -1).long()
        self.num = self.ref_labels.shape[1] if all_levels else 1
        refs = self.ref_labels.cpu().numpy()[:, : self.num]
        queries = query_labels.view(len(query_labels), -1).long().cpu().numpy()[:, : self.num]
        self.tree = _is_tree(np.concatenate([queries, refs]))
        # One order when the labels form a tree (coarsest column first: each label a run, runs
        # nested); else one order per column.
        orders = [np.lexsort(refs.T)] if self.tree else [np.argsort(refs[:, i], kind="stable") for i in range(self.num)]
        self.host_runs = [_runs(refs[orders[0 if self.tree else i], i]) for i in range(self.num)]
        self.orders = [torch.from_numpy(order).to(device) for order in orders]
        self.runs = [_Runs(*(torch.from_numpy(x).to(device) for x in runs)) for runs in self.host_runs]

    def widths(self, query_labels: np.ndarray) -> np.ndarray:
        """(Q, K) host array: the length of each part of each query's list (K = 1 for a tree, its
        coarsest run; else one run per column). query_labels (Q, L) on the host."""
        columns = [self.num - 1] if self.tree else range(self.num)
        return np.stack([_count(self.host_runs[i], query_labels[:, i]) for i in columns], 1)

    def class_sizes(self, query_labels: np.ndarray) -> np.ndarray:
        """(Q,) host array: the references sharing each query's finest label; query_labels (Q, L) on the host."""
        return _count(self.host_runs[0], query_labels[:, 0])

    def lists(self, query_labels: Tensor, widths: Sequence[int], self_index: Optional[Tensor] = None) -> Lists:
        """Relevant items of a chunk of queries, query_labels (c, L) on the device; ``widths``: the
        chunk's largest part lengths (:meth:`widths`); ``self_index`` (c,): each query's own
        reference index (self-retrieval), left out of its list."""
        q = query_labels.view(len(query_labels), -1)[:, : self.num].long()
        if self.tree:
            items, levels = self._tree_lists(q, widths[0])
        else:
            parts = []
            for i, (order, width) in enumerate(zip(self.orders, widths)):
                start, count = _find(self.runs[i], q[:, i])
                parts.append(_slice(order, start, count, width))
            items = _merge(torch.cat(parts, dim=1))
            levels = shared_levels(q, self.ref_labels[:, : self.num], items.clamp_min(0))
        if self_index is not None:
            items = items.masked_fill(items == self_index[:, None], PAD)
        return Lists(items, levels.masked_fill(items == PAD, 0))

    def _tree_lists(self, q: Tensor, width: int) -> tuple[Tensor, Tensor]:
        order = self.orders[0]
        start, count = _find(self.runs[-1], q[:, -1])
        offsets = torch.arange(width, device=q.device)
        position = start[:, None] + offsets
        inside = offsets < count[:, None]
        items = torch.where(inside, order[position.clamp_max(len(order) - 1)], PAD)
        levels = torch.zeros(items.shape, dtype=torch.int64, device=q.device)
        for i, runs in enumerate(self.runs):  # the query's run of each column: nested in the coarser ones
            first, size = _find(runs, q[:, i])
            levels += inside & (position >= first[:, None]) & (position < (first + size)[:, None])
        return items, levels


def _slice(order: Tensor, start: Tensor, count: Tensor, width: int) -> Tensor:
    """(c, width) references order[start : start + count] per row (PAD past the end)."""
    offsets = torch.arange(width, device=order.device)
    return torch.where(offsets < count[:, None], order[(start[:, None] + offsets).clamp_max(len(order) - 1)], PAD)


def _merge(candidates: Tensor) -> Tensor:
    """Rows of candidate indices (PAD allowed) -> the same sets without repeats (PAD where one was)."""
    big = torch.iinfo(torch.int64).max
    ordered = torch.sort(candidates.masked_fill(candidates == PAD, big), dim=1).values
    repeat = torch.zeros(ordered.shape, dtype=torch.bool, device=ordered.device)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return ordered.masked_fill(repeat | (ordered == big), PAD)
