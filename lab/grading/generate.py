"""Generate student versions and hidden tests from the solution assignments.

    python -m lab.grading.generate [--source assignments] [--out build/assignments] [--only NAME]

Markers (nbgrader's own, so nbgrader reads the sources natively):
  ``### BEGIN SOLUTION`` / ``### END SOLUTION``          in .py files, code and markdown cells
  ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``  in code cells (self-contained code: it
                                                         sees the submission's modules, lab.grading, torch)
Output, per assignment NAME (a folder of ``source`` holding a notebook):
  student/NAME/             modules with solutions -> ``raise NotImplementedError("TODO: ...")``,
                            notebooks with answers -> "YOUR ANSWER HERE", no hidden tests, no outputs
  solution/NAME/            the sources, outputs cleared
  hidden_tests/test_NAME.py plain-pytest grading: RANKLAB_SUBMISSION=DIR_OR_ZIP pytest hidden_tests/
  nbgrader/source/NAME/     the solution notebook with nbgrader cell metadata + the student modules
                            (nbgrader copies non-notebook files verbatim)
"""
from __future__ import annotations

import argparse
import copy
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import nbformat

SOLUTION = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader's default text stub
SKIP = {".ipynb_checkpoints", "__pycache__"}


@dataclass
class Generated:
    name: str
    student_dir: Path
    solution_dir: Path
    hidden_tests: Path
    stubs: list[str]  # functions (or "cell N") whose solution became a TODO
    first_todo_cell: Optional[int]  # index of the first student-notebook code cell that must raise


def _regions(lines: list[str], markers: tuple[str, str], where: str):
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
    for begin, end in reversed(_regions(lines, HIDDEN, where)):
        del lines[begin:end + 1]
    stubs = []
    for begin, end in reversed(_regions(lines, SOLUTION, where)):
        pad = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
        name = _enclosing_function(lines, begin)
        todo = f"implement {name}() (see its docstring)" if name else "complete this cell"
        lines[begin:end + 1] = [f"{pad}# YOUR CODE HERE", f'{pad}raise NotImplementedError("TODO: {todo}")']
        stubs.append(name or where)
    return "\n".join(lines), stubs[::-1]


def strip_markdown(source: str, where: str) -> str:
    lines = source.split("\n")
    for begin, end in reversed(_regions(lines, SOLUTION, where)):
        lines[begin:end + 1] = [TEXT_STUB]
    return "\n".join(lines)


def hidden_regions(source: str, where: str) -> list[str]:
    lines = source.split("\n")
    return ["\n".join(lines[b + 1:e]) for b, e in _regions(lines, HIDDEN, where)]


def _clean(nb) -> None:
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None


def student_notebook(nb, where: str) -> tuple[object, list[str]]:
    nb, stubs = copy.deepcopy(nb), []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.source, names = strip_code(cell.source, f"{where} cell {i}")
            stubs += names
        elif cell.cell_type == "markdown":
            cell.source = strip_markdown(cell.source, f"{where} cell {i}")
    _clean(nb)
    return nb, stubs


def nbgrader_notebook(nb, where: str):
    """The solution notebook with the cell metadata nbgrader expects (schema 3)."""
    nb = copy.deepcopy(nb)
    _clean(nb)
    for i, cell in enumerate(nb.cells):
        solution = bool(_regions(cell.source.split("\n"), SOLUTION, f"{where} cell {i}"))
        tests = cell.cell_type == "code" and bool(hidden_regions(cell.source, f"{where} cell {i}"))
        if not (solution or tests):
            continue
        manual = solution and cell.cell_type == "markdown"  # a written answer, graded by hand
        cell.metadata["nbgrader"] = {
            "cell_type": cell.cell_type, "grade": tests or manual, "grade_id": f"cell-{cell.get('id', i)}",
            "locked": tests, "schema_version": 3, "solution": solution, "task": False,
            **({"points": 2 if manual else 1} if tests or manual else {}),
        }
    return nb


def first_todo_cell(nb, stubs: list[str]) -> Optional[int]:
    """The first code cell that uses a stubbed function (imports aside) or holds a stub itself."""
    names = [s for s in stubs if s.isidentifier()]
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code = [ln for ln in cell.source.split("\n") if not re.match(r"\s*(from\s+\S+\s+)?import\s", ln)]
        if "raise NotImplementedError(\"TODO" in cell.source or (pattern and pattern.search("\n".join(code))):
            return i
    return None


HIDDEN_HEADER = '''"""Hidden tests of assignment {name}, generated by `python -m lab.grading.generate`
from the ### BEGIN HIDDEN TESTS regions of its solution notebook. Do not edit: regenerate.

Grade a submission (a folder, or a zip made by `python -m lab.grading.collect`):
    RANKLAB_SUBMISSION=path/to/submission pytest {file}
"""
import pytest

from lab.grading.collect import load_submission


@pytest.fixture(scope="module")
def ns():
    return load_submission({name!r})
'''


def hidden_test_file(name: str, nb, where: str) -> str:
    out = [HIDDEN_HEADER.format(name=name, file=f"test_{name}.py")]
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for j, code in enumerate(hidden_regions(cell.source, f"{where} cell {i}")):
            test = re.sub(r"\W", "_", str(cell.get("id", f"cell_{i}"))) + (f"_{j}" if j else "")
            out.append(f"\n\ndef test_{test}(ns):\n    code = {code.strip()!r}\n"
                       f"    exec(compile(code, {f'{where} cell {i} (hidden tests)'!r}, \"exec\"), dict(ns))\n")
    return "".join(out)


def generate_one(src: Path, out: Path) -> Generated:
    name = src.name
    dirs = {k: out / k / name for k in ("student", "solution", "nbgrader/source")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    stubs, notebooks = [], []
    for path in sorted(p for p in src.iterdir() if p.name not in SKIP and not p.name.startswith(".")):
        if path.is_dir():
            raise ValueError(f"{path}: assignments are flat folders (a notebook and its modules)")
        if path.suffix == ".py":
            text = path.read_text()
            student, names = strip_code(text, str(path))
            compile(student, str(path), "exec")  # a stub must never turn into a SyntaxError
            stubs += names
            (dirs["student"] / path.name).write_text(student)
            (dirs["nbgrader/source"] / path.name).write_text(student)
            shutil.copy(path, dirs["solution"] / path.name)
        elif path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            student, names = student_notebook(nb, str(path))
            stubs += names
            nbformat.write(student, dirs["student"] / path.name)
            nbformat.write(nbgrader_notebook(nb, str(path)), dirs["nbgrader/source"] / path.name)
            solution = copy.deepcopy(nb)
            _clean(solution)
            nbformat.write(solution, dirs["solution"] / path.name)
            notebooks.append((path, nb, student))
        else:
            shutil.copy(path, dirs["student"] / path.name)
            shutil.copy(path, dirs["solution"] / path.name)
    if len(notebooks) != 1:
        raise ValueError(f"{src}: expected exactly one notebook, found {len(notebooks)}")
    path, nb, student = notebooks[0]
    tests = out / "hidden_tests" / f"test_{name}.py"
    tests.parent.mkdir(parents=True, exist_ok=True)
    tests.write_text(hidden_test_file(name, nb, path.name))
    return Generated(name, dirs["student"], dirs["solution"], tests, stubs, first_todo_cell(student, stubs))


def generate(source: Path = Path("assignments"), out: Path = Path("build/assignments"),
             only: Optional[str] = None) -> list[Generated]:
    """Generate every assignment folder of ``source`` (those holding a notebook) into ``out``."""
    folders = sorted(p for p in Path(source).iterdir()
                     if p.is_dir() and p.name not in SKIP and any(p.glob("*.ipynb")) and (only in (None, p.name)))
    if not folders:
        raise ValueError(f"no assignment folder (with a notebook) in {source}" + (f" named {only!r}" if only else ""))
    return [generate_one(p, Path(out)) for p in folders]


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path("assignments"))
    parser.add_argument("--out", type=Path, default=Path("build/assignments"))
    parser.add_argument("--only", help="generate this assignment only (folder name)")
    args = parser.parse_args(argv)
    for g in generate(args.source, args.out, args.only):
        print(f"{g.name}: {len(g.stubs)} TODOs -> {g.student_dir}; hidden tests -> {g.hidden_tests}")


if __name__ == "__main__":
    main()
