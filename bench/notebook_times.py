"""Every notebook cell's wall time in the default (full) mode, and the load it was measured at (issue 36, N-6).

    .venv/bin/python -m bench.notebook_times                   # print the table (~5 min on 2 cores)
    .venv/bin/python -m bench.notebook_times --write-readme    # and write it into the README
    .venv/bin/python -m bench.notebook_times --notebooks 04 05 # some notebooks only (the table keeps all)

Executes each notebook of notebooks/ as a student would: a fresh ``python3`` kernel (nbclient),
``RANKLAB_FAST`` (and its old name ``LAB_FAST``) unset, one notebook at a time, cells in order. For
every cell it records the wall time from the kernel's start of the cell to its reply, and the longest
silence: the longest stretch with no new output (from the start, between outputs, to the end),
which says whether a long cell shows progress. The 1-minute load average is sampled every 2 s while a notebook runs
(mean, and before -> after). The target (issue 36): no cell over 30 s at a load <= 1.5, and every
cell over 5 s printing at least every 5 s.

``--write-readme`` replaces the README's text between ``<!-- BEGIN notebook-cells -->`` and
``<!-- END notebook-cells -->``; the per-cell numbers go to ``bench/notebook_times.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
JSON = ROOT / "bench" / "notebook_times.json"
SECTION = "notebook-cells"
SLOW, LIMIT = 5.0, 30.0  # a cell over SLOW s must show progress; none may take over LIMIT s (at load <= 1.5)


class LoadSampler:
    """The 1-minute load average every ``every`` seconds in a thread, between start and stop."""

    def __init__(self, every: float = 2.0) -> None:
        self.every, self.samples, self._stop = every, [os.getloadavg()[0]], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


def longest_silence(start: float, outputs: Sequence[float], end: float) -> float:
    """The longest stretch without new output in a cell that ran from ``start`` to ``end`` with
    outputs at times ``outputs``."""
    marks = [start, *sorted(t for t in outputs if start <= t <= end), end]
    return max(b - a for a, b in zip(marks, marks[1:]))


def time_notebook(path: Path, timeout: int = 900) -> dict[str, Any]:
    """Execute ``path`` in a fresh kernel; {"notebook", "cells": [{"index", "first_line", "seconds",
    "silence", "outputs"}], "total", "load": {"mean", "before", "after", "max"}, "error"}."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    cells: dict[int, dict[str, Any]] = {}

    class Timed(NotebookClient):
        def output(self, outs, msg, display_id, cell_index):  # every output the kernel sends, as it comes
            cells.setdefault(cell_index, {"outputs": []})["outputs"].append(time.perf_counter())
            return super().output(outs, msg, display_id, cell_index)

    def started(cell, cell_index, **_):
        cells.setdefault(cell_index, {"outputs": []})["start"] = time.perf_counter()

    def finished(cell, cell_index, **_):
        cells[cell_index]["end"] = time.perf_counter()

    nb = nbformat.read(path, as_version=4)
    client = Timed(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   on_cell_execute=started, on_cell_executed=finished)
    error = None
    with LoadSampler() as load:
        try:
            client.execute()
        except CellExecutionError as e:  # the table says which cell failed; the others keep their times
            error = str(e).strip().splitlines()[-1][:200]
    rows = []
    for index, c in sorted(cells.items()):
        if "start" not in c or "end" not in c:
            continue
        source = nb.cells[index].source.strip().splitlines()
        rows.append({"index": index, "first_line": source[0] if source else "", "seconds": c["end"] - c["start"],
                     "silence": longest_silence(c["start"], c["outputs"], c["end"]), "outputs": len(c["outputs"])})
    samples = load.samples
    return {"notebook": path.name, "cells": rows, "total": sum(r["seconds"] for r in rows), "error": error,
            "load": {"mean": statistics.fmean(samples), "before": samples[0], "after": samples[-1],
                     "max": max(samples)}}


def _cell(r: dict[str, Any]) -> str:
    shown = "" if r["silence"] <= SLOW else f", silent {r['silence']:.0f} s"
    return f"{r['index']}: {r['seconds']:.0f} s{shown}"


def table(results: Sequence[dict[str, Any]], when: str, cores: int) -> str:
    """The README's Markdown: one row per notebook (total, slowest cell, every cell over 5 s with its
    longest silence, load), then a line on the issue's targets."""
    lines = [f"Measured by `python -m bench.notebook_times --write-readme` on {when}, {cores} CPU cores, default "
             "(full) mode, each notebook in a fresh kernel. *cell* is the cell's index in the notebook (from 0, "
             "Markdown cells counted); *silent* is a cell's longest stretch without new output where it is over "
             f"{SLOW:.0f} s. Load: the 1-minute load average sampled every 2 s, mean (before → after).", "",
             "| notebook | total | slowest cell | cells over 5 s | load: mean (before → after) |",
             "|---|---|---|---|---|"]
    for res in results:
        cells = res["cells"]
        slowest = max(cells, key=lambda r: r["seconds"]) if cells else None
        slow = ", ".join(_cell(r) for r in cells if r["seconds"] > SLOW) or "none"
        load = res["load"]
        failed = f" (stopped: {res['error']})" if res["error"] else ""
        lines.append(f"| {res['notebook'][:2]} | {res['total']:.0f} s{failed} | "
                     f"{_cell(slowest) if slowest else '-'} | {slow} | "
                     f"{load['mean']:.1f} ({load['before']:.1f} → {load['after']:.1f}) |")
    every = [r for res in results for r in res["cells"]]
    over = [f"{res['notebook'][:2]} cell {r['index']}" for res in results for r in res["cells"] if r["seconds"] > LIMIT]
    silent = [f"{res['notebook'][:2]} cell {r['index']}" for res in results for r in res["cells"]
              if r["seconds"] > SLOW and r["silence"] > SLOW]
    mean_load = statistics.fmean(res["load"]["mean"] for res in results) if results else 0.0
    lines += ["", f"Slowest cell {max((r['seconds'] for r in every), default=0):.0f} s; cells over {LIMIT:.0f} s: "
              f"{', '.join(over) or 'none'}; cells over {SLOW:.0f} s silent for over {SLOW:.0f} s: "
              f"{', '.join(silent) or 'none'} (mean load {mean_load:.1f}; the target is for a load of 1.5 or less)."]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="+", metavar="NN", help="only these (by number prefix, e.g. 04 05)")
    parser.add_argument("--write-readme", action="store_true", help="write the table into README.md")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell before nbclient gives up")
    args = parser.parse_args(argv)
    for name in ("RANKLAB_FAST", "LAB_FAST"):  # the default mode, as a student runs them (the kernels inherit this)
        os.environ.pop(name, None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.notebooks:
        paths = [p for p in paths if p.name[:2] in args.notebooks]
    previous = {r["notebook"]: r for r in json.loads(JSON.read_text())["notebooks"]} if JSON.exists() else {}
    for path in paths:
        res = time_notebook(path, args.timeout)
        previous[path.name] = {**res, "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(f"{path.name}: {res['total']:.0f} s, load {res['load']['mean']:.1f}; "
              + ", ".join(_cell(r) for r in res["cells"] if r["seconds"] > 1), flush=True)
    results = [previous[n] for n in sorted(previous)]
    when = ", ".join(sorted({r["measured"][:10] for r in results}))
    markdown = table(results, when, os.cpu_count() or 0)
    print(markdown)
    JSON.write_text(json.dumps({"notebooks": results}, indent=1) + "\n")
    if args.write_readme:
        from bench.measure import write_section

        write_section(SECTION, markdown, README)
        print(f"wrote the {SECTION} section of README.md")


if __name__ == "__main__":
    main()
