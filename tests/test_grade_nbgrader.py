"""nbgrader end to end from the notebooks students actually get (issue 32, item 4): release -> fetch ->
submit -> collect -> autograde -> export with nbgrader's own CLI in a temporary course, two students:
alice types the solution into the handed-out files (full marks), bob hands them in untouched (0). Both
agree with grade-all, and the cross-check flags a student whose nbgrader score is higher.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from lab.grading import autograde as autograde_module
from lab.grading.assignments import ASSIGNMENTS
from lab.grading.autograde import autograde_command, check_submissions
from lab.grading import crosscheck
from lab.grading.crosscheck import nbgrader_scores
from lab.grading.generate import generate

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments"
NAME = "03_histogram_losses_and_bin_width"  # the quickest notebook to execute
A = ASSIGNMENTS[NAME]
COURSE_ID = "ranklab"

nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e '.[dev]')")


def _env() -> dict:
    return autograde_command(Path("."), NAME, sandbox=False)[1]  # PATH with nbgrader's alembic, this lab importable


def _run(cwd: Path, *args: str, module: str = "nbgrader") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=_env(), capture_output=True, text=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build")
    generate(SOURCE, out, only=NAME)
    return out


def test_autograde_refuses_notebooks_without_nbgraders_metadata(built, tmp_path, capsys, monkeypatch):
    """What issue 32 found: the old student notebooks had none, and nbgrader scored everyone 0, exit 0."""
    course = tmp_path / "course"
    shutil.copytree(built / "nbgrader", course)
    for student, strip in (("alice", False), ("bob", True)):
        nb = nbformat.read(built / "student" / NAME / A.notebook, as_version=4)
        for cell in nb.cells:
            if strip:
                cell.metadata.pop("nbgrader", None)
        (course / "submitted" / student / NAME).mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / NAME / A.notebook)
    assert check_submissions(course, NAME, "alice") == []
    assert check_submissions(course, NAME) == [f"submitted/bob/{NAME}/{A.notebook} lacks {len(A.points)} of its "
                                               f"{len(A.points)} graded cells' nbgrader metadata"]
    ran = []
    monkeypatch.setattr(autograde_module, "subprocess", SimpleNamespace(run=lambda *a, **k: ran.append(a)))
    with pytest.raises(SystemExit) as info:
        autograde_module.main([NAME, "--course", str(course)])
    err = capsys.readouterr().err
    assert info.value.code == 1 and err.count("\n") == 1 and "nothing autograded" in err and "bob" in err
    assert ran == []  # nbgrader never ran


def test_crosscheck_flags_every_higher_nbgrader_score_and_exits_1(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(crosscheck, "nbgrader_scores", lambda course, a: {"s10": 7, "s9": 3, "s2": 0, "ghost": 2})
    monkeypatch.setattr(crosscheck, "grade_all_scores", lambda *args: {"s10": 7, "s9": 0, "s2": 0})
    with pytest.raises(SystemExit) as info:
        crosscheck.main([NAME, "--course", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert info.value.code == 1 and "2 of 4 students flagged" in lines[-1]
    flagged = [line.split()[0] for line in lines[1:-1] if "HIGHER in nbgrader" in line]
    assert flagged == ["ghost", "s9"]  # natural order; ghost: nbgrader graded what grade-all could not


def test_crosscheck_never_overwrites_the_instructors_grades(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(crosscheck, "nbgrader_scores", lambda course, a: {"alice": 7})
    (tmp_path / "submitted" / "alice" / NAME).mkdir(parents=True)
    mine = tmp_path / "grades.csv"
    mine.write_text("student,points\nalice,9\n")
    with pytest.raises(SystemExit) as info:
        crosscheck.main([NAME, "--course", str(tmp_path), "-o", str(mine)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "not by this batch" in err
    assert mine.read_text() == "student,points\nalice,9\n"


def _scores(path: Path, column: str) -> dict[str, float]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return {r.get("student_id") or r["student"]: float(r[column]) for r in csv.DictReader(f)}


@pytest.mark.slow
def test_nbgrader_end_to_end_from_the_handed_out_notebooks_agrees_with_grade_all(built, tmp_path):
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    shutil.copytree(built / "nbgrader", course)
    exchange.mkdir()
    exchange_args = [f"--Exchange.root={exchange}", f"--course={COURSE_ID}", f"--Exchange.cache={tmp_path / 'cache'}"]
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n"
                "c.CollectApp.check_owner = False  # both students submit as this one OS user\n")

    def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
        assert done.returncode == 0, (done.args, done.stderr[-3000:])
        return done

    ok(_run(course, "generate_assignment", NAME, "--force"))
    handed_out = nbformat.read(built / "student" / NAME / A.notebook, as_version=4)
    assert nbformat.read(course / "release" / NAME / A.notebook, as_version=4) == handed_out  # the same notebook
    ok(_run(course, "release_assignment", NAME, "--force"))
    for student in ("alice", "bob"):
        home = tmp_path / student
        home.mkdir()
        ok(_run(home, "fetch_assignment", NAME, *exchange_args))
        if student == "alice":  # types the solution into the module (the notebook's code cells only call it)
            shutil.copy(SOURCE / NAME / A.modules[0], home / NAME / A.modules[0])
        ok(_run(home, "submit", NAME, f"--student={student}", *exchange_args))
    ok(_run(course, "collect", NAME))
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["alice", "bob"]
    ok(_run(course, NAME, "--course", str(course), module="lab.grading.autograde"))
    ok(_run(course, "export"))
    nbgrader_points = _scores(course / "grades.csv", "raw_score")  # written answers not graded yet: autograded only
    assert nbgrader_points == {"alice": A.autograded_points, "bob": 0.0}

    done = ok(_run(course, NAME, "--course", str(course), "--timeout", "60", module="lab.grading.crosscheck"))
    assert "0 of 2 students flagged" in done.stdout
    grade_all = _scores(course / "crosscheck" / NAME / "grades_totals.csv", "points")
    assert grade_all == nbgrader_points

    from nbgrader.api import Gradebook  # a score changed in nbgrader (here by hand) is what the cross-check reads

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.find_grade(f"cell-{A.tests[0].cell}", A.notebook.removesuffix(".ipynb"), NAME, "bob").manual_score = 3
        gb.db.commit()
    assert nbgrader_scores(course, A) == {"alice": A.autograded_points, "bob": 3.0}


HOSTILE = '''
import os, socket, subprocess
try:  # outside the course folder: in the sandbox it lands in a tmpfs that vanishes
    with open({outside!r}, "w") as f:
        f.write("written by the student's code")
except OSError:
    pass
try:  # the host's loopback: the sandbox has a network of its own
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"hello")
except OSError:
    pass
subprocess.Popen(["sleep", "{token}"], start_new_session=True)  # a process meant to outlive the grading
'''


@pytest.mark.slow
def test_autograde_runs_nbgrader_in_the_sandbox_a_hostile_notebook_reaches_only_the_course(built, tmp_path):
    """The solution with hostile lines at import: nbgrader still scores it full marks (in one kernel student
    code could change its own grade; the cross-check is for that), and nothing leaves the course folder: no
    file outside it, no connection to the host, no process left behind."""
    import socket
    import threading

    from ._sandbox import require_sandbox

    require_sandbox()
    course = tmp_path / "course"
    shutil.copytree(built / "nbgrader", course)
    assert _run(course, "generate_assignment", NAME, "--force").returncode == 0
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    accepted, stop = [], threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    outside, token = tmp_path / "outside.txt", f"{os.getpid() % 1000 + 9000}.5"
    submission = course / "submitted" / "mallory" / NAME
    submission.mkdir(parents=True)
    shutil.copy(course / "release" / NAME / A.notebook, submission / A.notebook)
    (submission / A.modules[0]).write_text((SOURCE / NAME / A.modules[0]).read_text() + HOSTILE.format(
        outside=str(outside), port=listener.getsockname()[1], token=token))
    try:
        done = _run(course, NAME, "--course", str(course), "--timeout", "900", module="lab.grading.autograde")
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert nbgrader_scores(course, A)["mallory"] == A.autograded_points  # it did run, and was graded
    assert not outside.exists() and not accepted
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and token in _cmdline(p)]
    assert not left, [_cmdline(p) for p in left]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
