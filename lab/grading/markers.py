"""The markers of the assignment sources (nbgrader's own): find the regions, strip them, extract the tests.

  ``### BEGIN SOLUTION`` / ``### END SOLUTION``          in .py files, code and markdown cells
  ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``  in code cells: a cell holding them is a
                                                         *test cell*, graded all or nothing
"""
from __future__ import annotations

import re
from typing import NamedTuple, Optional

SOLUTION = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader's default text stub


class NotebookTest(NamedTuple):
    """A test cell of a notebook: its id and the code that grades it (visible self-check + hidden tests)."""

    cell: str
    code: str
    where: str  # "notebook.ipynb cell N", for tracebacks


def regions(lines: list[str], markers: tuple[str, str], where: str) -> list[tuple[int, int]]:
    """(begin, end) line indices of each marked region; errors name the file and line."""
    out, start = [], None
    for i, line in enumerate(lines):
        if markers[0] in line:
            if start is not None:
                raise ValueError(f"{where}:{i + 1}: nested {markers[0]!r} (previous one at line {start + 1})")
            start = i
        elif markers[1] in line:
            if start is None:
                raise ValueError(f"{where}:{i + 1}: {markers[1]!r} without {markers[0]!r}")
            out.append((start, i))
            start = None
    if start is not None:
        raise ValueError(f"{where}:{start + 1}: {markers[0]!r} is never closed")
    return out


def _enclosing_function(lines: list[str], index: int) -> Optional[str]:
    indent = len(lines[index]) - len(lines[index].lstrip())
    for line in reversed(lines[:index]):
        match = re.match(r"(\s*)(?:async\s+)?def\s+(\w+)\s*\(", line)
        if match and len(match.group(1)) < indent:
            return match.group(2)
    return None


def strip_code(source: str, where: str) -> tuple[str, list[str]]:
    """Solutions -> an indented TODO stub; hidden tests removed. Returns (source, stubbed names)."""
    lines = source.split("\n")
    for begin, end in reversed(regions(lines, HIDDEN, where)):
        del lines[begin:end + 1]
    stubs = []
    for begin, end in reversed(regions(lines, SOLUTION, where)):
        pad = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
        name = _enclosing_function(lines, begin)
        todo = f"implement {name}() (see its docstring)" if name else "complete this cell"
        lines[begin:end + 1] = [f"{pad}# YOUR CODE HERE", f'{pad}raise NotImplementedError("TODO: {todo}")']
        stubs.append(name or where)
    return "\n".join(lines), stubs[::-1]


def strip_markdown(source: str, where: str) -> str:
    lines = source.split("\n")
    for begin, end in reversed(regions(lines, SOLUTION, where)):
        lines[begin:end + 1] = [TEXT_STUB]
    return "\n".join(lines)


def has_region(source: str, markers: tuple[str, str], where: str) -> bool:
    return bool(regions(source.split("\n"), markers, where))


def notebook_tests(nb, where: str) -> list[NotebookTest]:
    """The test cells of a notebook, their code with the marker lines removed (what nbgrader runs)."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and has_region(cell.source, HIDDEN, f"{where} cell {i}"):
            code = "\n".join(line for line in cell.source.split("\n") if line.strip() not in HIDDEN)
            out.append(NotebookTest(str(cell.get("id", f"cell-{i}")), code, f"{where} cell {i}"))
    return out

