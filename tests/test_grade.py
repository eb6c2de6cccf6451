"""python -m lab.grading.grade scores a correct, a blank and a partly wrong submission as the weight table says
(nbgrader's gradebook, cell by cell: tests/test_grade_nbgrader.py); a hanging, exiting or crashing submission
costs only itself; bad input is one line.

The expected points come from the weight table (lab/grading/assignments.py), not from a run.
"""
from __future__ import annotations

import csv
import shutil
import zipfile
from pathlib import Path

import pytest

from lab.grading.assignments import ASSIGNMENTS
from lab.grading.collect import collect
from lab.grading.generate import generate
from lab.grading.grade import find_submissions, grade, load_tests, main
from lab.grading.grade_sheet import first_paragraph

from ._sandbox import require_sandbox

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments"
NAME = "03_histogram_losses_and_bin_width"  # the quickest notebook to execute
A = ASSIGNMENTS[NAME]
POINTS = {t.cell: t.points for t in A.tests}
# What each submission must score, test cell by test cell.
EXPECTED = {"correct": POINTS, "blank": {c: 0 for c in POINTS},
            "partly_wrong": {"hist-check": POINTS["hist-check"], "fast-check": 0}}
PARTLY_WRONG_LINE = ("torch.linspace(0, 4, num_bins + 1,", "torch.linspace(0, 4, num_bins,")  # num_bins centres


def _student_folder(folder: Path, module_text: str, notebook: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / A.modules[0]).write_text(module_text)
    shutil.copy(notebook, folder / A.notebook)
    return folder


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """correct/ (the solution module), blank/ (the student version), partly_wrong/ (FastAP with num_bins
    centres), each with the student notebook; in a folder of their own."""
    out = tmp_path_factory.mktemp("three")
    g = {x.name: x for x in generate(SOURCE, out / "build", only=NAME)}[NAME]
    solution = (SOURCE / NAME / A.modules[0]).read_text()
    assert PARTLY_WRONG_LINE[0] in solution
    texts = {"correct": solution, "blank": (g.student_dir / A.modules[0]).read_text(),
             "partly_wrong": solution.replace(*PARTLY_WRONG_LINE)}
    for student, text in texts.items():
        _student_folder(out / "submissions" / student, text, g.student_dir / A.notebook)
    return out


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_grader_scores_correct_blank_and_partly_wrong(three, tmp_path):
    require_sandbox()
    grade(three / "submissions", tmp_path / "grades.csv", jobs=2)
    rows = _rows(tmp_path / "grades.csv")
    got = {(r["student"], r["test"]): float(r["points"]) for r in rows}
    assert got == {(s, c): p for s, cells in EXPECTED.items() for c, p in cells.items()}
    assert all(r["max_points"] == f"{POINTS[r['test']]:g}" and float(r["seconds"]) >= 0 for r in rows)
    status = {(r["student"], r["test"]): r["status"] for r in rows}
    assert status[("partly_wrong", "fast-check")] == "failed" and status[("correct", "fast-check")] == "passed"
    wrong = next(r for r in rows if r["student"] == "partly_wrong" and r["test"] == "fast-check")
    assert "num_bins + 1 centres" in wrong["feedback"] and "\n" not in wrong["feedback"]
    blank = next(r for r in rows if r["student"] == "blank" and r["test"] == "hist-check")
    assert "not implemented yet" in blank["feedback"]
    totals = {r["student"]: r for r in _rows(tmp_path / "grades_totals.csv")}
    for student, cells in EXPECTED.items():
        assert float(totals[student]["points"]) == sum(cells.values())
        assert float(totals[student]["max_points"]) == A.autograded_points and totals[student]["status"] == "complete"
    feedback = (tmp_path / "grades_feedback" / "partly_wrong.txt").read_text()
    assert "[failed] fast-check (fast_ap): 0 / 4 points" in feedback and "Reproduce it:" in feedback  # full message


def _zip_folder(folder: Path, path: Path, tamper: bool = False) -> Path:
    collect(folder, path, assignment=NAME, self_checks=False)
    if tamper:  # edit the module after collection: the manifest no longer matches
        with zipfile.ZipFile(path) as zf:
            files = {n: zf.read(n) for n in zf.namelist()}
        files[A.modules[0]] += b"\n# edited after collection\n"
        with zipfile.ZipFile(path, "w") as zf:
            for n, data in files.items():
                zf.writestr(n, data)
    return path


def _with(solution: str, function: str, first_line: str) -> str:
    """The solution with ``first_line`` run first in ``function`` (right after its docstring)."""
    head, rest = solution.split(f"def {function}(", 1)
    doc_end = rest.index('"""', rest.index('"""') + 3) + 3
    return f"{head}def {function}({rest[:doc_end]}\n    {first_line}{rest[doc_end:]}"


@pytest.mark.slow
def test_a_bad_submission_costs_only_itself(three, tmp_path):
    require_sandbox()
    solution = (SOURCE / NAME / A.modules[0]).read_text()
    notebook = three / "submissions" / "correct" / A.notebook
    subs = tmp_path / "subs"
    make = lambda student, text: _student_folder(subs / student, text, notebook)  # noqa: E731
    make("exit_then_hang", _with(_with(solution, "soft_histogram", "import sys; sys.exit(3)"), "fast_ap",
                                 "while True: pass"))
    make("segfault", _with(solution, "soft_histogram", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"))
    make("exit_at_import", solution + "\nimport sys\nsys.exit('bye')\n")
    _zip_folder(make("deleter", _with(solution, "fast_ap", "import glob, os; [os.remove(p) for p in glob.glob('*')]")),
                subs / "zipped.zip")
    shutil.rmtree(subs / "deleter")
    _zip_folder(three / "submissions" / "correct", subs / "tampered.zip", tamper=True)
    (subs / "no_module").mkdir()
    shutil.copy(notebook, subs / "no_module" / A.notebook)
    (subs / "empty").mkdir()
    (subs / "broken.zip").write_bytes(b"not a zip at all")
    (subs / "grades_from_last_year.txt").write_text("not a submission")  # stray files are skipped

    # 15 s a test: the correct ones finish beside two processes spinning to their own time-out, on 2 loaded cores
    grade(subs, tmp_path / "grades.csv", timeout=15, jobs=2)
    rows = {(r["student"], r["test"]): r for r in _rows(tmp_path / "grades.csv")}
    status = {k: r["status"] for k, r in rows.items()}
    assert status == {
        ("exit_then_hang", "hist-check"): "error", ("exit_then_hang", "fast-check"): "timeout",
        ("segfault", "hist-check"): "crashed", ("segfault", "fast-check"): "not run",
        ("exit_at_import", "hist-check"): "error", ("exit_at_import", "fast-check"): "error",
        ("zipped", "hist-check"): "passed", ("zipped", "fast-check"): "passed",
        ("tampered", "hist-check"): "passed", ("tampered", "fast-check"): "passed",
        ("no_module", "hist-check"): "missing", ("no_module", "fast-check"): "missing",
        ("empty", "hist-check"): "missing", ("empty", "fast-check"): "missing",
        ("broken", "hist-check"): "missing", ("broken", "fast-check"): "missing"}
    assert "sys.exit(3)" in rows[("exit_then_hang", "hist-check")]["feedback"]
    assert "did not finish within 15 s" in rows[("exit_then_hang", "fast-check")]["feedback"]
    assert "killed by SIGSEGV" in rows[("segfault", "hist-check")]["feedback"]
    assert "importing your module failed" in rows[("exit_at_import", "fast-check")]["feedback"]
    assert f"{A.modules[0]} is missing" in rows[("no_module", "fast-check")]["feedback"]
    totals = {r["student"]: r for r in _rows(tmp_path / "grades_totals.csv")}
    assert float(totals["zipped"]["points"]) == A.autograded_points
    assert "does not match its manifest" in totals["tampered"]["notes"]
    assert totals["exit_then_hang"]["status"] == "timeout" and totals["segfault"]["status"] == "crashed"
    assert totals["exit_at_import"]["status"] == "error"  # nothing was graded: not "complete"
    assert float(totals["exit_then_hang"]["points"]) == 0 and totals["empty"]["status"] == "missing"
    assert totals["exit_at_import"]["status"] == "error"  # not "complete" with 0 points (issue 32)
    assert "broken.zip is not a readable zip" in totals["broken"]["notes"]


# ----------------------------------------------------------------------------- without processes
def test_submissions_are_found_in_every_layout(three, tmp_path):
    correct = three / "submissions" / "correct"
    shutil.copytree(correct, tmp_path / "folder")
    (tmp_path / "in_a_folder").mkdir()
    _zip_folder(correct, tmp_path / "in_a_folder" / "submission.zip")
    _zip_folder(correct, tmp_path / "zipped.zip")
    shutil.copytree(correct, tmp_path / "nbgrader_layout" / NAME)  # nbgrader's submitted/STUDENT/ASSIGNMENT/
    shutil.copytree(correct, tmp_path / ".hidden")
    (tmp_path / "notes.txt").write_text("")
    found = {s.student: s for s in find_submissions(tmp_path)}
    assert sorted(found) == [".hidden", "folder", "in_a_folder", "nbgrader_layout", "zipped"]
    assert found[".hidden"].path is None and "hidden entry" in found[".hidden"].refused  # a row, never skipped
    assert found["in_a_folder"].path.name == "submission.zip" and found["zipped"].path.suffix == ".zip"
    assert found["nbgrader_layout"].path.name == NAME
    assert all(s.assignment is A for s in found.values())


def test_a_submission_without_a_recognisable_assignment_takes_the_batchs(three, tmp_path):
    shutil.copytree(three / "submissions" / "correct", tmp_path / "alice")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "my_answers.py").write_text("x = 1\n")
    found = {s.student: s for s in find_submissions(tmp_path)}
    assert found["bob"].assignment is A and found["alice"].assignment is A


def test_the_tests_are_the_notebooks_test_cells_with_the_weight_table(tmp_path):
    tests = load_tests(SOURCE, A)
    assert [(t["cell"], t["points"]) for t in tests] == [(t.cell, t.points) for t in A.tests]
    assert all("### BEGIN HIDDEN TESTS" not in t["code"] and f"check_{t['function']}(" in t["code"] for t in tests)
    assert "seed=" in tests[1]["code"]  # the hidden seeds are run too
    bad = tmp_path / NAME
    shutil.copytree(SOURCE / NAME, bad)
    text = (bad / A.notebook).read_text().replace('"id": "fast-check"', '"id": "fast-check-renamed"')
    (bad / A.notebook).write_text(text)
    with pytest.raises(ValueError, match="differ from the weight table"):
        load_tests(tmp_path, A)


def test_first_paragraph_is_one_line():
    assert first_paragraph("fast_ap is wrong: it\nsplits.\n\nCase 'x': details") == "fast_ap is wrong: it splits."


@pytest.mark.parametrize("make, extra, phrase", [
    (lambda p: p / "nowhere", [], "is not a folder"),
    (lambda p: p, [], "holds no submission"),
    (lambda p: p, ["--timeout", "0"], "timeout must be > 0 seconds"),
    (lambda p: p, ["--memory", "0.1"], "memory must be >= 0.25 GB"),
], ids=["missing", "empty", "timeout", "memory"])
def test_cli_errors_are_one_line_with_status_2(tmp_path, capsys, make, extra, phrase):
    with pytest.raises(SystemExit) as info:
        main([str(make(tmp_path)), "-o", str(tmp_path / "g.csv"), *extra])
    err = capsys.readouterr().err
    assert info.value.code == 2 and phrase in err and err.count("\n") == 1 and err.startswith("grade: ")

