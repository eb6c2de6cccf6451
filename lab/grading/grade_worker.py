"""The trusted process that grades ONE submission, started by :mod:`lab.grading.grade` next to a scratch copy.

    python -I -m lab.grading.grade_worker --assignment NAME --tests tests.json --results results.jsonl
                                          --folder WORK [--timeout 120] [--no-sandbox] [--memory BYTES]

The student's code never runs here, and nothing of theirs is imported: the grader starts this process with
``python -I`` (:mod:`lab.grading.launch`) in a folder that holds none of the student's files, so a module the
student named ``json.py`` is never on its path. It starts the student's process in a sandbox on a copy of
the submission folder (``--folder``, read as data; :mod:`lab.grading.remote`), then runs each test
cell's code here, with the checks, the references and the comparison of this process, on stand-ins
of the student's functions that send the inputs and get the outputs back as plain data. The time
limit of a test is enforced from here: past it the student's process is killed (and restarted for
the next test). One JSON line per test is appended to ``--results`` as soon as it is known.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Optional

from .assignments import ASSIGNMENTS
from .feedback import student_frame
from .grade_sheet import IMPORT_FAILED
from .remote import StudentProcess, StudentProcessEnded, TestTimeout
from .sandbox import DEFAULT_MEMORY, Limits
from .names import printable
from .submission import grading_names

STARTUP_S = 120  # starting Python and importing torch in the student's process, on top of the test's limit


def describe(exc: BaseException) -> str:
    """An exception from the student's code, in one message: what, and where in their files."""
    if isinstance(exc, SystemExit):
        return (f"your code called sys.exit({exc.code!r}) (or exit()/quit()): graded code must return its result, "
                "not end the program.")
    where, code = student_frame(exc)
    return f"{type(exc).__name__}: {exc}" + (f"\n  at {where}: {code}" if where else "")


def run_test(code: str, where: str, ns: dict[str, Any], student: StudentProcess, timeout: float) -> tuple[str, str]:
    """(status, message) of one test cell: passed, failed (a check's message), error, timeout or crashed."""
    student.deadline = time.monotonic() + timeout
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):  # the checks' own prints
            exec(compile(code, where, "exec"), dict(ns))
        return "passed", "passed"
    except TestTimeout:
        return "timeout", f"this test did not finish within {timeout:g} s: an endless loop, or far too slow?"
    except StudentProcessEnded as exc:
        return "crashed", str(exc) + _tail(student.log)
    except AssertionError as exc:  # a check's failure: the message is written for the student
        return "failed", str(exc) or "an assertion failed"
    except BaseException as exc:  # noqa: B036 -- sys.exit and the like are the student's too
        return "error", describe(exc)
    finally:
        student.deadline = float("inf")
        student.forget()


def _tail(log: Path) -> str:
    """The end of the student's process's output (a native crash's message), read from the grader's own file."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 1500))
            tail = f.read().decode(errors="replace").strip()
    except OSError:
        return ""
    return f"\n\nLast output:\n{tail}" if tail else ""


def _write(out, record: dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()
    os.fsync(out.fileno())


def _start(student: StudentProcess, timeout: float) -> Optional[str]:
    """None once the submission is imported, else the message of its import failure."""
    error = student.start(STARTUP_S, timeout)
    if error is None:
        return None
    if not isinstance(error, dict):
        error = {}
    text = {k: printable(error.get(k, ""), 5000 if k == "message" else 300)
            for k in ("type", "message", "where", "code")}
    if text["type"] == "SystemExit":
        why = describe(SystemExit(printable(error.get("exit_code"), 300)))
    elif text["type"]:
        where = f"\n  at {text['where']}: {text['code']}" if text["where"] else ""
        why = f"{text['type']}: {text['message']}{where}"
    else:
        why = text["message"]
    return f"{IMPORT_FAILED}: {why}"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.grade_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", required=True, choices=sorted(ASSIGNMENTS))
    parser.add_argument("--tests", type=Path, required=True, help="JSON list of {cell, code, where}")
    parser.add_argument("--results", type=Path, required=True, help="JSON lines, appended")
    parser.add_argument("--folder", type=Path, required=True, help="the submission's files (read as data: they "
                        "are copied into the sandbox, never imported here)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per test")
    parser.add_argument("--no-sandbox", action="store_true", help="run the student's code unisolated")
    parser.add_argument("--memory", type=int, default=DEFAULT_MEMORY, help="bytes for the student's process")
    args = parser.parse_args(argv)
    tests = json.loads(args.tests.read_text())
    log = args.results.with_name("student_output.txt")
    student = StudentProcess(args.assignment, args.folder, log, Limits(memory=args.memory), not args.no_sandbox)
    with open(args.results, "a") as out:
        try:
            start = time.perf_counter()
            failed = _start(student, args.timeout)
            if failed:
                for test in tests:
                    _write(out, dict(cell=test["cell"], status="error", message=failed, seconds=0.0))
                return
            _write(out, dict(cell=None, status="imported", message="", seconds=time.perf_counter() - start))
            ended = None
            for test in tests:
                start = time.perf_counter()
                if ended:
                    _write(out, dict(cell=test["cell"], status="not run", message=ended, seconds=0.0))
                    continue
                if not student.alive:  # killed at the last test's deadline: a fresh one for this test
                    failed = _start(student, args.timeout)
                    if failed:
                        _write(out, dict(cell=test["cell"], status="error", message=failed, seconds=0.0))
                        continue
                # The checks and torch win over the student's names: a module cannot shadow a check.
                ns = {**student.functions, **grading_names()}
                status, message = run_test(test["code"], test["where"], ns, student, args.timeout)
                if status == "crashed":
                    ended = "not run: the grading process had ended before this test"
                _write(out, dict(cell=test["cell"], status=status, message=message, seconds=time.perf_counter() - start,
                                 lab_calls=sorted(student.lab_calls.get(test["function"], ()))))
        finally:
            student.close()


if __name__ == "__main__":
    main()
