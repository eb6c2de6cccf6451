"""``nbgrader autograde`` with no way out: one student at a time, each in a sandbox of their own, scored here.

    python -m lab.grading.autograde ASSIGNMENT [--course .] [--student ID] [--timeout 120] [--cell-timeout 120]
                                    [--memory 4] [--no-sandbox]

Run it in (or point ``--course`` at) the nbgrader course folder, instead of ``nbgrader autograde``. For each
hand-in ``submitted/STUDENT/ASSIGNMENT/`` (in natural order):

1. its files are fingerprinted at their collect (:mod:`lab.grading.course_records`) and read as data (no
   link followed, within limits: :mod:`lab.grading.handin`); a notebook without nbgrader's metadata stops the
   whole run before anything is graded (nbgrader would score it 0 with exit status 0);
2. the notebook is sanitized here as nbgrader does (outputs cleared, graded cells restored from the gradebook),
   and a copy without the hidden tests runs in a sandbox holding this student's files and nothing else (no
   course folder, no gradebook, no other student; :mod:`lab.grading.run_notebook`);
3. the autograded test cells are scored here by :mod:`lab.grading.grade` (the checks run in this process, the
   student's functions in a sandbox), and the scores are written into ``gradebook.db`` from here: written
   answers by nbgrader's rule, manual scores never;
4. ``autograded/STUDENT/ASSIGNMENT/`` gets the sanitized notebook with the trusted results in the test cells and
   the kernel's outputs elsewhere, and the hand-in is checked unchanged.

What the student's own notebook run claimed (nbgrader's rule on its outputs) is kept beside the trusted score
(``ranklab_autograde/ASSIGNMENT.json``): ``python -m lab.grading.crosscheck`` flags a claim above the score.
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import nbformat

from ..core.files import write_atomic, write_text_atomic
from . import cgroup, gradebook
from .assignments import ASSIGNMENTS, Assignment
from .course_records import Handins, save_outcome, timestamp
from .find import Submission
from .generate import CELL_TIMEOUT
from .grade import CHECKOUT_SOURCE, load_tests, run_submission
from .grade_sheet import natural_key
from .handin import UnsafeFolder, read_files
from .launch import python_module
from .names import printable, shown
from .sandbox import (DEFAULT_MEMORY, NO_SANDBOX_GIVES_UP, GiB, Limits, SandboxUnavailable, bwrap_command,
                      require_sandbox, start)
from .unzip import Limits as SizeLimits

MAX_NOTEBOOK = 50 * 2**20  # bytes of a submitted notebook read for the metadata check


def graded_cells(notebook: Path) -> set[str]:
    """The grade_id of every cell nbgrader grades in ``notebook`` (autograded tests and written answers)."""
    if notebook.is_symlink() or notebook.stat().st_size > MAX_NOTEBOOK:
        return set()
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


def execute(nb: nbformat.NotebookNode, modules: dict[str, bytes], name: str, *, sandbox: bool, limits: Limits,
            cell_timeout: float, timeout: float) -> bytes:
    """Run ``nb`` (beside the student's ``modules``) in a sandbox holding only those files; the executed
    notebook's bytes as the sandbox wrote them (untrusted), b'' when it gave none in ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="ranklab_autograde_") as scratch:
        scratch = Path(scratch)
        files = []
        for file, data in {**modules, name: nbformat.writes(nb).encode()}.items():
            (scratch / file).write_bytes(data)
            files.append(scratch / file)
        read_end, write_end = os.pipe()
        runner = python_module("lab.grading.run_notebook", name, "--output-fd", write_end,
                               "--cell-timeout", cell_timeout)
        if sandbox:
            cmd, fds = bwrap_command(python_module("lab.grading.sandbox", *limits.args(), "--", *runner), files,
                                     limits)
            proc, group = start(cmd, [write_end, *fds], limits, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            proc, group = subprocess.Popen(runner, cwd=scratch, pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True), None
            os.close(write_end)
        try:
            return _read_all(read_end, time.monotonic() + timeout, gradebook.MAX_EXECUTED + 1)
        finally:
            os.close(read_end)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            if group is not None:
                group.remove()


def _read_all(fd: int, deadline: float, limit: int) -> bytes:
    """What arrives on ``fd`` until it closes, the deadline or ``limit`` bytes (then b'': too much)."""
    chunks, size = [], 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while (left := deadline - time.monotonic()) > 0:
        if not poller.poll(min(left, 1.0) * 1000):
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b""
    return b""


def grade_one(course: Path, a: Assignment, student: str, folder: Path, tests: list[dict], handins: Handins, *,
              sandbox: bool, limits: Limits, timeout: float, cell_timeout: float) -> dict[str, Any]:
    """Autograde one hand-in (see the module's docstring); returns its outcome, as recorded for the cross-check."""
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    changed, _ = handins.check(a.name, student, folder)
    test_ids = {f"cell-{t['cell']}": t for t in tests}
    result = run_submission(Submission(student, folder, a), tests, timeout, sandbox=sandbox, memory=limits.memory)
    trusted = {f"cell-{t.test}": t.points for t in result.tests}
    outcome: dict[str, Any] = {"status": result.status, "notes": [printable(n, 1000) for n in result.notes],
                               "trusted": trusted, "claimed": {}, "changed_since_collect": changed,
                               "lab_code": {t.function: t.lab_code for t in result.tests if t.lab_code},
                               "graded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        files = read_files(folder, shown(student), (".py", ".ipynb"), SizeLimits())
    except UnsafeFolder as exc:
        files = {}
        outcome["notes"].append(printable(exc, 1000))
    modules = {n: d for n, d in files.items() if n.endswith(".py")}
    sanitized: dict[str, Optional[nbformat.NotebookNode]] = {}
    name = a.notebook
    if name in files:
        try:
            nb = gradebook.sanitize(nbformat.reads(files[name].decode("utf-8"), as_version=4), db_url, a.name,
                                    Path(name).stem)
        except Exception as exc:  # noqa: BLE001 -- an unreadable notebook is the student's: say so, grade the rest
            nb = None
            outcome["notes"].append(f"{name} could not be read as a notebook ({printable(exc, 300)})")
        if nb is not None:
            kernel_copy = gradebook.for_kernel(nb)
            executed = gradebook.read_executed(
                execute(kernel_copy, modules, name, sandbox=sandbox, limits=limits, cell_timeout=cell_timeout,
                        timeout=cell_timeout * (len(nb.cells) + 1) + 120), kernel_copy)
            outcome["claimed"] = gradebook.claimed(executed, {g: t["points"] for g, t in test_ids.items()})
            results = {f"cell-{t.test}": (t.status, t.message) for t in result.tests}
            _write_autograded(course, a, student, gradebook.autograded(nb, executed, results), name, modules, folder)
        sanitized[Path(name).stem] = nb
    gradebook.write_scores(db_url, a.name, student, timestamp(folder), sanitized, trusted)
    after, _ = handins.check(a.name, student, folder)
    if after != changed:
        outcome["changed_during_grading"] = after
    save_outcome(course, a.name, student, outcome)
    return outcome


def _write_autograded(course: Path, a: Assignment, student: str, nb: nbformat.NotebookNode, name: str,
                      modules: dict[str, bytes], folder: Path) -> None:
    out = course / "autograded" / student / a.name
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / name, nbformat.writes(nb))
    for file, data in modules.items():
        write_atomic(out / file, lambda f, data=data: f.write(data))
    stamp = timestamp(folder)
    if stamp:
        write_text_atomic(out / "timestamp.txt", stamp + "\n")


def _require_in_gradebook(course: Path, assignment: str) -> None:
    """ValueError, one line, unless the course's gradebook knows the assignment (its cells and points)."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (course / "gradebook.db").is_file():
        raise ValueError(f"no {course / 'gradebook.db'}: run `nbgrader generate_assignment {assignment}` in the course "
                         "first (it records the assignment's cells and points)")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"{course / 'gradebook.db'} does not know {assignment}: run `nbgrader "
                             f"generate_assignment {assignment}` in the course first") from None


def autograde(course: Path, assignment: str, student: Optional[str] = None, *, sandbox: bool = True,
              limits: Limits = Limits(), timeout: float = 120, cell_timeout: float = CELL_TIMEOUT,
              source: Path = CHECKOUT_SOURCE, log: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    """Autograde every hand-in of ``assignment`` in ``course`` (or ``student``'s), one sandbox each; returns
    {student: outcome}. Raises ValueError (one line) for notebooks without nbgrader's metadata, before
    anything is graded, and for an assignment this lab does not grade; SandboxUnavailable without bwrap."""
    course = Path(course).resolve()
    if assignment not in ASSIGNMENTS:
        raise ValueError(f"lab.grading.autograde grades the lab's assignments: {assignment!r} is not one of "
                         f"{sorted(ASSIGNMENTS)}")
    problems = check_submissions(course, assignment, student or "*")
    if problems:
        raise ValueError(f"nothing autograded: {'; '.join(problems)} (hand out the notebooks of "
                         "build/assignments/student/ or nbgrader's release/, which carry it)")
    if sandbox:
        require_sandbox()
        if cgroup.unavailable():
            print(f"autograde: {cgroup.unavailable()}", file=sys.stderr)
    a = ASSIGNMENTS[assignment]
    tests = load_tests(Path(source), a)
    _require_in_gradebook(course, assignment)
    handins = Handins(course)
    folders = sorted((p for p in (course / "submitted").glob(f"{student or '*'}/{assignment}")),
                     key=lambda p: natural_key(p.parent.name))
    outcomes = {}
    for folder in folders:
        who = folder.parent.name
        outcome = grade_one(course, a, who, folder, tests, handins, sandbox=sandbox, limits=limits, timeout=timeout,
                            cell_timeout=cell_timeout)
        outcomes[who] = outcome
        points = sum(outcome["trusted"].values())
        log(f"{shown(who, 40):20s} {points:g} / {a.autograded_points:g}"
            + (f"  ({outcome['status']})" if outcome["status"] != "complete" else ""))
    return outcomes


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.autograde", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", help="the assignment's folder name under source/")
    parser.add_argument("--course", type=Path, default=Path("."), help="the nbgrader course folder (default: .)")
    parser.add_argument("--student", help="autograde this student only (default: every submission)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per test of the trusted grading "
                        "(default 120)")
    parser.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT, help="seconds a cell of the student's "
                        f"notebook may run in its sandbox (default {CELL_TIMEOUT})")
    parser.add_argument("--memory", type=float, default=DEFAULT_MEMORY / GiB,
                        help=f"GB of memory for each student's sandbox (default {DEFAULT_MEMORY / GiB:g})")
    parser.add_argument("--no-sandbox", action="store_true", help="run the students' code without bubblewrap, "
                        "unisolated (what it gives up is printed)")
    args = parser.parse_args(argv)
    if args.no_sandbox:
        print(f"autograde: {NO_SANDBOX_GIVES_UP}", file=sys.stderr)
    try:
        autograde(args.course, args.assignment, args.student, sandbox=not args.no_sandbox,
                  limits=Limits(memory=int(args.memory * GiB)), timeout=args.timeout, cell_timeout=args.cell_timeout)
    except (OSError, ValueError, SandboxUnavailable) as exc:
        parser.exit(1, f"autograde: {printable(exc, 2000)}\n")


if __name__ == "__main__":
    main()
