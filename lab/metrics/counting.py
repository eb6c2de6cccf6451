"""How many items score at least as high as each of a few thresholds, without sorting every row.

The exact ranks of evaluation only ever read counts: with pessimistic ties (ROADMAP Eq. 3,
H(0) = 1) the rank of a relevant item k is rank(k) = #{j : s_j >= s_k}. A query has P relevant
items among N gallery items. :func:`count_at_least` picks, per chunk of rows, the cheapest of
four exact ways, by the costs below (ns per score, measured on this 2-core machine):

* few items at or above the lowest threshold (a class of ~8 images, a trained model): keep
  those (one comparison over the row) and compare them with the P thresholds;
* one comparison pass over the block per threshold, counted row by row, on slabs of rows that
  stay in a core's cache (~0.14 ns a score and threshold): few thresholds (flat labels, ~8 per
  class) with many items above them (hard data: R@1 < 0.1, the positives spread over the row);
* with P small next to N, few kept items: *bucket* every kept item by the number of thresholds
  at or below it, B(j) = #{p : t_p <= s_j}, through a uniform grid of cells over the thresholds'
  range (a table lookup, a few comparisons in the cells that hold several thresholds); then
  #{j : s_j >= t_p} = #{j : B(j) >= B(t_p)}, a histogram (~15 ns a kept item);
* otherwise (many thresholds over most of the row: a coarse hierarchy level, hard data) sort the
  rows and search them. Its cost depends on the machine's numpy build and on N far more than the
  others' (1.3 ns a score at N = 500, 8-21 ns at 2k-60k here, 3 ns on an earlier host with a
  vectorised sort), so it is timed once per row length (rounded up to a power of 2) on first use.

The share of items kept is estimated on every 8th row first, so that the passes and the sort do
not pay for a full keeping pass they do not use. All four give the same integers as a sort
(tests/test_metrics_fast.py).

On the CPU a chunk's rows can be counted by several Python threads at once (numpy releases the
GIL in its loops): :func:`counting_threads`, which ``retrieval_metrics`` sets to the caller's torch
threads. Each thread counts a contiguous share of the rows, with the way cheapest for its share.

Metrics that stop at the top of the list (R@k, mAP@R: AccuracyCalculator's) need a positive's
exact rank only while it is small: :func:`count_at_least` takes a per-row ``cap`` and reports any
count above it as :data:`BEYOND`. On the CPU the comparison passes then go from each row's highest
threshold down and leave a row at its first count above the cap (the lower thresholds count at
least as many): on hard data most rows stop after one pass instead of P.

On a GPU (any device but the CPU) the counts are made there, in torch, without waiting on the
host: with few thresholds one broadcast comparison (c, P, N) summed along the rows; otherwise
one bucket key per item, B(j) (a batched binary search among the row's sorted thresholds), and
a histogram of the keys per row (``scatter_add_``: ``bincount`` would read its range on the host).
Neither is timed on a GPU yet.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

# Compare the kept items with the thresholds while that costs at most this many comparisons per
# score of the block: then it is the cheapest way.
COMPARISONS_PER_SCORE = 1.0
# Costs in ns on 2 shared cores, each way's own (measured with numpy 2.4, N = 5k-30k, P = 7-79): a
# comparison pass on cache-sized slabs, per score and threshold; keeping the items at or above the
# lowest threshold, per score; bucketing a kept item on the grid.
PASS_COST, KEEP_COST, GRID_COST = 0.14, 1.0, 15.0
SORT_COST: Optional[float] = None  # ns a score to sort rows; None: timed on this machine (_sort_cost)
SORT_SAMPLE_SCORES = 2**16  # scores sorted to time it: about a millisecond
_sort_costs: dict[int, float] = {}  # row length (a power of 2) -> ns a score
# Passes only for at most this many thresholds (a bound on the Python loop). A coarse level of 80 images
# on hard data counts fastest by passes (15k: 12 ns a score, the sort 17, the grid 20).
MAX_PASSES = 128
SAMPLE_EVERY = 8  # rows: the kept share is estimated on every 8th row of the chunk
CELLS_PER_THRESHOLD = 8  # grid resolution: few cells hold two thresholds
MAX_CELLS_PER_SCORE = 1.0  # a grid costs per cell about what it saves per score: beyond N cells, sort the rows
SLAB_SCORES = 2**18  # scores per slab of the comparison passes: 1 MB of float32, half a core's L2 here
# On a device: a broadcast comparison while it holds at most this many bools per score (chunking.SCORE_BYTES
# counts 8), else bucket keys. The crossover is an estimate (bytes moved), not yet measured on a GPU.
DEVICE_MAX_PASSES = 8
SPREAD = 32  # spare bins per row for the bucket keys that no count reads (a warp's width)
BEYOND = 2**40  # a count above its row's cap: larger than any rank
MIN_ROWS_PER_THREAD = 32  # below this a thread's share costs more to hand over than to count
_threads: contextvars.ContextVar[int] = contextvars.ContextVar("ranklab_counting_threads", default=1)
# One pool for the process, kept between chunks: starting threads for every chunk doubled the cost
# of counting (30k x 30k hard data, 138-row chunks: 1.6 ns a score instead of 0.8).
_pool: tuple[int, Optional[ThreadPoolExecutor]] = (0, None)
_pool_lock = threading.Lock()


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        size, pool = _pool
        if pool is None or size < threads:
            if pool is not None:
                pool.shutdown(wait=False)  # its threads end once their work is done
            # Each new thread's first torch op re-applies torch's thread count, which in a forked
            # child re-creates torch's own pool; that re-creation is not thread-safe (two threads at
            # once: "Invalid thread pool!", 6 % of children). Doing it here first leaves them none.
            torch.set_num_threads(torch.get_num_threads())
            _pool = (threads, ThreadPoolExecutor(threads, thread_name_prefix="ranklab-counting"))
        return _pool[1]


def _forget_pool() -> None:
    """A forked child has none of its parent's threads: it starts its own pool when it counts."""
    global _pool, _pool_lock
    _pool, _pool_lock = (0, None), threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_forget_pool)


@contextlib.contextmanager
def counting_threads(n: int) -> Iterator[None]:
    """``with counting_threads(2): ...``: the CPU counts in this block (this thread only) use ``n``
    Python threads, each on its share of the rows."""
    token = _threads.set(max(1, int(n)))
    try:
        yield
    finally:
        _threads.reset(token)


class Counts(NamedTuple):
    """Per threshold (c, P), int64 tensors on the scores' device, 0 on padding."""

    at_least: Tensor  # #{j : s_j >= t_p} over the row
    among: Tensor  # #{q : t_q <= t_p}: the rank of t_p among the row's thresholds, from the bottom


class _Grid:
    """Each row's thresholds t (c, P) on a uniform grid of cells over their range, to read
    B(x) = #{p : t_p <= x} for any value x of the row: the thresholds in lower cells, plus those
    of x's own cell that are <= x (one comparison, a few in the cells that hold several)."""

    def __init__(self, t: np.ndarray, cells: int) -> None:
        c, p = t.shape
        finite = np.isfinite(t)
        self.lo = np.where(finite.any(1), t.min(1), 0).astype(np.float32)
        hi = np.where(finite, t, -np.inf).max(1, initial=-np.inf)
        self.scale = ((cells - 1) / np.where(hi > self.lo, hi - self.lo, 1)).astype(np.float32)
        self.cells, self.p = cells, p
        ascending = np.sort(t, axis=1)  # padding last; the cells never decrease along a row
        values = np.where(np.isfinite(ascending), ascending, 0).ravel()
        cell = np.where(np.isfinite(ascending), self.cell(values, _row_of(c, p)).reshape(c, p), cells)
        per_cell = np.bincount((np.arange(c)[:, None] * (cells + 1) + cell).ravel(), minlength=c * (cells + 1))
        per_cell = per_cell.reshape(c, cells + 1)[:, :cells]
        # Per cell (raveled): where its thresholds start in ``sorted``, how many it holds and its
        # only threshold (inf if none, NaN if several).
        self.sorted = ascending.ravel()
        lower = np.cumsum(per_cell, axis=1) - per_cell  # thresholds in lower cells
        self.count = per_cell.astype(np.int32).ravel()
        only = self.sorted[np.minimum(lower + np.arange(c)[:, None] * p, c * p - 1).ravel()]
        self.only = np.where(self.count == 1, only, np.where(self.count == 0, np.inf, np.nan)).astype(np.float32)
        self.key = (lower + np.arange(c)[:, None] * (p + 1)).astype(np.intp).ravel()  # row * (P + 1) + lower
        self.crowded = bool(np.isnan(self.only).any())

    def cell(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cell of each value x (K,) of row ``rows`` (K,); the same float32 arithmetic for items and
        thresholds, so the cell is a non-decreasing function of the value (-inf and values below the
        lowest threshold: cell 0)."""
        y = x - self.lo[rows]
        y *= self.scale[rows]
        np.clip(y, 0, self.cells - 1, out=y)
        return y.astype(np.intp)  # np.take indexes with intp: other index types cost a conversion

    def keys(self, flat: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(K,) float32 values and their rows (K,) intp -> (K,) keys row * (P + 1) + B(x)."""
        cell = self.cell(flat, rows)
        cell += rows * self.cells
        edge = np.take(self.only, cell)
        out = np.take(self.key, cell)
        out += flat >= edge
        crowded = np.flatnonzero(np.isnan(edge)) if self.crowded else ()
        if len(crowded):  # cells with several thresholds: compare with each of them
            where = cell[crowded]
            start = out[crowded] - where // self.cells  # the cell's first threshold in ``sorted``
            size, values = self.count[where], flat[crowded]
            extra = np.zeros(crowded.size, dtype=out.dtype)
            for i in range(int(size.max())):
                more = size > i
                extra[more] += values[more] >= self.sorted[start[more] + i]
            out[crowded] += extra
        return out


def _row_of(c: int, m: int) -> np.ndarray:
    """The row of each entry of a raveled (c, m) array."""
    return np.repeat(np.arange(c, dtype=np.intp), m)


def _tie_ends(ascending: np.ndarray) -> np.ndarray:
    """(c, P) sorted rows -> 1 + index of the last entry equal to each one."""
    c, p = ascending.shape
    end = np.ones((c, p), dtype=bool)
    end[:, :-1] = ascending[:, 1:] != ascending[:, :-1]
    return np.minimum.accumulate(np.where(end, np.arange(1, p + 1), p)[:, ::-1], axis=1)[:, ::-1]


def _among(t: np.ndarray, grid: Optional[_Grid] = None) -> np.ndarray:
    """#{finite t_q <= t_p} per row (0 for padding): comparing all pairs when few, else on the
    grid or by sorting the thresholds."""
    c, p = t.shape
    if grid is not None:
        among = grid.keys(t.ravel(), _row_of(c, p)).reshape(c, p) - (np.arange(c) * (p + 1))[:, None]
    elif p <= 64:
        among = (t[:, None, :] <= t[:, :, None]).sum(2)
    else:
        order = np.argsort(t, axis=1)
        among = np.empty_like(order)
        np.put_along_axis(among, order, _tie_ends(np.take_along_axis(t, order, axis=1)), axis=1)
    return np.where(np.isfinite(t), among, 0)


def _by_sorting(s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort the rows; #{j : s_j >= t_p} = N - (the place of t_p in its sorted row), one batched search."""
    rows = torch.from_numpy(np.sort(s, axis=1))
    below = torch.searchsorted(rows, torch.from_numpy(np.ascontiguousarray(t)), side="left").numpy()
    return np.where(np.isfinite(t), s.shape[1] - below, 0), _among(t)


def _count_row_by_row(slab: np.ndarray, thresholds: np.ndarray, out: np.ndarray) -> np.ndarray:
    """#{j : slab[i, j] >= thresholds[i]} per row, through the bool buffer ``out`` (the slab's shape)."""
    np.greater_equal(slab, thresholds[:, None], out=out)
    total = np.uint16 if slab.shape[1] < 2**16 else np.int32  # the narrowest sum that cannot overflow: the fastest
    return out.view(np.uint8).sum(1, dtype=total)  # faster than count_nonzero(axis=1)


def _by_passes(s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One comparison pass per threshold column (padding, +inf, counts 0), slab by slab of rows:
    a slab is read from memory once and compared with every threshold while it stays in cache."""
    c, n = s.shape
    at_least = np.zeros(t.shape, dtype=np.int64)
    columns = np.flatnonzero(np.isfinite(t).any(0))
    rows = max(1, SLAB_SCORES // n)
    buffer = np.empty((min(rows, c), n), dtype=bool)
    for lo in range(0, c, rows):
        slab, thresholds = s[lo : lo + rows], t[lo : lo + rows]
        for p in columns:
            at_least[lo : lo + rows, p] = _count_row_by_row(slab, thresholds[:, p], buffer[: len(slab)])
    return at_least, _among(t)


def _by_capped_passes(s: np.ndarray, t: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One comparison pass per threshold from each row's highest down, over the rows whose counts
    so far are within their cap; the thresholds after a count above it are :data:`BEYOND` uncounted."""
    c, n = s.shape
    order = np.argsort(np.where(np.isfinite(t), -t, np.inf), axis=1, kind="stable")  # highest first, padding last
    descending = np.take_along_axis(t, order, axis=1)
    counted = np.where(np.isfinite(descending), BEYOND, 0)
    rows = max(1, SLAB_SCORES // n)
    buffer = np.empty((min(rows, c), n), dtype=bool)
    going = np.arange(c)
    for p in range(t.shape[1]):
        going = going[np.isfinite(descending[going, p])]
        if not len(going):
            break
        counts = np.empty(len(going), dtype=np.int64)
        for lo in range(0, len(going), rows):
            slab_rows = going[lo : lo + rows]
            first, last = slab_rows[0], slab_rows[-1]
            slab = s[first : last + 1] if last - first + 1 == len(slab_rows) else s[slab_rows]  # a view when it can
            counts[lo : lo + rows] = _count_row_by_row(slab, descending[slab_rows, p], buffer[: len(slab_rows)])
        within = counts <= cap[going]
        counted[going[within], p] = counts[within]
        going = going[within]
    at_least = np.empty_like(counted)
    np.put_along_axis(at_least, order, counted, axis=1)
    return at_least, _among(t)


def _from_keys(keys: np.ndarray, t: np.ndarray, among: np.ndarray) -> np.ndarray:
    """#{j : s_j >= t_p} = #{j : B(j) >= B(t_p)}; keys = row * (P + 1) + B(j) of the counted items."""
    c, p = t.shape
    hist = np.bincount(keys, minlength=c * (p + 1)).reshape(c, p + 1)
    at_least = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]  # at_least[:, b] = #{j : B(j) >= b}
    return np.where(among > 0, np.take_along_axis(at_least, among, axis=1), 0)


def _on_device(scores: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
    """The counts in torch, on the scores' device, with no value read on the host."""
    p = t.shape[1]
    ascending = torch.sort(t, dim=1).values  # padding (+inf) last
    finite = torch.isfinite(t)
    among = torch.searchsorted(ascending, t, right=True).masked_fill_(~finite, 0)
    if p <= DEVICE_MAX_PASSES:
        return _compared(scores, t), among
    return _bucketed(scores, ascending).gather(1, among).masked_fill_(~finite, 0), among


def _compared(scores: Tensor, t: Tensor) -> Tensor:
    """#{j : s_j >= t_p} (c, P) from one broadcast comparison (c, P, N), P bytes a score (padding: no
    score is >= +inf). A bool tensor summed into int64 is first copied to int64 (8 bytes a bool);
    read as int32 words it is summed as is: each byte of a word adds one comparison, and a group of
    255 words keeps every byte under 256, so no byte carries into the next."""
    c, n = scores.shape
    p = t.shape[1]
    group = 4 * 255  # bools a group of int32 words holds
    hits = torch.zeros(c, p, -(-n // group) * group, dtype=torch.bool, device=scores.device)
    torch.ge(scores[:, None, :], t[:, :, None], out=hits[:, :, :n])
    lanes = hits.view(torch.int32).view(c, p, -1, 255).sum(3, dtype=torch.int32)  # 4 byte-wide counters a word
    return lanes.view(torch.uint8).view(c, p, -1).sum(2)  # (c, P, N / 255) bytes: small


def _bucketed(scores: Tensor, ascending: Tensor) -> Tensor:
    """[:, b] = #{j : B(j) >= b} (c, P + 1) from one bucket key per item, B(j) = #{p : t_p <= s_j}, and
    a histogram of the keys per row. Keys 0 (below every threshold, often most of a row) are never
    read: they go to SPREAD spare bins by column, so that neighbouring items do not all add to one
    counter (the adds are atomic on a GPU)."""
    c, n = scores.shape
    p = ascending.shape[1]
    keys = torch.searchsorted(ascending, scores, right=True)  # (c, N) int64
    spare = torch.arange(n, device=scores.device) % SPREAD + (p + 1)
    torch.where(keys > 0, keys, spare, out=keys)  # in place: one bool a score more, not another key
    hist = torch.zeros(c, p + 1 + SPREAD, dtype=torch.int64, device=scores.device)
    hist.scatter_add_(1, keys, torch.ones((), dtype=torch.int64, device=scores.device).expand_as(keys))
    return hist[:, : p + 1].flip(1).cumsum(1).flip(1)


def count_at_least(scores: Tensor, thresholds: Tensor, cap: Optional[Tensor] = None) -> Counts:
    """scores (c, N), thresholds (c, P) float32 -> :class:`Counts`: #{j : scores[i, j] >= thresholds[i, p]}
    and each threshold's rank among its row's thresholds.

    Scores must not be NaN (-inf marks an item that never counts, e.g. the query itself); a
    threshold of +inf is padding. ``cap`` (c,) int64: every count above its row's cap is
    :data:`BEYOND` (whichever way counted it). On the CPU the work is done in numpy, vectorised;
    on another device in torch, there (:func:`_on_device`).
    """
    if thresholds.shape[1] == 0:
        zeros = torch.zeros(thresholds.shape, dtype=torch.int64, device=thresholds.device)
        return Counts(zeros, zeros)
    if scores.device.type != "cpu":
        at_least, among = _on_device(scores, thresholds)
        if cap is not None:
            at_least = torch.where(at_least > cap[:, None], BEYOND, at_least)
        return Counts(at_least, among)
    s, t = scores.numpy(), thresholds.numpy()
    caps = None if cap is None else cap.numpy()
    threads = min(_threads.get(), len(t) // MIN_ROWS_PER_THREAD)
    if threads <= 1:
        at_least, among = _count_numpy(s, t, caps)
    else:
        edges = np.linspace(0, len(t), threads + 1).astype(int)
        parts = list(_executor(threads).map(
            lambda lo, hi: _count_numpy(s[lo:hi], t[lo:hi], None if caps is None else caps[lo:hi]),
            edges[:-1], edges[1:]))
        at_least, among = (np.concatenate(part) for part in zip(*parts))
    if caps is not None:
        at_least = np.where(at_least > caps[:, None], BEYOND, at_least)
    return Counts(torch.from_numpy(at_least), torch.from_numpy(among))


def _sort_cost(n: int) -> float:
    """ns a score for numpy to sort rows of about ``n`` scores: SORT_COST if set, else the best of three
    timings (this thread's CPU time) of random rows of the next power of 2, kept for the process."""
    if SORT_COST is not None:
        return SORT_COST
    length = 1 << max(4, (n - 1).bit_length())
    if length not in _sort_costs:
        shape = (max(2, SORT_SAMPLE_SCORES // length), length)
        rows = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        timings = []
        for _ in range(3):
            start = time.thread_time()
            np.sort(rows, axis=1)
            timings.append(time.thread_time() - start)
        _sort_costs[length] = max(min(timings), 1e-9) / rows.size * 1e9
    return _sort_costs[length]


def _count_numpy(s: np.ndarray, t: np.ndarray, cap: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest of the four ways of the module's docstring, for one chunk (with a ``cap`` the
    passes stop early, so cost at most their estimate: where they win without it, they win with it)."""
    c, p = t.shape
    lowest = t.min(1, keepdims=True)  # items at or above it: B(j) > 0
    sample = slice(None, None, SAMPLE_EVERY)
    share = np.count_nonzero(s[sample] >= lowest[sample]) / s[sample].size  # of the items kept
    grid_ok = CELLS_PER_THRESHOLD * p <= s.shape[1] * MAX_CELLS_PER_SCORE
    if share * p <= COMPARISONS_PER_SCORE:
        way = "compare"
    else:  # only now the sort's cost: timing it sorts rows (once per length), which compare never needs
        costs = {"passes": PASS_COST * p if p <= MAX_PASSES else np.inf, "sort": _sort_cost(s.shape[1]),
                 "grid": KEEP_COST + GRID_COST * share if grid_ok else np.inf}
        way = min(costs, key=costs.get)
    if way == "passes":
        return _by_passes(s, t) if cap is None else _by_capped_passes(s, t, cap)
    if way == "sort":
        return _by_sorting(s, t)
    kept = np.flatnonzero(s >= lowest)
    rows = kept // s.shape[1]
    if way == "compare":
        among = _among(t)
        below = (np.take(np.ascontiguousarray(t.T), rows, axis=1) <= np.take(s.ravel(), kept)).sum(0, dtype=np.int32)
        keys = rows * (p + 1) + below  # B(v): thresholds <= v
    else:  # the grid, on the kept items only: the others have B(j) = 0, which no count reads
        grid = _Grid(t, max(16, CELLS_PER_THRESHOLD * p))
        among, keys = _among(t, grid), grid.keys(np.take(s.ravel(), kept), rows)
    return _from_keys(keys, t, among), among
