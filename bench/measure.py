"""Shared by the bench scripts: timing, peak-memory measurement and writing docs/benchmarks.md.

Peak memory on CPU is the rise of the process's resident-set high-water mark (Linux VmHWM,
reset through /proc/self/clear_refs); on CUDA it is torch.cuda.max_memory_allocated.
"""
from __future__ import annotations

import contextlib
import os
import platform
import re
import time
from pathlib import Path
from typing import Callable

import torch

from lab.core.env import torch_threads as threads  # noqa: F401 (bench/metrics.py's name for the one guard)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def measure(fn: Callable[[], object], device: torch.device, repeat: int = 3) -> tuple[float, float]:
    """(median seconds, peak MB above the starting point) of ``fn()``; one warm-up run first."""
    fn()
    times, peaks = [], []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        else:
            _reset_peak()
            base = _status_kb("VmRSS:") * 1024
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        else:
            peak = _status_kb("VmHWM:") * 1024
        times.append(time.perf_counter() - start)
        peaks.append((peak - base) / 2**20)
    return sorted(times)[len(times) // 2], max(peaks)


def cpu_times(fns: dict, repeat: int = 3, long: float = 2.0) -> dict:
    """{key: median CPU seconds of ``repeat`` calls of fns[key]} on 1 thread, the calls interleaved.

    On a machine shared with other processes the wall-clock time of a step depends on their load, and
    with 2 OpenMP threads a busy core stalls both; the CPU time of a single thread hardly moves. A first
    call warms up; a function whose first call takes more than ``long`` seconds is timed by it alone.
    """
    runs: dict = {}
    with threads(1):
        for key, fn in fns.items():
            runs[key] = [_cpu_seconds(fn)]
        for _ in range(repeat):
            for key, fn in fns.items():
                if runs[key][0] < long:
                    runs[key].append(_cpu_seconds(fn))
    return {key: _median(t[1:] or t) for key, t in runs.items()}


def cpu_time_and_peak(fn: Callable[[], object], repeat: int = 3, long: float = 2.0) -> tuple[float, float]:
    """(median CPU seconds on 1 thread, peak MB above the start) of ``fn()``, timed as in ``cpu_times``.
    Peak memory is only meaningful in a process whose allocator returns freed memory (see bench/losses.py)."""
    times, peaks = [], []
    with threads(1):
        for i in range(repeat + 1):
            _reset_peak()
            base = _status_kb("VmRSS:")
            times.append(_cpu_seconds(fn))
            peaks.append((_status_kb("VmHWM:") - base) / 1024)
            if times[0] >= long:
                break
    return _median(times[1:] or times), max(peaks)


def _cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def load_average() -> float:
    """The 1-minute load average: other processes on the machine slow the timings down."""
    return os.getloadavg()[0]


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu}, {torch.get_num_threads()} threads{gpu}, torch {torch.__version__}"


def write_section(name: str, markdown: str, path: Path = DOCS) -> None:
    """Replace the text between <!-- BEGIN name --> and <!-- END name --> (append if absent)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"<!-- BEGIN {name} -->\n{markdown.strip()}\n<!-- END {name} -->"
    pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def publish(name: str, markdown: str, dry_run: bool) -> None:
    """Print the section (``dry_run``) or write it into docs/benchmarks.md."""
    if dry_run:
        print(markdown)
    else:
        write_section(name, markdown)
        print(f"wrote the {name} section of {DOCS.relative_to(DOCS.parents[1])}")
