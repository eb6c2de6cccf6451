"""Grade a folder of submissions in one command: a grade sheet, totals for an LMS, a feedback file per student.

    python -m lab.grading.grade SUBMISSIONS_DIR -o grades.csv [--assignment NAME] [--source assignments]
                                [--timeout 120] [--jobs 1] [--memory 4] [--no-sandbox]

SUBMISSIONS_DIR holds one entry per student, named after the student: ``NAME.zip`` (made by
``python -m lab.grading.collect``), or a folder ``NAME/`` holding the assignment's files, one such
zip, or nbgrader's ``NAME/ASSIGNMENT/`` layout. The tests are the test cells of the solution
notebook (self-check + hidden tests), each scored all or nothing with the points of the weight
table in lab/grading/assignments.py. Every submission is graded by its own process, and the student's
code runs only in a bubblewrap sandbox on a scratch copy (lab/grading/sandbox.py), with a time limit
per test enforced from outside: a hang, a crash or an exit costs that submission its tests, never the
batch; the checks, the reference values and the score are computed outside the sandbox.
Writes ``grades.csv`` (one row per student and test), ``grades_totals.csv`` (one row per student)
and ``grades_feedback/NAME.txt``. Written answers are graded by hand and are not in these points.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import nbformat
from tqdm.auto import tqdm

from .assignments import ASSIGNMENTS, Assignment, find_assignment
from .grade_sheet import StudentResult, TestResult, write
from .markers import notebook_tests
from .sandbox import DEFAULT_MEMORY, GiB, NO_SANDBOX_GIVES_UP, SandboxUnavailable, require_sandbox
from .submission import KINDS, MANIFEST, unpack, verify

CHECKOUT_SOURCE = Path(__file__).resolve().parents[2] / "assignments"
STARTUP_S = 120  # allowance for starting Python and importing torch, on top of the per-test limits


@dataclass
class Submission:
    student: str
    path: Optional[Path]  # a zip or a folder; None when nothing gradable was found
    assignment: Optional[Assignment] = None
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ finding the work
def _gradable(folder: Path) -> bool:
    return any(p.suffix in KINDS for p in folder.iterdir() if p.is_file())


def _locate(entry: Path) -> Optional[Path]:
    """The zip or folder to grade for one entry of SUBMISSIONS_DIR."""
    if entry.is_file():
        return entry if entry.suffix == ".zip" else None
    if _gradable(entry):
        return entry
    zips = sorted(entry.glob("*.zip"))
    if len(zips) == 1:
        return zips[0]
    inner = [p for p in entry.iterdir() if p.is_dir() and p.name in ASSIGNMENTS]  # nbgrader: NAME/ASSIGNMENT/
    return inner[0] if len(inner) == 1 and _gradable(inner[0]) else None


def _assignment(path: Path, notes: list[str]) -> Optional[Assignment]:
    """By the zip's manifest, else by the files (see find_assignment)."""
    if path.suffix == ".zip":
        try:
            return ASSIGNMENTS[verify(path)["assignment"]]
        except Exception:  # no or broken manifest: look at the files instead (_prepare notes why)
            with zipfile.ZipFile(path) as zf:
                files = {n for n in zf.namelist() if "/" not in n}
    else:
        files = {p.name for p in path.iterdir()}
    try:
        return find_assignment(path.stem if path.suffix == ".zip" else path.name, files)
    except ValueError as exc:
        notes.append(str(exc))
        return None


def find_submissions(folder: Path, forced: Optional[str] = None) -> list[Submission]:
    """One Submission per entry of ``folder`` (hidden entries and stray files skipped), sorted by student.
    An entry whose assignment cannot be told gets the batch's, when the others agree on one."""
    out = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or (entry.is_file() and entry.suffix != ".zip"):
            continue
        sub = Submission(entry.stem if entry.is_file() else entry.name, _locate(entry))
        if sub.path is not None and sub.path.suffix == ".zip" and not zipfile.is_zipfile(sub.path):
            sub.path = None
            sub.notes.append(f"{entry.name} is not a readable zip")
        elif sub.path is None:
            sub.notes.append("no submission found (a zip from lab.grading.collect, or the assignment's files)")
        if forced:
            sub.assignment = ASSIGNMENTS[forced]
        elif sub.path is not None:
            sub.assignment = _assignment(sub.path, sub.notes)
        out.append(sub)
    found = {s.assignment.name for s in out if s.assignment}
    if len(found) == 1:
        for sub in out:
            sub.assignment = sub.assignment or ASSIGNMENTS[next(iter(found))]
    return out


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
def _prepare(sub: Submission, work: Path) -> None:
    """Copy (or unpack) the submission's modules and notebooks into ``work``; note what is odd."""
    if sub.path.suffix == ".zip":
        try:
            verify(sub.path)
        except KeyError:
            sub.notes.append(f"{sub.path.name} has no {MANIFEST}: not made by lab.grading.collect")
        except Exception as exc:
            sub.notes.append(f"{sub.path.name} does not match its manifest ({exc}); graded as it is")
        unpack(sub.path, work)
    else:
        for p in sub.path.iterdir():
            if p.is_file() and p.suffix in KINDS:
                shutil.copy(p, work / p.name)


def _ended(proc: subprocess.Popen, timed_out: bool, total: float) -> str:
    if timed_out:
        return f"the submission did not finish within its {total:g} s in all (a hang outside Python code?)"
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return f"the grading process was killed by {name} during this test (a crash in native code, or out of memory)"
    return (f"the grading process ended (exit status {proc.returncode}) during this test: does your code call "
            "os._exit() or crash the interpreter?")


def run_submission(sub: Submission, tests: list[dict], timeout: float, *, sandbox: bool = True,
                   memory: int = DEFAULT_MEMORY) -> StudentResult:
    """Grade one submission in its own process; its code runs in a sandbox unless ``sandbox=False``."""
    if sandbox:
        require_sandbox()
    name, start = sub.assignment.name, time.perf_counter()

    def result(t, status, message, seconds=0.0):
        points = t["points"] if status == "passed" else 0.0
        return TestResult(sub.student, name, t["cell"], t["function"], points, t["points"], status, seconds, message)

    if sub.path is None:
        return StudentResult(sub.student, name, [result(t, "missing", sub.notes[0]) for t in tests], 0.0, sub.notes)
    with tempfile.TemporaryDirectory(prefix="ranklab_grade_") as scratch:
        scratch = Path(scratch)
        work = scratch / "work"
        work.mkdir()
        _prepare(sub, work)
        missing = [m for m in sub.assignment.modules if not (work / m).is_file()]
        if missing:
            text = f"{', '.join(missing)} is missing from the submission"
            return StudentResult(sub.student, name, [result(t, "missing", text) for t in tests], 0.0, sub.notes)
        (scratch / "tests.json").write_text(json.dumps(tests))
        cmd = [sys.executable, "-m", "lab.grading.grade_worker", "--assignment", name, "--tests",
               str(scratch / "tests.json"), "--results", str(scratch / "results.jsonl"), "--timeout", str(timeout),
               "--memory", str(memory)] + ([] if sandbox else ["--no-sandbox"])
        total = (STARTUP_S + timeout) * (len(tests) + 1)  # a time-out restarts the student's process
        with open(scratch / "output.txt", "w") as log:
            # Its own session: on a time-out the whole process group goes, whatever the student started.
            proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONPATH": _pythonpath()})
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
                out.append(result(t, r["status"], r["message"], r["seconds"]))
            elif not ended:
                tail = (scratch / "output.txt").read_text(errors="replace").strip()[-1500:]
                out.append(result(t, "crashed", _ended(proc, timed_out, total) + (f"\n\nLast output:\n{tail}" if tail else "")))
                ended = True
            else:
                out.append(result(t, "not run", "not run: the grading process had ended before this test"))
    return StudentResult(sub.student, name, out, time.perf_counter() - start, sub.notes)


def _pythonpath() -> str:
    """The worker must import this very ``lab``, wherever the grader was started from."""
    here = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return here + (os.pathsep + rest if rest else "")


# ----------------------------------------------------------------------------------- the batch
def grade(folder: Path, output: Path, *, assignment: Optional[str] = None, source: Optional[Path] = None,
          timeout: float = 120, jobs: int = 1, totals: Optional[Path] = None,
          feedback: Optional[Path] = None, sandbox: bool = True, memory: int = DEFAULT_MEMORY) -> list[StudentResult]:
    """Grade every submission of ``folder``; write the grade sheet, the totals and the feedback files.
    Raises SandboxUnavailable when ``sandbox`` and bubblewrap does not work here."""
    if not timeout > 0 or jobs < 1:
        raise ValueError(f"timeout must be > 0 seconds and jobs >= 1, got timeout={timeout}, jobs={jobs}")
    if not memory >= 2**28:
        raise ValueError(f"memory must be >= 0.25 GB (torch needs it), got {memory / GiB:g} GB")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    subs = find_submissions(folder, assignment)
    if not subs:
        raise ValueError(f"{folder} holds no submission (NAME.zip files or NAME/ folders)")
    source = Path(source) if source else (Path("assignments") if Path("assignments").is_dir() else CHECKOUT_SOURCE)
    tests = {a.name: load_tests(source, a) for a in {s.assignment for s in subs if s.assignment}}
    if sandbox:  # after the checks of the arguments: their errors come first
        require_sandbox()

    def one(sub: Submission) -> StudentResult:
        if sub.assignment is None:
            return StudentResult(sub.student, "", [], 0.0, sub.notes)
        try:
            return run_submission(sub, tests[sub.assignment.name], timeout, sandbox=sandbox, memory=memory)
        except Exception as exc:  # the grader's own trouble with this submission (disk, permissions): note it, go on
            return StudentResult(sub.student, sub.assignment.name, [], 0.0,
                                 sub.notes + [f"could not be graded: {type(exc).__name__}: {exc}"])

    with ThreadPoolExecutor(max(1, jobs)) as pool:  # threads only wait: each submission is its own process
        results = list(tqdm(pool.map(one, subs), total=len(subs), desc="grading", unit="student"))
    output = Path(output)
    write(results, output, totals or output.with_name(f"{output.stem}_totals.csv"),
          feedback or output.with_name(f"{output.stem}_feedback"))
    return results


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
    args = parser.parse_args(argv)
    if args.no_sandbox:
        print(f"grade: {NO_SANDBOX_GIVES_UP}", file=sys.stderr)
    try:
        results = grade(args.submissions, args.output, assignment=args.assignment, source=args.source,
                        timeout=args.timeout, jobs=args.jobs, totals=args.totals, feedback=args.feedback,
                        sandbox=not args.no_sandbox, memory=int(args.memory * GiB))
    except (OSError, ValueError, SandboxUnavailable) as exc:
        parser.exit(2, f"grade: {exc}\n")
    for r in results:
        extra = "" if r.status == "complete" else f"  ({r.status}{': ' + '; '.join(r.notes) if r.notes else ''})"
        print(f"{r.student:20s} {r.points:g} / {r.max_points:g}{extra}")
    print(f"wrote {args.output}, {args.totals or args.output.with_name(args.output.stem + '_totals.csv')} and "
          f"{args.feedback or args.output.with_name(args.output.stem + '_feedback')}/")


if __name__ == "__main__":
    main()
