"""How much working memory one loss or metric call may use, derived from the device it runs on.

The losses and the retrieval metrics cut their work into blocks. The right block size depends on
the device, because it trades per-block overhead against memory:
- On a CPU each operation is cheap to start, and a block is fastest when it stays in the
  last-level cache: a few MB (``CPU_BUDGET``), as measured in docs/benchmarks.md.
- On a GPU every kernel launch costs microseconds. Cache-sized blocks leave it waiting on the
  launches (thousands of small kernels per loss call), so the block grows to a share of the
  device's free memory (``CUDA_FREE_SHARE``, at most ``CUDA_MAX_BUDGET``).

One knob overrides the default: ``set_memory_budget("2GB")``, the ``memory_budget("512MB")``
context manager, or the environment variable ``RANKLAB_MEMORY_BUDGET``. It bounds the largest
working set of one call (the blocks and their temporaries), not the inputs or the outputs.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Iterator, Optional, Union

import torch

from .env import BUDGET_ENV, memory_budget_text

CPU_BUDGET = 32 * 2**20  # bytes: blocks of 2**22 float32 entries (16 MB) and their temporaries
CUDA_FREE_SHARE = 0.25  # of the device's free memory, measured when the call starts
CUDA_MIN_BUDGET = 64 * 2**20
CUDA_MAX_BUDGET = 2 * 2**30  # larger blocks gain nothing: a 2 GiB block is far past launch overhead
MIN_BUDGET = 2**16  # bytes: below this every block is a single row anyway

_UNITS = {"": 1, "B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
_default: Optional[int] = None  # set_memory_budget: the whole process
# memory_budget(): this thread or task only (a dashboard trains one session per thread).
_scoped: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar("ranklab_memory_budget", default=None)

BudgetLike = Union[int, float, str, None]


def parse_budget(value: BudgetLike, name: str = "budget") -> Optional[int]:
    """Bytes from an int (bytes) or a string such as "512MB", "2GB", "1.5GiB"; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        unit = match.group(2).upper() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(f"{name} must be a number of bytes or a size such as '512MB' or '2GB' "
                             f"(units: {', '.join(u for u in _UNITS if u)}), got {value!r}")
        value = float(match.group(1)) * _UNITS[unit]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= MIN_BUDGET \
            or value == float("inf"):
        raise ValueError(f"{name} must be at least {MIN_BUDGET} bytes (64KB), got {value!r}")
    return int(value)


def set_memory_budget(value: BudgetLike) -> None:
    """Set the working memory of every loss and metric call (None: back to the device's default)."""
    global _default
    _default = parse_budget(value)


@contextlib.contextmanager
def memory_budget(value: BudgetLike) -> Iterator[None]:
    """``with memory_budget("1GB"): loss(...)``: the budget inside the block (this thread only), the
    previous one after."""
    token = _scoped.set(parse_budget(value))
    try:
        yield
    finally:
        _scoped.reset(token)


def device_budget(device_type: str, free_bytes: Optional[int] = None) -> int:
    """The default budget in bytes of a device type, given its free memory (CUDA)."""
    if device_type != "cuda" or free_bytes is None:
        return CPU_BUDGET
    return int(min(CUDA_MAX_BUDGET, max(CUDA_MIN_BUDGET, CUDA_FREE_SHARE * free_bytes)))


def budget_bytes(device: Union[torch.device, str, None] = None) -> int:
    """The working memory, in bytes, that one call on ``device`` may use: the knob if set (function,
    context manager or ``RANKLAB_MEMORY_BUDGET``), otherwise the device's default."""
    for chosen in (_scoped.get(), _default):
        if chosen is not None:
            return chosen
    env = memory_budget_text()
    if env:
        return parse_budget(env, name=BUDGET_ENV)
    device = torch.device(device if device is not None else "cpu")
    free = None
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
    return device_budget(device.type, free)


def uses_cache_blocks(device: Union[torch.device, str, None]) -> bool:
    """True where blocks should also be cut into cache-sized tiles (the CPU), False on accelerators."""
    return torch.device(device if device is not None else "cpu").type == "cpu"
