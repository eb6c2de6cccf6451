"""The process that grades ONE submission, started by :mod:`lab.grading.grade` in a scratch copy of it.

    python -m lab.grading.grade_worker --assignment NAME --tests tests.json --results results.jsonl [--timeout 120]

Runs in the submission's folder (the current directory): imports its modules, then runs each test
cell's code with a time limit and appends one JSON line per test to ``--results`` as soon as it is
known, so that whatever the student's code does next (hang, crash, exit) the finished tests count.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import time
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Iterator, Optional

from .assignments import ASSIGNMENTS
from .feedback import student_frame
from .submission import grading_names, import_modules


class TestTimeout(BaseException):
    """Raised by the alarm; a BaseException so that the student's `except Exception` cannot swallow it."""

    __test__ = False


def _alarm(signum, frame):
    raise TestTimeout()


def describe(exc: BaseException) -> str:
    """An exception from the student's code, in one message: what, and where in their files."""
    if isinstance(exc, SystemExit):
        return (f"your code called sys.exit({exc.code!r}) (or exit()/quit()): graded code must return its result, "
                "not end the program.")
    where, code = student_frame(exc)
    return f"{type(exc).__name__}: {exc}" + (f"\n  at {where}: {code}" if where else "")


@contextmanager
def limited(seconds: float) -> Iterator[None]:
    """Raise TestTimeout in this (main) thread after ``seconds``; the student's prints are swallowed."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def run_test(code: str, where: str, ns: dict[str, Any], timeout: float) -> tuple[str, str]:
    """(status, message) of one test cell: passed, failed (a check's message), error or timeout."""
    try:
        with limited(timeout):
            exec(compile(code, where, "exec"), dict(ns))
        return "passed", "passed"
    except TestTimeout:
        return "timeout", f"this test did not finish within {timeout:g} s: an endless loop, or far too slow?"
    except AssertionError as exc:  # a check's failure: the message is written for the student
        return "failed", str(exc) or "an assertion failed"
    except BaseException as exc:  # noqa: B036 -- sys.exit and the like are the student's too
        return "error", describe(exc)


def _write(out, record: dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()
    os.fsync(out.fileno())


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.grade_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", required=True, choices=sorted(ASSIGNMENTS))
    parser.add_argument("--tests", type=Path, required=True, help="JSON list of {cell, code, where}")
    parser.add_argument("--results", type=Path, required=True, help="JSON lines, appended")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per test")
    args = parser.parse_args(argv)
    tests = json.loads(args.tests.read_text())
    with open(args.results, "a") as out:
        start = time.perf_counter()
        ns = grading_names()
        try:
            with limited(args.timeout):
                ns.update(import_modules(Path.cwd(), ASSIGNMENTS[args.assignment]))
        except BaseException as exc:  # noqa: B036 -- a module that exits, hangs or crashes at import
            why = f"it did not finish within {args.timeout:g} s" if isinstance(exc, TestTimeout) else describe(exc)
            message = f"importing your module failed: {why}"
            for test in tests:
                _write(out, dict(cell=test["cell"], status="error", message=message, seconds=0.0))
            return
        _write(out, dict(cell=None, status="imported", message="", seconds=time.perf_counter() - start))
        for test in tests:
            start = time.perf_counter()
            status, message = run_test(test["code"], test["where"], ns, args.timeout)
            _write(out, dict(cell=test["cell"], status=status, message=message, seconds=time.perf_counter() - start))


if __name__ == "__main__":
    main()
