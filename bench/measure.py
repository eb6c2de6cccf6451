"""Shared by the bench scripts: timing, peak-memory measurement and writing docs/benchmarks.md.

Peak memory on CPU is the rise of the process's resident-set high-water mark (Linux VmHWM,
reset through /proc/self/clear_refs); on CUDA it is torch.cuda.max_memory_allocated.
"""
from __future__ import annotations

import platform
import re
import time
from pathlib import Path
from typing import Callable

import torch

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
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
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
