"""Which path and how big, decided once per loss call: the engine's plan.

A loss call runs on the fused Triton kernels or on PyTorch tiles, and cuts its work into chunks of
queries (on the PyTorch path, each chunk's (queries, positives, items) block is cut again into
tiles). ``plan`` takes every one of these decisions, from the scores' device and dtype, the memory
budget (``lab.core.budget``, bytes) and the problem's shape, and returns a frozen ``Plan`` that the
block loop carries: nothing below it asks the device or the environment again.

- Fused or PyTorch (``fused_path``): float32 on CUDA with compiled kernels. float64 always takes
  the PyTorch path, the exact reference; ``RankLoss.save_hparams`` relies on it, so that its
  float64 dummy run builds a loss even with ``RANKLAB_FUSED=1`` on a GPU machine.
- Tiles: on a CPU a tile stays in the last-level cache (``CPU_TILE_ENTRIES``); on an accelerator a
  tile is the whole block, since every pass there is a kernel launch.
- Host reads: on an accelerator the block loop runs without host synchronisation (``sync_free``);
  on a CPU, where a read costs nothing, each chunk reads its own widths.
- Row passes: the rows of one (rows, N) pass over the call's masks (``row_pass_rows``), so that
  counting them never copies a whole (Q, N) mask to integers at once.
- ``cpu_sized()`` runs the CPU's engine on any device (PyTorch path, cache-sized tiles, the CPU's
  budget): the switch benchmarks use to compare a GPU against what the engine did before.

Sizes carry their unit in their name: ``_BYTES`` or ``_ENTRIES`` (tensor elements).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from dataclasses import dataclass
from typing import Iterator, Optional, Union

import torch

from ...core import budget
from ...core.env import FUSED_ENV, fused_mode
from . import _triton

WORKS = ("pairs", "rows", "histograms")

# Bytes per entry of a chunk's (queries, positives, items) block: the float32 block itself and the
# tile it is computed in. The CPU's default budget (32 MB) gives blocks of 2**22 entries (16 MB).
PAIR_BLOCK_BYTES_PER_ENTRY = 8
MIN_BLOCK_ENTRIES = 2**16
# (c, N) tensors a chunk holds at once on the fused path, where no block exists (masks, compacted
# items, gathered scores, the gradient): its chunks are sized by the rows alone.
FUSED_ROW_TENSORS = 16
# One tile on a CPU: 4 MB in float32, within the L3 cache; few enough tiles that the per-op overhead
# (and, with 2 threads, the OpenMP barrier) stays small.
CPU_TILE_ENTRIES = 2**20
# Bytes per (query, item) entry a histogram chunk holds on the PyTorch path: the nearest bin (int64),
# the three neighbours' index (int64), centre and weight (kept for the gradient), the weighted counts,
# the masks, the gradient. The fused kernels hold no such temporaries: the masks and the gradient.
HISTOGRAM_BYTES_PER_ENTRY = 96
FUSED_HISTOGRAM_BYTES_PER_ENTRY = 8
CPU_HISTOGRAM_ENTRIES = 2**18  # 1 MB per (chunk, N) float32 tensor: the chunk's passes stay in cache
# A Triton program's tile in registers: (anchors, items) differences in ``fused_sums``, (bins, items) weights in
# ``fused_histograms``; each kernel file sizes its blocks from its own.
SUMS_REGISTER_TILE_ENTRIES = 2048
HISTOGRAM_REGISTER_TILE_ENTRIES = 4096

_cpu_sized: contextvars.ContextVar[bool] = contextvars.ContextVar("ranklab_cpu_sized", default=False)


@dataclass(frozen=True)
class Plan:
    """One call's decisions: the path, queries per chunk, (PyTorch path) the most entries of a chunk's
    (queries, positives, items) block and of one tile of it, whether the block loop must run without
    host synchronisation (on an accelerator, where each one drains the device's queue), and the rows of
    a (rows, N) pass over the call's masks (``row_pass_rows``: the counts ``per_query`` takes first).

    ``rows_per_positive``: on the PyTorch path of ``per_query``, the chunk rows for queries of one positive,
    from which :meth:`for_positives` sizes the chunks once the positives are counted (None: the chunks do
    not depend on them: the fused path, a given ``chunk_size``, other work)."""

    fused: bool
    chunk_rows: int
    block_entries: int
    tile_entries: int
    sync_free: bool
    row_pass_rows: int
    rows_per_positive: Optional[int] = None

    def for_positives(self, max_positives: int) -> "Plan":
        """This plan with chunks for queries of at most ``max_positives`` positives: a chunk's block holds
        chunk x positives x items entries. Arithmetic on the plan's own numbers: nothing is asked of the
        device or the environment again."""
        if self.rows_per_positive is None:
            return self
        return dataclasses.replace(self, chunk_rows=max(1, self.rows_per_positive // max(max_positives, 1)))


def fused_path(device_type: str, dtype: torch.dtype, have_triton: bool, interpreter: bool) -> bool:
    """The dispatch rule. ``RANKLAB_FUSED`` unset or "auto": float32 on CUDA with compiled kernels;
    "0": never; "1": also on the CPU, through Triton's interpreter (the tests; needs ``TRITON_INTERPRET=1``)."""
    mode = fused_mode()
    if mode == "0" or not have_triton or dtype != torch.float32 or device_type not in ("cuda", "cpu"):
        return False
    if device_type == "cuda":
        return mode == "1" or not interpreter  # interpreted kernels on a GPU only when asked for
    if mode == "1" and not interpreter:
        raise RuntimeError(f"{FUSED_ENV}=1 on CPU tensors needs Triton's interpreter: set TRITON_INTERPRET=1 "
                           "before lab is imported")
    return mode == "1"


def plan_for(num_queries: int, num_items: int, device: Union[torch.device, str], dtype: torch.dtype = torch.float32,
         work: str = "pairs", *, max_positives: int = 1, chunk_size: Optional[int] = None,
         cache_tiles: Optional[bool] = None) -> Plan:
    """The plan of one call on (Q, N) = (``num_queries``, ``num_items``) scores of ``dtype`` on ``device``.

    ``work``: "pairs" (``per_query``'s blocks, ``max_positives`` = the most positives of a query),
    "rows" ((chunk, N) passes) or "histograms" (``histograms.binned_ap_losses``). ``chunk_size``
    overrides the queries per chunk; ``cache_tiles`` the device's tiling (default: on a CPU, or
    inside ``cpu_sized()``).
    """
    if work not in WORKS:
        raise ValueError(f"work must be one of {', '.join(WORKS)}, got {work!r}")
    device = torch.device(device)
    cpu_sized = _cpu_sized.get()
    fused = not cpu_sized and fused_path(device.type, dtype, _triton.triton is not None, _triton.INTERPRETED)
    if cache_tiles is None:
        cache_tiles = cpu_sized or budget.uses_cache_blocks(device)
    budget_bytes = budget.budget_bytes(device)
    max_block = max(1, budget_bytes // PAIR_BLOCK_BYTES_PER_ENTRY)
    # What a batch with 4 samples per class (3 positives per query) needs, 3 Q N; a batch of one or
    # two classes, whose queries have ~N positives, is cut into more chunks and tiles, not more memory.
    block_entries = min(max_block, max(MIN_BLOCK_ENTRIES, 3 * num_queries * num_items))
    tile_entries = min(CPU_TILE_ENTRIES, block_entries) if cache_tiles else block_entries
    items = max(num_items, 1)
    row_pass_rows = max(1, (min(max_block, CPU_TILE_ENTRIES) if cache_tiles else max_block) // items)
    per_positive = None
    if work == "pairs" and fused:
        rows = max_block // (FUSED_ROW_TENSORS * items)
    elif work == "pairs":
        per_positive = None if chunk_size else block_entries // items  # block_entries // (P items), by P
        rows = block_entries // items // max(max_positives, 1)
    elif work == "rows":
        rows = row_pass_rows
    else:
        entries = budget_bytes // (FUSED_HISTOGRAM_BYTES_PER_ENTRY if fused else HISTOGRAM_BYTES_PER_ENTRY)
        rows = (min(entries, CPU_HISTOGRAM_ENTRIES) if cache_tiles else entries) // items
    # Sync-free on an accelerator, outside cpu_sized(): the block loop then reads every compaction width
    # once, up front; on a CPU, where a read costs nothing, each chunk compacts at its own width.
    sync_free = not cpu_sized and device.type != "cpu"
    return Plan(fused, chunk_size or max(1, rows), block_entries, tile_entries, sync_free, row_pass_rows,
                per_positive)


@contextlib.contextmanager
def cpu_sized() -> Iterator[None]:
    """``with cpu_sized(): loss(...)``: the CPU's engine on any device (PyTorch path, cache-sized tiles,
    the CPU's default budget, per-chunk compaction), in this thread only; benchmarks compare a GPU
    against it."""
    token = _cpu_sized.set(True)
    try:
        with budget.memory_budget(budget.CPU_BUDGET):
            yield
    finally:
        _cpu_sized.reset(token)
