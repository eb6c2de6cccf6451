"""Grade a folder of submissions in one command: a grade sheet, totals for an LMS, a feedback file per student.

    python -m lab.grading.grade SUBMISSIONS_DIR -o grades.csv [--assignment NAME] [--source assignments]
                                [--timeout 120] [--jobs 1] [--regrade] [--excel] [--max-unpacked-mb 50]
                                [--memory 4] [--no-sandbox]

SUBMISSIONS_DIR holds one entry per student, named after the student: ``NAME.zip`` (made by
``python -m lab.grading.collect``), or a folder ``NAME/`` holding the assignment's files, one such
zip, or nbgrader's ``NAME/ASSIGNMENT/`` layout. The tests are the test cells of the solution
notebook (self-check + hidden tests), each scored all or nothing with the points of the weight
table in lab/grading/assignments.py. Every submission is graded by its own process, and the student's
code runs only in a bubblewrap sandbox on a scratch copy (lab/grading/sandbox.py), with a time limit
per test enforced from outside: a hang, a crash or an exit costs that submission its tests, never the
batch; the checks, the reference values and the score are computed outside the sandbox.
Writes ``grades.csv`` (one row per student and test), ``grades_totals.csv`` (one row per student)
and ``grades_feedback/NAME.txt``, each student as soon as it is graded: the same command again resumes
(``--regrade`` starts over; another batch's outputs are refused). Zips are read streamed and within limits
(:mod:`lab.grading.unzip`). Written answers are graded by hand and are not in these points.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import nbformat
from tqdm.auto import tqdm

from . import cgroup
from .assignments import ASSIGNMENTS, Assignment
from .find import Submission, find_submissions
from .grade_sheet import REFUSED, Sheet, StudentResult, TestResult
from .handin import UnsafeFolder, read_files, refuse_link
from .integrity import column, static_uses
from .launch import python_module
from .markers import notebook_tests
from .names import printable, shown
from .sandbox import DEFAULT_MEMORY, GiB, NO_SANDBOX_GIVES_UP, SandboxUnavailable, require_sandbox
from .submission import MANIFEST, unpack, verify
from .unzip import Limits, UnsafeZip

CHECKOUT_SOURCE = Path(__file__).resolve().parents[2] / "assignments"
STARTUP_S = 120  # allowance for starting Python and importing torch, on top of the per-test limits


def load_tests(source: Path, assignment: Assignment) -> list[dict]:
    """The test cells of the assignment's solution notebook, checked against its weight table."""
    path = source / assignment.name / assignment.notebook
    if not path.is_file():
        raise FileNotFoundError(f"no solution notebook {path} (pass --source, the folder of the assignment sources)")
    tests = {t.cell: t for t in notebook_tests(nbformat.read(path, as_version=4), assignment.notebook)}
    weights = {t.cell: t for t in assignment.tests}
    if set(tests) != set(weights):
        raise ValueError(f"{path}: test cells {sorted(tests)} differ from the weight table's {sorted(weights)} "
                         "(lab/grading/assignments.py)")
    return [dict(cell=c, code=t.code, where=t.where, function=weights[c].function, points=weights[c].points)
            for c, t in tests.items()]


# -------------------------------------------------------------------------------- one student
def _prepare(sub: Submission, work: Path, limits: Limits) -> dict[str, bytes]:
    """Write the submission's modules into ``work`` (the sandbox's copy): the ``.py`` files of a zip, or of a
    folder read as data (:mod:`lab.grading.handin`: no link followed); note what is odd; return them.
    Raises UnsafeZip or UnsafeFolder for a submission that is refused, with the reason."""
    if sub.path.suffix == ".zip":
        refuse_link(sub.path, f"{shown(sub.student)}'s {shown(sub.path.name)}")
        try:
            verify(sub.path, limits)
        except KeyError:
            sub.notes.append(f"{shown(sub.path.name)} has no {MANIFEST}: not made by lab.grading.collect")
        except Exception as exc:
            sub.notes.append(f"{shown(sub.path.name)} does not match its manifest ({printable(exc, 300)}); graded "
                             "as it is")
        unpack(sub.path, work, limits, suffixes=(".py",))
        return {p.name: p.read_bytes() for p in sorted(work.iterdir())}
    files = read_files(sub.path, shown(sub.student), (".py",), limits)
    for name, data in files.items():
        (work / name).write_bytes(data)
    return files


def _ended(proc: subprocess.Popen, timed_out: bool, total: float) -> str:
    if timed_out:
        return f"the submission did not finish within {total:g} s in all (a hang outside Python code?)"
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return f"the grading process was killed by {name} during this test (a crash in native code, or out of memory)"
    return (f"the grading process ended (exit status {proc.returncode}) during this test: does your code call "
            "os._exit() or crash the interpreter?")


def refused(sub: Submission, tests: list[dict], why: str) -> StudentResult:
    """A submission of which nothing is graded: every test an error whose message (and the note) says why."""
    sub.notes.append(f"{REFUSED}{why}")
    name = sub.assignment.name if sub.assignment else ""
    return StudentResult(sub.student, name, [TestResult(sub.student, name, t["cell"], t["function"], 0.0, t["points"],
                                                        "error", 0.0, f"{REFUSED}{why}") for t in tests], 0.0,
                         sub.notes)


def run_submission(sub: Submission, tests: list[dict], timeout: float, limits: Limits = Limits(), *,
                   sandbox: bool = True, memory: int = DEFAULT_MEMORY) -> StudentResult:
    """Grade one submission in its own process; its code runs in a sandbox unless ``sandbox=False``."""
    if sub.refused:
        return refused(sub, tests, sub.refused)
    if sandbox:
        require_sandbox()
    name, start = sub.assignment.name, time.perf_counter()

    def result(t, status, message, seconds=0.0, lab_code=""):
        points = t["points"] if status == "passed" else 0.0
        return TestResult(sub.student, name, t["cell"], t["function"], points, t["points"], status, seconds, message,
                          lab_code)

    if sub.path is None:
        return StudentResult(sub.student, name, [result(t, "missing", sub.notes[0]) for t in tests], 0.0, sub.notes)
    with tempfile.TemporaryDirectory(prefix="ranklab_grade_") as scratch:
        scratch = Path(scratch)
        work = scratch / "work"
        work.mkdir()
        try:
            sources = _prepare(sub, work, limits)
        except (UnsafeZip, UnsafeFolder, zipfile.BadZipFile) as exc:
            return refused(sub, tests, printable(exc, 500))
        missing = [m for m in sub.assignment.modules if m not in sources]
        if missing:
            text = f"{', '.join(missing)} is missing from the submission"
            return StudentResult(sub.student, name, [result(t, "missing", text) for t in tests], 0.0, sub.notes)
        static = static_uses(sources, [t["function"] for t in tests])
        (scratch / "tests.json").write_text(json.dumps(tests))
        # python -I, in the scratch folder (never the student's files' folder): nothing of theirs is importable.
        cmd = python_module("lab.grading.grade_worker", "--assignment", name, "--tests", scratch / "tests.json",
                            "--results", scratch / "results.jsonl", "--folder", work, "--timeout", timeout,
                            "--memory", memory, *([] if sandbox else ["--no-sandbox"]))
        total = (STARTUP_S + timeout) * (len(tests) + 1)  # a time-out restarts the student's process
        with open(scratch / "output.txt", "w") as log:
            # Its own session: on a time-out the whole process group goes, whatever the student started.
            proc = subprocess.Popen(cmd, cwd=scratch, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(total)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                timed_out = True
        done = {}
        if (scratch / "results.jsonl").is_file():
            for line in (scratch / "results.jsonl").read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a crash
                    continue
                done[record["cell"]] = record
        out, ended = [], False
        for t in tests:
            if t["cell"] in done:
                r = done[t["cell"]]
                out.append(result(t, r["status"], r["message"], r["seconds"],
                                  column(static[t["function"]], r.get("lab_calls", ()), t["function"])))
            elif not ended:
                tail = (scratch / "output.txt").read_text(errors="replace").strip()[-1500:]
                last = f"\n\nLast output:\n{tail}" if tail else ""
                out.append(result(t, "crashed", _ended(proc, timed_out, total) + last))
                ended = True
            else:
                out.append(result(t, "not run", "not run: the grading process had ended before this test"))
    return StudentResult(sub.student, name, out, time.perf_counter() - start, sub.notes)


# ----------------------------------------------------------------------------------- the batch
def batch_of(folder: Path, assignment: Optional[str]) -> dict:
    """What makes two runs the same batch (the second resumes the first): the submissions folder and --assignment."""
    return {"submissions": str(Path(folder).resolve()), "assignment": assignment}


def grade(folder: Path, output: Path, *, assignment: Optional[str] = None, source: Optional[Path] = None,
          timeout: float = 120, jobs: int = 1, totals: Optional[Path] = None,
          feedback: Optional[Path] = None, max_unpacked_mb: float = 50, regrade: bool = False,
          excel: bool = False, sandbox: bool = True, memory: int = DEFAULT_MEMORY) -> list[StudentResult]:
    """Grade every submission of ``folder``; write the grade sheet, the totals and the feedback files, each
    student as soon as it is graded. A re-run of the same batch (same folder and ``assignment``) skips the
    students already written, unless ``regrade``; outputs of another batch are refused (see grade_sheet.Sheet).
    Returns the students graded by this run. Raises SandboxUnavailable when ``sandbox`` and bubblewrap does
    not work here (before anything is written)."""
    if not timeout > 0 or jobs < 1:
        raise ValueError(f"timeout must be > 0 seconds and jobs >= 1, got timeout={timeout}, jobs={jobs}")
    if not max_unpacked_mb > 0:
        raise ValueError(f"--max-unpacked-mb must be > 0, got {max_unpacked_mb}")
    if not memory >= 2**28:
        raise ValueError(f"memory must be >= 0.25 GB (torch needs it), got {memory / GiB:g} GB")
    limits = Limits(max_bytes=int(max_unpacked_mb * 2**20))
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    subs = find_submissions(folder, assignment, limits)
    if not subs:
        raise ValueError(f"{folder} holds no submission (NAME.zip files or NAME/ folders)")
    source = Path(source) if source else (Path("assignments") if Path("assignments").is_dir() else CHECKOUT_SOURCE)
    tests = {a.name: load_tests(source, a) for a in {s.assignment for s in subs if s.assignment}}
    if sandbox:  # after the checks of the arguments (their errors come first), before anything is written
        require_sandbox()
        if cgroup.unavailable():  # one line: what then bounds a submission's memory
            print(f"grade: {cgroup.unavailable()}", file=sys.stderr)
    output = Path(output)
    batch = batch_of(folder, assignment)
    sheet = Sheet(output, totals or output.with_name(f"{output.stem}_totals.csv"),
                  feedback or output.with_name(f"{output.stem}_feedback"), batch, regrade=regrade, excel=excel)
    todo = [s for s in subs if s.student not in sheet.graded]
    if len(todo) < len(subs):
        print(f"grade: resuming {output}: {len(subs) - len(todo)} of {len(subs)} students already graded are kept "
              "(--regrade grades them again)", file=sys.stderr)
    sheet.start(batch)
    lock, stop = threading.Lock(), threading.Event()

    def one(sub: Submission) -> Optional[StudentResult]:
        if stop.is_set():  # the batch is being stopped (Ctrl-C): leave this student to the re-run
            return None
        if sub.refused:  # a link, a hidden name, two entries of one student: a row that says so, nothing run
            result = refused(sub, tests[sub.assignment.name] if sub.assignment else [], sub.refused)
        elif sub.assignment is None:
            result = StudentResult(sub.student, "", [], 0.0, sub.notes)
        else:
            try:
                result = run_submission(sub, tests[sub.assignment.name], timeout, limits, sandbox=sandbox,
                                        memory=memory)
            except BaseException as exc:  # noqa: B036
                if not isinstance(exc, Exception):  # Ctrl-C, a SystemExit: the batch stops
                    stop.set()
                    raise
                # The grader's own trouble with this submission (disk, permissions): note it, go on.
                result = StudentResult(sub.student, sub.assignment.name, [], 0.0,
                                       sub.notes + [f"could not be graded: {type(exc).__name__}: {exc}"])
        with lock:  # written now, by this thread: a crash of the batch later loses nothing of it
            sheet.add(result)
        return result

    with ThreadPoolExecutor(max(1, jobs)) as pool:  # threads only wait: each submission is its own process
        futures = [pool.submit(one, s) for s in todo]
        try:
            return [r for f in tqdm(futures, desc="grading", unit="student") if (r := f.result())]
        finally:  # on Ctrl-C (or any escape) start no other student; the written ones stay
            stop.set()
            for f in futures:
                f.cancel()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="folder with one NAME.zip or NAME/ per student")
    parser.add_argument("-o", "--output", type=Path, default=Path("grades.csv"), help="the grade sheet (CSV)")
    parser.add_argument("--assignment", choices=sorted(ASSIGNMENTS), help="default: from each submission")
    parser.add_argument("--source", type=Path, help="the assignment sources (default: ./assignments, else the "
                        "checkout's)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per test (default 120)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    parser.add_argument("--memory", type=float, default=DEFAULT_MEMORY / GiB,
                        help=f"GB of memory for each student's code (default {DEFAULT_MEMORY // GiB})")
    parser.add_argument("--no-sandbox", action="store_true", help="run student code without bubblewrap, "
                        "unisolated (only where bwrap cannot run: see docs/teaching.md)")
    parser.add_argument("--totals", type=Path, help="default: OUTPUT_totals.csv")
    parser.add_argument("--feedback", type=Path, help="folder of the feedback files (default: OUTPUT_feedback/)")
    parser.add_argument("--regrade", action="store_true", help="grade every student again, overwriting OUTPUT "
                        "(default: a re-run of the same batch skips the students already in it; another batch's "
                        "OUTPUT is refused)")
    parser.add_argument("--excel", action="store_true", help="write the CSVs with a UTF-8 BOM, which Excel needs "
                        "to show accents and symbols (LibreOffice and LMS imports read either)")
    parser.add_argument("--max-unpacked-mb", type=float, default=50, help="a zip unpacking to more is refused "
                        "(default 50; collect packs at most 5)")
    args = parser.parse_args(argv)
    if args.no_sandbox:
        print(f"grade: {NO_SANDBOX_GIVES_UP}", file=sys.stderr)
    try:
        results = grade(args.submissions, args.output, assignment=args.assignment, source=args.source,
                        timeout=args.timeout, jobs=args.jobs, totals=args.totals, feedback=args.feedback,
                        max_unpacked_mb=args.max_unpacked_mb, regrade=args.regrade, excel=args.excel,
                        sandbox=not args.no_sandbox, memory=int(args.memory * GiB))
    except (OSError, ValueError, SandboxUnavailable) as exc:
        parser.exit(2, f"grade: {exc}\n")
    except KeyboardInterrupt:
        parser.exit(130, f"grade: interrupted; the students graded so far are in {args.output}, and the same "
                         "command resumes\n")
    for r in results:
        extra = "" if r.status == "complete" else f"  ({r.status}{': ' + '; '.join(r.notes) if r.notes else ''})"
        print(f"{shown(r.student, 40):20s} {r.points:g} / {r.max_points:g}{printable(extra, 300)}")
    print(f"wrote {args.output}, {args.totals or args.output.with_name(args.output.stem + '_totals.csv')} and "
          f"{args.feedback or args.output.with_name(args.output.stem + '_feedback')}/")


if __name__ == "__main__":
    main()
