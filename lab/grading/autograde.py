"""``nbgrader autograde`` that fails loudly instead of scoring 0 what it cannot grade.

    python -m lab.grading.autograde ASSIGNMENT [--course .] [--student ID]

Run it in (or point ``--course`` at) the nbgrader course folder, where ``nbgrader autograde`` would run.
nbgrader finds a notebook's graded cells by their cell metadata: a submitted notebook without it (one
not made from nbgrader's release, or whose metadata a student's editor dropped) is scored 0 on every
test, with exit status 0 and no warning. So before autograde runs, every submitted notebook must carry
each graded cell of the source notebook (by its ``grade_id``); otherwise nothing is graded and the
command exits 1 with one line naming the notebooks and what they lack.

:func:`autograde_command` is the one place that builds the command: by default nbgrader runs inside
the bubblewrap sandbox of :mod:`lab.grading.sandbox`, whose only writable host folder is the course
folder, with its limits, and the whole run is killed after ``--timeout``. Student code runs in nbgrader's
kernel, in one process with the test cells, so it can still change its own grade (and read the course
folder); the sandbox keeps the rest of the machine out of its reach, and ``python -m lab.grading.crosscheck``
flags a score that grade-all does not confirm.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import nbformat

from .sandbox import (DEFAULT_MEMORY, NO_SANDBOX_GIVES_UP, GiB, Limits, SandboxUnavailable, bwrap_folder_command,
                      require_sandbox)


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


def autograde_command(course: Path, assignment: str, student: Optional[str] = None, *, sandbox: bool = True,
                      limits: Limits = Limits()) -> tuple[list[str], dict]:
    """(argv, environment) of ``nbgrader autograde``, to run in ``course``: inside a bubblewrap sandbox whose
    only writable host folder is the course folder (``sandbox=False``: nbgrader itself, unisolated). The
    environment is the host's, with nbgrader's ``alembic`` on PATH and this very ``lab`` importable (the
    sandbox sets its own)."""
    cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"]
    if student:
        cmd.append(f"--student={student}")
    lab_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join(filter(None, [lab_root, os.environ.get("PYTHONPATH")]))}
    return (bwrap_folder_command(cmd, course, limits) if sandbox else cmd), env


def autograde(course: Path, assignment: str, student: Optional[str] = None, *, sandbox: bool = True,
              limits: Limits = Limits(), timeout: float = 3600) -> int:
    """Check the submissions, then run nbgrader autograde (in the sandbox unless ``sandbox=False``); its exit
    status. Raises ValueError, one line, for notebooks without nbgrader's metadata (nothing is graded then),
    SandboxUnavailable without a working bwrap, and TimeoutError after ``timeout`` seconds, when everything
    it started has been killed."""
    course = Path(course)
    problems = check_submissions(course, assignment, student or "*")
    if problems:
        raise ValueError(f"nothing autograded: {'; '.join(problems)} (hand out the notebooks of "
                         "build/assignments/student/ or nbgrader's release/, which carry it)")
    if sandbox:
        require_sandbox()
    cmd, env = autograde_command(course, assignment, student, sandbox=sandbox, limits=limits)
    # Its own session: on a time-out the whole group goes (in the sandbox, bwrap's PID namespace with it).
    proc = subprocess.Popen(cmd, cwd=course, env=env, start_new_session=True)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise TimeoutError(f"nbgrader autograde ran over --timeout {timeout:g} s and was killed; nothing it "
                           "started is left") from None


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.autograde", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", help="the assignment's folder name under source/")
    parser.add_argument("--course", type=Path, default=Path("."), help="the nbgrader course folder (default: .)")
    parser.add_argument("--student", help="autograde this student only (default: every submission)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for the whole autograde (default 3600)")
    parser.add_argument("--memory", type=float, default=DEFAULT_MEMORY / GiB,
                        help=f"GB of memory for each process in the sandbox (default {DEFAULT_MEMORY / GiB:g})")
    parser.add_argument("--no-sandbox", action="store_true", help="run nbgrader without bubblewrap, "
                        "unisolated (what it gives up is printed)")
    args = parser.parse_args(argv)
    if args.no_sandbox:
        print(f"autograde: {NO_SANDBOX_GIVES_UP}", file=sys.stderr)
    try:
        status = autograde(args.course, args.assignment, args.student, sandbox=not args.no_sandbox,
                           limits=Limits(memory=int(args.memory * GiB)), timeout=args.timeout)
    except (OSError, ValueError, SandboxUnavailable) as exc:  # TimeoutError is an OSError
        parser.exit(1, f"autograde: {exc}\n")
    if status:
        parser.exit(status, f"autograde: nbgrader autograde failed with exit status {status} (its log is above)\n")


if __name__ == "__main__":
    main()
