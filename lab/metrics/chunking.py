"""How many queries one chunk of :func:`lab.metrics.retrieval_metrics` holds, from a memory budget.

The evaluation scans a (chunk of queries x gallery) block of similarities at a time. Its budget is
the losses' (:mod:`lab.core.budget`): on a CPU a cache-sized block (2**22 float32 scores and their
temporaries, bench/metrics.py); on a GPU a share of the memory free when the call starts, since
there each chunk costs microseconds of launches whatever its size (the issue measured 3.2 s at
100k x 128, where the 100k x 100k similarity product alone takes 0.05 s). ``memory_budget`` of
``retrieval_metrics``, ``set_memory_budget`` or ``RANKLAB_MEMORY_BUDGET`` override it.

The chunk's working set is counted per score of its (c, N) block (``SCORE_BYTES``) plus per entry of
its (c, P) lists of relevant items (``item_bytes``), so the largest tensor of a chunk stays within
the budget (tests/test_metrics_chunks.py).
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
import torch

from ..core import budget as _budget

# Bytes held per score of the (c, N) block: on the CPU the float32 score and its bool mask (the
# numpy counting's other temporaries are cache-sized slabs, or the few kept items); on a device the
# score, then either a bool per threshold (at most 8 of them) or an int64 bucket key and a bool
# (counting.py; tests/test_metrics_chunks.py measures the peak).
SCORE_BYTES = {"cpu": 8, "device": 16}


def item_bytes(num_levels: int) -> int:
    """Bytes held per entry of a chunk's (c, P) lists: about 16 int64/float64 arrays of that shape,
    and the (c, P, L + 1) per-level counts, four of them."""
    return 8 * (16 + 4 * (num_levels + 1))


def budget_bytes(device: torch.device, memory_budget: Union[int, str, None] = None) -> int:
    """The caller's ``memory_budget`` (bytes or a size such as "512MB"), else the lab's budget on
    ``device`` (lab.core.budget: the knob if set, otherwise the device's default)."""
    if memory_budget is not None:
        return _budget.parse_budget(memory_budget, name="memory_budget")
    return _budget.budget_bytes(device)


def chunk_rows(budget: int, n: int, width: int, device_type: str, num_levels: int = 1) -> int:
    """Queries per chunk: c * (n * score bytes + width * item bytes) <= budget, at least 1.

    n: gallery size; width: entries of each query's list of relevant items (P)."""
    per_query = n * SCORE_BYTES["cpu" if device_type == "cpu" else "device"] + width * item_bytes(num_levels)
    return max(1, budget // per_query)


def device_chunk_rows(free_bytes: int, n: int, width: int = 0, num_levels: int = 1) -> int:
    """Queries per chunk on a CUDA device with ``free_bytes`` free (the default budget)."""
    return chunk_rows(_budget.device_budget("cuda", free_bytes), n, width, "cuda", num_levels)


def chunk_bounds(widths: np.ndarray, n: int, budget: int, device_type: str, num_levels: int = 1,
                 chunk_size: Optional[int] = None) -> list[tuple[int, int]]:
    """(start, end) of consecutive chunks of queries, each within ``budget`` (or of ``chunk_size``
    queries when given). widths (Q, K): the lengths of the K parts of each query's list, queries
    ordered by increasing total; a chunk's list width is the sum over parts of their largest length.
    Decided on the host before any work: the loop over chunks never waits on the device to size
    the next one."""
    q = len(widths)
    if chunk_size is not None:
        return [(s, min(q, s + chunk_size)) for s in range(0, q, chunk_size)]
    bounds, start = [], 0
    while start < q:
        rows = chunk_rows(budget, n, int(widths[start].sum()), device_type, num_levels)
        while True:  # wider queries come later: shrink until the chunk's own width fits too
            width = int(widths[start : start + rows].max(0).sum())
            fits = chunk_rows(budget, n, width, device_type, num_levels)
            if fits >= rows:
                break
            rows = fits
        bounds.append((start, min(q, start + rows)))
        start += rows
    return bounds
