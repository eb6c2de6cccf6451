"""How many queries one chunk of :func:`lab.metrics.retrieval_metrics` holds, from a memory budget.

The evaluation scans a (chunk of queries x gallery) block of similarities at a time. The right
size depends on the device:

- On a CPU a block is fastest while it stays in cache: 2**22 float32 scores (16 MB) and their
  temporaries, ``CPU_BUDGET`` (bench/metrics.py).
- On a GPU each kernel launch and each chunk cost microseconds of host time whatever their size,
  and a cache-sized block leaves the device waiting on them (the issue measured 3.2 s at
  100k x 128, where the 100k x 100k similarity product alone takes 0.05 s). There the budget is a
  share of the memory free when the call starts (``CUDA_FREE_SHARE``, at most ``CUDA_MAX_BUDGET``).

``retrieval_metrics(..., memory_budget=bytes)`` overrides the default for one call. The chunk's
working set is counted per score of its (c, N) block (``SCORE_BYTES``) plus per entry of its
(c, P) lists of relevant items (``item_bytes``), so the largest tensor of a chunk stays within the
budget (tests/test_metrics_chunks.py).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

CPU_BUDGET = 32 * 2**20  # bytes: 2**22 scores at SCORE_BYTES["cpu"], as before issue 20
CUDA_FREE_SHARE = 0.25  # of the device's free memory, read when the call starts
CUDA_MIN_BUDGET = 64 * 2**20
CUDA_MAX_BUDGET = 2 * 2**30  # past a few hundred MB per chunk the launches are a small fraction
MIN_BUDGET = 2**16  # a smaller budget gives one-row chunks anyway
# Bytes held per score of the (c, N) block: on the CPU the float32 score and its bool mask (the
# numpy counting's other temporaries are cache-sized slabs, or the few kept items); on a device the
# score, then either a bool per threshold (at most 8 of them) or an int64 bucket key and a bool
# (counting.py; tests/test_metrics_chunks.py measures the peak).
SCORE_BYTES = {"cpu": 8, "device": 16}


def item_bytes(num_levels: int) -> int:
    """Bytes held per entry of a chunk's (c, P) lists: about 16 int64/float64 arrays of that shape,
    and the (c, P, L + 1) per-level counts, four of them."""
    return 8 * (16 + 4 * (num_levels + 1))


def check_memory_budget(memory_budget: Optional[int]) -> None:
    """None (the device's default) or a number of bytes, at least ``MIN_BUDGET``."""
    if memory_budget is not None and (isinstance(memory_budget, bool) or not isinstance(memory_budget, int)
                                      or memory_budget < MIN_BUDGET):
        raise ValueError(f"memory_budget must be None or a number of bytes >= {MIN_BUDGET}, got {memory_budget!r}")


def default_budget(device_type: str, free_bytes: Optional[int] = None) -> int:
    """Bytes one call may hold at once on a device type, given its free memory (CUDA)."""
    if device_type != "cuda" or free_bytes is None:
        return CPU_BUDGET
    return int(min(CUDA_MAX_BUDGET, max(CUDA_MIN_BUDGET, CUDA_FREE_SHARE * free_bytes)))


def budget_bytes(device: torch.device, memory_budget: Optional[int] = None) -> int:
    """The caller's ``memory_budget``, else the default of ``device`` (its free memory on CUDA)."""
    if memory_budget is not None:
        return memory_budget
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    return default_budget(device.type, free)


def chunk_rows(budget: int, n: int, width: int, device_type: str, num_levels: int = 1) -> int:
    """Queries per chunk: c * (n * score bytes + width * item bytes) <= budget, at least 1.

    n: gallery size; width: entries of each query's list of relevant items (P)."""
    per_query = n * SCORE_BYTES["cpu" if device_type == "cpu" else "device"] + width * item_bytes(num_levels)
    return max(1, budget // per_query)


def device_chunk_rows(free_bytes: int, n: int, width: int = 0, num_levels: int = 1) -> int:
    """Queries per chunk on a CUDA device with ``free_bytes`` free (the default budget)."""
    return chunk_rows(default_budget("cuda", free_bytes), n, width, "cuda", num_levels)


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
