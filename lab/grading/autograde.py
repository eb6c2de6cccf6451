"""``nbgrader autograde`` that fails loudly instead of scoring 0 what it cannot grade.

    python -m lab.grading.autograde ASSIGNMENT [--course .] [--student ID]

Run it in (or point ``--course`` at) the nbgrader course folder, where ``nbgrader autograde`` would run.
nbgrader finds a notebook's graded cells by their cell metadata: a submitted notebook without it (one
not made from nbgrader's release, or whose metadata a student's editor dropped) is scored 0 on every
test, with exit status 0 and no warning. So before autograde runs, every submitted notebook must carry
each graded cell of the source notebook (by its ``grade_id``); otherwise nothing is graded and the
command exits 1 with one line naming the notebooks and what they lack.

:func:`autograde_command` is the one place that builds the command, so that a sandbox (issue 32,
item 1) can wrap it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import nbformat


def graded_cells(notebook: Path) -> set[str]:
    """The grade_id of every cell nbgrader grades in ``notebook`` (autograded tests and written answers)."""
    nb = nbformat.read(notebook, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and "grade_id" in c.metadata["nbgrader"]}


def check_submissions(course: Path, assignment: str, student: str = "*") -> list[str]:
    """'NOTEBOOK lacks ...' for every submitted notebook missing graded cells of its source notebook."""
    source = course / "source" / assignment
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no source notebook in {source} (run this in the nbgrader course folder, "
                                "or pass --course)")
    submitted = sorted((course / "submitted").glob(f"{student}/{assignment}"))
    if not submitted:
        raise FileNotFoundError(f"no submission in {course / 'submitted'}/{student}/{assignment}")
    problems = []
    for folder in submitted:
        for nb in notebooks:
            expected, path = graded_cells(nb), folder / nb.name
            if not path.is_file():
                continue  # nbgrader itself scores a missing notebook 0 and says so
            lacking = expected - graded_cells(path)
            if lacking:
                problems.append(f"{path.relative_to(course)} lacks {len(lacking)} of its {len(expected)} graded "
                                "cells' nbgrader metadata")
    return problems


def autograde_command(course: Path, assignment: str, student: Optional[str] = None) -> tuple[list[str], dict]:
    """(argv, environment) of ``nbgrader autograde``, to run in ``course``. The seam for the sandbox: this is
    what a sandbox runs, with the course folder as its only writable place."""
    cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"]
    if student:
        cmd.append(f"--student={student}")
    # nbgrader runs the `alembic` of its own environment, and the kernel must import this very `lab`.
    lab_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join(filter(None, [lab_root, os.environ.get("PYTHONPATH")]))}
    return cmd, env


def autograde(course: Path, assignment: str, student: Optional[str] = None) -> int:
    """Check the submissions, then run nbgrader autograde; its exit status. Raises ValueError, one line,
    for notebooks without nbgrader's metadata (nothing is graded then)."""
    course = Path(course)
    problems = check_submissions(course, assignment, student or "*")
    if problems:
        raise ValueError(f"nothing autograded: {'; '.join(problems)} (hand out the notebooks of "
                         "build/assignments/student/ or nbgrader's release/, which carry it)")
    cmd, env = autograde_command(course, assignment, student)
    return subprocess.run(cmd, cwd=course, env=env).returncode


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.autograde", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", help="the assignment's folder name under source/")
    parser.add_argument("--course", type=Path, default=Path("."), help="the nbgrader course folder (default: .)")
    parser.add_argument("--student", help="autograde this student only (default: every submission)")
    args = parser.parse_args(argv)
    try:
        status = autograde(args.course, args.assignment, args.student)
    except (OSError, ValueError) as exc:
        parser.exit(1, f"autograde: {exc}\n")
    if status:
        parser.exit(status, f"autograde: nbgrader autograde failed with exit status {status} (its log is above)\n")


if __name__ == "__main__":
    main()
