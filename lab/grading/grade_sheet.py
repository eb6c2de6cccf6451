"""What ``python -m lab.grading.grade`` writes: the grade sheet, the totals for an LMS, the feedback files.

grades.csv         one row per student and test: student, assignment, test, function, points,
                   max_points, status, seconds, feedback (the message's first paragraph), feedback_file,
                   lab_code (does the code run or import lab's own version of the function? a signal:
                   lab/grading/integrity.py)
grades_totals.csv  one row per student: student, assignment, points, max_points, percent, seconds,
                   status (complete, or what went wrong: missing, crashed, timeout, error), notes, feedback_file
grades_feedback/   STEM.txt per student (lab/grading/names.py: a safe, unique form of the name): every test
                   with its full message
grades_batch.json  which batch wrote them (the submissions folder): a re-run of the same batch resumes

Cells are written as text a spreadsheet will not run (see :func:`safe_cell`) and read back exactly
(:func:`read_cell`); every text a student controls is bounded before it is written; students in natural order.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..core.files import write_text_atomic
from .names import file_stem, printable, shown

IMPORT_FAILED = "importing your module failed"  # how grade_worker's message for a failed import begins
REFUSED = "refused: "  # how grade.py's message for a zip it would not open begins
TEST_COLUMNS = ["student", "assignment", "test", "function", "points", "max_points", "status", "seconds", "feedback",
                "feedback_file", "lab_code"]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"
# Bounds on what a student's code can make the grader write (a message, a repr, a name of 30 MB).
MESSAGE_CHARS, CELL_CHARS, NOTE_CHARS = 20_000, 1_000, 1_000
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
    lab_code: str = ""  # what of lab's own code the submission's function ran or imported (lab/grading/integrity.py)

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
        """complete, or the worst thing that happened: missing, crashed, timeout, error (nothing could be
        graded: a module that fails to import or exits at import, a zip that was refused)."""
        for bad in ("missing", "crashed", "timeout"):
            if any(t.status == bad for t in self.tests):
                return bad
        if any(t.status == "error" and t.message.startswith((IMPORT_FAILED, REFUSED)) for t in self.tests):
            return "error"  # nothing could be graded: not "complete" (a function that raises is a failed test)
        if not self.tests and any(n.startswith(REFUSED) for n in self.notes):
            return "error"  # refused before its assignment could be told
        return "complete" if self.tests else "not graded"


def first_paragraph(message: str) -> str:
    """The message up to its first blank line, on one line (spreadsheets and LMS imports like that), bounded."""
    return printable(" ".join(message[:MESSAGE_CHARS].strip().split("\n\n")[0].split()), CELL_CHARS)


def _number(x: float) -> str:
    return f"{x:g}"


def feedback_text(result: StudentResult) -> str:
    head = [f"RankLab grading: {shown(result.student, 200)}, assignment {result.assignment or '?'}",
            f"Autograded points: {_number(result.points)} / {_number(result.max_points)} "
            "(the written answers are graded by hand)"]
    head += [f"Note: {printable(n, NOTE_CHARS)}" for n in result.notes]
    body = []
    for t in result.tests:
        body.append(f"[{t.status}] {t.test} ({t.function}): {_number(t.points)} / {_number(t.max_points)} points, "
                    f"{t.seconds:.1f} s")
        if t.status != "passed":
            message = printable(t.message, MESSAGE_CHARS)
            body.append("\n".join(("    " + line).rstrip() for line in message.strip().splitlines()))
    return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def natural_key(name: str) -> list:
    """Sort key that puts s9 before s10: digit runs compare as numbers (split alternates text, number)."""
    return [int(part) if i % 2 else part.casefold() for i, part in enumerate(re.split(r"(\d+)", name))]


def safe_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: one starting with = + - @ (a formula to Excel and LibreOffice),
    a tab or a carriage return gets a leading single quote (OWASP's CSV injection advice); so does one that
    starts with the quote itself, so that :func:`read_cell` gives back every text exactly."""
    text = str(value)
    return ESCAPE + text if text[:1] in FORMULA_STARTS or text.startswith(ESCAPE) else text


def read_cell(cell: str) -> str:
    """The text :func:`safe_cell` wrote (a re-run finds ``+bob`` by his name, not by ``'+bob``)."""
    return cell[1:] if cell.startswith(ESCAPE) else cell


def write_atomic(path: Path, text: str, encoding: str = "utf-8") -> None:
    """A temporary file in the same folder, flushed to disk, then renamed: a reader or a crash sees the old
    file or the new one, never half of it; the mode a plain open() gives (lab.core.files)."""
    write_text_atomic(path, text, encoding)


def _csv(header: list[str], rows: Iterable[list[str]]) -> str:
    out = io.StringIO()
    sheet = csv.writer(out)
    sheet.writerow(header)
    sheet.writerows([safe_cell(c) for c in row] for row in rows)
    return out.getvalue()


def _read(path: Path, width: int) -> list[list[str]]:
    """The rows of a sheet this module wrote, each cell as it was before :func:`safe_cell`, ``width`` wide (a
    sheet from before a column was added gets it empty)."""
    with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: also reads back an --excel sheet
        return [[read_cell(c) for c in row] + [""] * (width - len(row)) for row in list(csv.reader(f))[1:]]


class Sheet:
    """The three outputs of one batch, brought up to date as each student finishes (so a crash loses only
    the students being graded), and picked up again by a later run on the same submissions folder.

    ``batch`` identifies the run (the submissions folder, ...); it is kept in OUTPUT_batch.json. Outputs
    that exist without it, or with another batch's, are refused unless ``regrade``: they may be an
    instructor's grades. ``excel``: the CSVs start with a UTF-8 BOM, which Excel needs to read UTF-8.
    """

    def __init__(self, output: Path, totals: Path, feedback: Path, batch: dict, *, regrade: bool = False,
                 excel: bool = False) -> None:
        self.output, self.totals, self.feedback = Path(output), Path(totals), Path(feedback)
        self.marker = self.output.with_name(f"{self.output.stem}_batch.json")
        self.encoding = "utf-8-sig" if excel else "utf-8"
        self.rows: dict[str, tuple[list[list[str]], list[str]]] = {}  # student -> (test rows, totals row)
        old = json.loads(self.marker.read_text()) if self.marker.is_file() else None
        if regrade or not (self.output.exists() or self.totals.exists()):
            return
        if old != batch:
            made = f"by another batch ({old.get('submissions')})" if old else "not by this batch"
            raise ValueError(f"{self.output} or {self.totals} already exists, made {made}: pass --regrade to "
                             "overwrite it, or another --output")
        status = TOTAL_COLUMNS.index("status")  # "not graded": the grader's own trouble, worth another try
        totals = _read(self.totals, len(TOTAL_COLUMNS)) if self.totals.exists() else []
        done = {row[0]: row for row in totals if row[status] != "not graded"}
        tests = _read(self.output, len(TEST_COLUMNS)) if self.output.exists() else []
        self.rows = {s: ([r for r in tests if r[0] == s], row) for s, row in done.items()}

    @property
    def graded(self) -> set[str]:
        """Students whose results are already written (a resumed batch skips them; not those "not graded")."""
        return set(self.rows)

    def start(self, batch: dict) -> None:
        for path in (self.output.parent, self.totals.parent, self.feedback):
            path.mkdir(parents=True, exist_ok=True)
        write_atomic(self.marker, json.dumps(batch, indent=1) + "\n")
        self._flush()

    def add(self, r: StudentResult) -> None:
        """Write one student's feedback file and rows; the totals row goes last, as the sign it is done."""
        path = self.feedback / f"{file_stem(r.student)}.txt"  # never the raw name: it may be 240 characters long
        write_atomic(path, feedback_text(r))
        tests = [[t.student, t.assignment, t.test, t.function, _number(t.points), _number(t.max_points), t.status,
                  f"{t.seconds:.2f}", first_paragraph(t.message), str(path), printable(t.lab_code, CELL_CHARS)]
                 for t in r.tests]
        percent = f"{100 * r.points / r.max_points:.1f}" if r.max_points else ""
        total = [r.student, r.assignment, _number(r.points), _number(r.max_points), percent, f"{r.seconds:.1f}",
                 r.status, printable("; ".join(r.notes), CELL_CHARS), str(path)]
        self.rows[r.student] = (tests, total)
        self._flush()

    def _flush(self) -> None:
        order = sorted(self.rows, key=natural_key)
        write_atomic(self.output, _csv(TEST_COLUMNS, (t for s in order for t in self.rows[s][0])), self.encoding)
        write_atomic(self.totals, _csv(TOTAL_COLUMNS, (self.rows[s][1] for s in order)), self.encoding)


def write(results: Iterable[StudentResult], output: Path, totals: Path, feedback: Path, excel: bool = False) -> None:
    """The three outputs of ``results`` at once; folders are created, files overwritten."""
    sheet = Sheet(output, totals, feedback, {}, regrade=True, excel=excel)
    sheet.start({})
    for r in results:
        sheet.add(r)
