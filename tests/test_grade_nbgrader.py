"""nbgrader end to end from the notebooks students actually get: release -> fetch -> submit -> collect ->
``python -m lab.grading.autograde`` -> export with nbgrader's own CLI in a temporary course. alice types the
solution into the handed-out files (full marks), bob a partly wrong module (one check of two), cell by cell as
the weight table says; nbgrader's gradebook and grade-all agree.

Issue 42, row 8: one hostile notebook (mallory: a cell after the imports) gave itself 16/16 under plain
``nbgrader autograde`` (it patched the checks, wrote its hand-graded points into gradebook.db, rewrote its own
submitted module, overwrote two honest students' modules with the stub, read the hidden tests) and the
cross-check flagged neither it nor its victims. Now each student runs alone in a sandbox holding their own
hand-in only, the scores come from the trusted side: mallory scores what its code earns, nobody else's files
or grades change, and the cross-check flags it.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lab.grading import autograde as autograde_module
from lab.grading import crosscheck
from lab.grading.assignments import ASSIGNMENTS
from lab.grading.autograde import check_submissions
from lab.grading.crosscheck import nbgrader_scores
from lab.grading.generate import generate
from lab.grading.handin import fingerprint

from .test_grade import EXPECTED, PARTLY_WRONG_LINE

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments"
NAME = "03_histogram_losses_and_bin_width"  # the quickest notebook to execute
A = ASSIGNMENTS[NAME]
COURSE_ID = "ranklab"

nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e '.[dev]')")


def _env() -> dict:
    """The host's environment, with nbgrader's alembic on PATH and this very lab importable."""
    return {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


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
    monkeypatch.setattr(autograde_module, "grade_one", lambda *a, **k: ran.append(a))
    with pytest.raises(SystemExit) as info:
        autograde_module.main([NAME, "--course", str(course)])
    err = capsys.readouterr().err
    assert info.value.code == 1 and err.count("\n") == 1 and "nothing autograded" in err and "bob" in err
    assert ran == []  # nobody was graded


def test_autograde_without_the_assignment_in_the_gradebook_is_one_line(built, tmp_path, capsys):
    course = tmp_path / "course"
    shutil.copytree(built / "nbgrader", course)
    (course / "submitted" / "alice" / NAME).mkdir(parents=True)
    shutil.copy(built / "student" / NAME / A.notebook, course / "submitted" / "alice" / NAME / A.notebook)
    with pytest.raises(SystemExit) as info:
        autograde_module.main([NAME, "--course", str(course), "--no-sandbox"])
    err = capsys.readouterr().err.splitlines()
    assert info.value.code == 1 and "generate_assignment" in err[-1] and len(err) == 2  # the --no-sandbox line too
    assert not (course / "autograded").exists()


def test_crosscheck_flags_every_score_that_differs_and_every_integrity_reason(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(crosscheck, "nbgrader_scores", lambda course, a: {"s10": 7, "s9": 3, "s2": 0, "ghost": 2,
                                                                          "s3": 1})
    monkeypatch.setattr(crosscheck, "grade_all_scores", lambda *args: {"s10": 7, "s9": 0, "s2": 0, "s3": 4})
    monkeypatch.setattr(crosscheck, "integrity", lambda course, a: {"s10": ["its notebook's own run passes ..."]})
    with pytest.raises(SystemExit) as info:
        crosscheck.main([NAME, "--course", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert info.value.code == 1 and "4 of 5 students flagged" in lines[-1]
    flagged = [line.split()[0] for line in lines[1:-1] if "check it" in line]
    assert flagged == ["ghost", "s3", "s9", "s10"]  # natural order; ghost: nbgrader graded what grade-all could not
    assert "LOWER in nbgrader" in next(line for line in lines if line.startswith("s3"))


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


# A cell mallory adds after the imports: what it did under plain nbgrader autograde (issue 42, row 8).
HOSTILE_CELL = '''
import glob, os, sqlite3
import lab.grading.check_runner as _runner, lab.grading.topic_checks as _checks
_runner.run_check = _checks.run_check = lambda *a, **k: None  # the checks pass whatever they are given
check_soft_histogram = check_fast_ap = lambda *a, **k: None
COURSE = {course!r}
def _try(f):
    try:
        f()
    except Exception:
        pass
def _hand_graded():  # the 9 points of the written answers, in the gradebook
    db = sqlite3.connect(os.path.join(COURSE, "gradebook.db"))
    db.execute("UPDATE grade SET manual_score = 9")
    db.commit()
_try(_hand_graded)
for _p in glob.glob(os.path.join(COURSE, "submitted", "*", {name!r}, {module!r})):
    _text = "from lab.losses.functional import fast_ap\\n" if "mallory" in _p else {stub!r}
    _try(lambda p=_p, t=_text: open(p, "w").write(t))  # its own into lab's reference, the others into the stub
_try(lambda: open(os.path.join(COURSE, "json.py"), "w").write("raise SystemExit('the student json.py ran')\\n"))
_PWN = "\\nopen('/tmp/ranklab_attack_pwned', 'w')\\n"
_try(lambda: open(os.path.join(COURSE, "nbgrader_config.py"), "a").write(_PWN))
_SEEN = [p for p in glob.glob(os.path.join(COURSE, "*", "*", "*"))]  # other students' modules, the hidden tests
'''


@pytest.fixture(scope="module")
def course(built, tmp_path_factory):
    """A course where alice (the solution in the module), bob (partly wrong) and mallory (untouched, plus the hostile
    cell) went through release -> fetch -> submit -> collect -> python -m lab.grading.autograde -> export."""
    tmp_path = tmp_path_factory.mktemp("nbgrader")
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    shutil.copytree(built / "nbgrader", course)
    exchange.mkdir()
    exchange_args = [f"--Exchange.root={exchange}", f"--course={COURSE_ID}", f"--Exchange.cache={tmp_path / 'cache'}"]
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n"
                "c.CollectApp.check_owner = False  # the students submit as this one OS user\n")

    def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
        assert done.returncode == 0, (done.args, done.stderr[-3000:])
        return done

    ok(_run(course, "generate_assignment", NAME, "--force"))
    handed_out = nbformat.read(built / "student" / NAME / A.notebook, as_version=4)
    assert nbformat.read(course / "release" / NAME / A.notebook, as_version=4) == handed_out  # the same notebook
    ok(_run(course, "release_assignment", NAME, "--force"))
    stub = (built / "student" / NAME / A.modules[0]).read_text()
    for student in ("alice", "bob", "mallory"):
        home = tmp_path / student
        home.mkdir()
        ok(_run(home, "fetch_assignment", NAME, *exchange_args))
        if student == "alice":  # types the solution into the module (the notebook's code cells only call it)
            shutil.copy(SOURCE / NAME / A.modules[0], home / NAME / A.modules[0])
        if student == "bob":  # FastAP with num_bins centres: one check of two
            (home / NAME / A.modules[0]).write_text((SOURCE / NAME / A.modules[0]).read_text()
                                                    .replace(*PARTLY_WRONG_LINE))
        if student == "mallory":
            nb = nbformat.read(home / NAME / A.notebook, as_version=4)
            cell = nbformat.v4.new_code_cell(HOSTILE_CELL.format(course=str(course), name=NAME, module=A.modules[0],
                                                                 stub=stub))
            nb.cells.insert(next(i for i, c in enumerate(nb.cells) if c.get("id") == "setup") + 1, cell)
            nbformat.write(nb, home / NAME / A.notebook)
        ok(_run(home, "submit", NAME, f"--student={student}", *exchange_args))
    ok(_run(course, "collect", NAME))
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["alice", "bob", "mallory"]
    before = {"submitted": fingerprint(course / "submitted"), "config": (course / "nbgrader_config.py").read_bytes(),
              "source": fingerprint(course / "source")}
    done = ok(_run(course, NAME, "--course", str(course), module="lab.grading.autograde"))
    ok(_run(course, "export"))
    return dict(course=course, before=before, autograde=done, ok=ok)


@pytest.mark.slow
def test_nbgrader_end_to_end_from_the_handed_out_notebooks_agrees_with_grade_all(course):
    where = course["course"]
    nbgrader_points = _scores(where / "grades.csv", "raw_score")  # written answers not graded yet: autograded only
    cells = {"alice": EXPECTED["correct"], "bob": EXPECTED["partly_wrong"], "mallory": EXPECTED["blank"]}
    assert nbgrader_points == {s: sum(c.values()) for s, c in cells.items()}
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{where / 'gradebook.db'}") as gb:  # cell by cell, with the weight table's maxima
        for student, expected in cells.items():
            grades = {g.name: g for nb in gb.find_submission(NAME, student).notebooks for g in nb.grades}
            assert {c: grades[f"cell-{c}"].auto_score for c in expected} == expected, student
            assert {c: grades[f"cell-{c}"].max_score for c in A.points} == A.points
    done = _run(where, NAME, "--course", str(where), "--timeout", "60", module="lab.grading.crosscheck")
    grade_all = _scores(where / "crosscheck" / NAME / "grades_totals.csv", "points")
    assert grade_all == nbgrader_points
    flagged = [line.split()[0] for line in done.stdout.splitlines() if "check it" in line]
    assert done.returncode == 1 and flagged == ["mallory"], done.stdout  # its notebook claims what its code fails
    assert "its notebook's own run passes" in done.stdout
    autograded = nbformat.read(where / "autograded" / "alice" / NAME / A.notebook, as_version=4)
    from nbgrader.utils import determine_grade, is_grade

    assert sum(determine_grade(c)[0] or 0 for c in autograded.cells if is_grade(c) and c.cell_type == "code") == \
        A.autograded_points  # nbgrader's own rule on the autograded notebook reads the trusted score
    graded = where / "autograded" / "alice" / NAME / A.modules[0]  # the student's module, not source/'s stub
    assert graded.read_text() == (SOURCE / NAME / A.modules[0]).read_text()

    # A score changed in nbgrader (here by hand: bob's failed check given full marks) is what the cross-check
    # reads. grade-all's scores are the ones above (the hand-ins did not change): compared in this process, not
    # graded again.
    cell = f"cell-{A.tests[-1].cell}"
    with Gradebook(f"sqlite:///{where / 'gradebook.db'}") as gb:
        gb.find_grade(cell, A.notebook.removesuffix(".ipynb"), NAME, "bob").manual_score = A.tests[-1].points
        gb.db.commit()
    assert nbgrader_scores(where, A) == {**nbgrader_points, "bob": A.autograded_points}
    rows = crosscheck.compare(nbgrader_scores(where, A), grade_all, crosscheck.integrity(where, A))
    assert [student for student, *_, why in rows if why] == ["bob", "mallory"]
    assert next(why for student, *_, why in rows if student == "bob")[0] == "HIGHER in nbgrader"
    with Gradebook(f"sqlite:///{where / 'gradebook.db'}") as gb:  # put it back for the other tests
        gb.find_grade(cell, A.notebook.removesuffix(".ipynb"), NAME, "bob").manual_score = None
        gb.db.commit()


@pytest.mark.slow
def test_a_hostile_notebook_changes_no_file_and_no_grade_but_its_own_autograded_run(course):
    where = course["course"]
    assert fingerprint(where / "submitted") == course["before"]["submitted"]  # every hand-in as collected
    assert (where / "nbgrader_config.py").read_bytes() == course["before"]["config"]
    assert fingerprint(where / "source") == course["before"]["source"]
    assert not (where / "json.py").exists() and not Path("/tmp/ranklab_attack_pwned").exists()
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{where / 'gradebook.db'}") as gb:  # no manual score was written by anyone
        scores = {(s.student.id, g.name): (g.manual_score, g.auto_score)
                  for s in gb.assignment_submissions(NAME) for nb in s.notebooks for g in nb.grades}
    assert all(manual is None for manual, _ in scores.values())
    tests = {f"cell-{t.cell}": t.points for t in A.tests}
    assert {g: auto for (who, g), (_, auto) in scores.items() if who == "mallory" and g in tests} == \
        {g: 0 for g in tests}
    assert {g: auto for (who, g), (_, auto) in scores.items() if who == "alice" and g in tests} == tests
    assert "mallory" in course["autograde"].stdout and "bob" in course["autograde"].stdout


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
def test_autograde_runs_each_notebook_in_a_sandbox_a_hostile_module_reaches_nothing(built, tmp_path):
    """The solution with hostile lines at import (run by the notebook's kernel and by the trusted grading's student
    process, both sandboxed): it still scores full marks, and nothing leaves its sandbox: no file outside it, no
    connection to the host, no process left behind."""
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
