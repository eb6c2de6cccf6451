"""python -m bench.notebook_times: the README's table of every notebook cell's time (issue 36, N-6)."""
from __future__ import annotations

import nbformat
import pytest

from bench import notebook_times


def test_longest_silence_counts_from_the_start_between_outputs_and_to_the_end():
    assert notebook_times.longest_silence(0.0, [1.0, 7.5, 9.0], 10.0) == pytest.approx(6.5)
    assert notebook_times.longest_silence(0.0, [], 12.0) == pytest.approx(12.0)  # no output at all
    assert notebook_times.longest_silence(2.0, [2.5], 3.0) == pytest.approx(0.5)


def result(name, cells, load=1.0):
    return {"notebook": name, "cells": [dict(zip(("index", "seconds", "silence"), c), first_line="", outputs=1)
                                        for c in cells],
            "total": sum(c[1] for c in cells), "error": None, "load": {"mean": load, "before": load, "after": load}}


def test_the_table_names_slow_and_silent_cells():
    text = notebook_times.table([result("02_x.ipynb", [(3, 2.0, 2.0), (25, 41.0, 2.0)]),
                                 result("04_y.ipynb", [(3, 8.0, 8.0), (5, 1.0, 1.0)], load=3.5)], "2026-11-26", 2)
    rows = [line for line in text.splitlines() if line.startswith("| 0")]
    assert rows[0].startswith("| 02 | 43 s | 25: 41 s | 25: 41 s | 1.0 (1.0 → 1.0) |")
    assert rows[1].startswith("| 04 | 9 s | 3: 8 s, silent 8 s | 3: 8 s, silent 8 s | 3.5")
    assert "cells over 30 s: 02 cell 25;" in text and "silent for over 5 s: 04 cell 3 " in text


def test_it_times_every_cell_of_a_notebook(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"),
                                         nbformat.v4.new_code_cell(
                                             "import time\nprint('a', flush=True)\ntime.sleep(0.3)"),
                                         nbformat.v4.new_code_cell("1 + 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "01_t.ipynb"
    nbformat.write(nb, path)
    res = notebook_times.time_notebook(path, timeout=60)
    assert [c["index"] for c in res["cells"]] == [1, 2] and res["error"] is None
    assert res["cells"][0]["seconds"] >= 0.3 and res["cells"][0]["outputs"] == 1
    assert res["cells"][0]["silence"] >= 0.25  # the sleep after the print
