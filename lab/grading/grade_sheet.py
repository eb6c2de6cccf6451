"""What ``python -m lab.grading.grade`` writes: the grade sheet, the totals for an LMS, the feedback files.

grades.csv         one row per student and test: student, assignment, test, function, points,
                   max_points, status, seconds, feedback (the message's first paragraph), feedback_file
grades_totals.csv  one row per student: student, assignment, points, max_points, percent, seconds,
                   status (complete, or what went wrong), notes, feedback_file
grades_feedback/   NAME.txt per student: every test with its full message
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

IMPORT_FAILED = "importing your module failed"  # how grade_worker's message for a failed import begins
TEST_COLUMNS = ["student", "assignment", "test", "function", "points", "max_points", "status", "seconds", "feedback",
                "feedback_file"]
TOTAL_COLUMNS = ["student", "assignment", "points", "max_points", "percent", "seconds", "status", "notes",
                 "feedback_file"]


@dataclass
class TestResult:
    """One test cell of one student."""

    student: str
    assignment: str
    test: str  # the notebook cell id
    function: str
    points: float
    max_points: float
    status: str  # passed, failed, error, timeout, crashed, not run, missing
    seconds: float
    message: str

    __test__ = False  # not a pytest class


@dataclass
class StudentResult:
    student: str
    assignment: str
    tests: list[TestResult]
    seconds: float
    notes: list[str]

    @property
    def points(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_points(self) -> float:
        return sum(t.max_points for t in self.tests)

    @property
    def status(self) -> str:
        """complete, or the worst thing that happened: missing, crashed, timeout, error (the import failed)."""
        for bad in ("missing", "crashed", "timeout"):
            if any(t.status == bad for t in self.tests):
                return bad
        if self.tests and all(t.status == "error" and t.message.startswith(IMPORT_FAILED) for t in self.tests):
            return "error"  # nothing could be graded: not "complete"
        return "complete" if self.tests else "not graded"


def first_paragraph(message: str) -> str:
    """The message up to its first blank line, on one line (spreadsheets and LMS imports like that)."""
    return " ".join(message.strip().split("\n\n")[0].split())


def _number(x: float) -> str:
    return f"{x:g}"


def feedback_text(result: StudentResult) -> str:
    head = [f"RankLab grading: {result.student}, assignment {result.assignment or '?'}",
            f"Autograded points: {_number(result.points)} / {_number(result.max_points)} "
            "(the written answers are graded by hand)"]
    head += [f"Note: {n}" for n in result.notes]
    body = []
    for t in result.tests:
        body.append(f"[{t.status}] {t.test} ({t.function}): {_number(t.points)} / {_number(t.max_points)} points, "
                    f"{t.seconds:.1f} s")
        if t.status != "passed":
            body.append("\n".join(("    " + line).rstrip() for line in t.message.strip().splitlines()))
    return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def write(results: Iterable[StudentResult], output: Path, totals: Path, feedback: Path) -> None:
    """The three outputs; folders are created, files overwritten."""
    results = list(results)
    for path in (output.parent, totals.parent, feedback):
        path.mkdir(parents=True, exist_ok=True)
    files = {}
    for r in results:
        files[r.student] = feedback / f"{r.student}.txt"
        files[r.student].write_text(feedback_text(r))
    with open(output, "w", newline="") as f:
        sheet = csv.writer(f)
        sheet.writerow(TEST_COLUMNS)
        for r in results:
            for t in r.tests:
                sheet.writerow([t.student, t.assignment, t.test, t.function, _number(t.points), _number(t.max_points),
                                t.status, f"{t.seconds:.2f}", first_paragraph(t.message), str(files[r.student])])
    with open(totals, "w", newline="") as f:
        sheet = csv.writer(f)
        sheet.writerow(TOTAL_COLUMNS)
        for r in results:
            percent = f"{100 * r.points / r.max_points:.1f}" if r.max_points else ""
            sheet.writerow([r.student, r.assignment, _number(r.points), _number(r.max_points), percent,
                            f"{r.seconds:.1f}", r.status, "; ".join(r.notes), str(files[r.student])])
