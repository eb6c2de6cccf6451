"""Grading with no way out (issue 42): the ways around the sandbox that the audit found on afb24c8, each a
test. Rows 1, 2, 3, 5, 6, 7 and 9 of its table here; row 4 (memory) in test_grading_memory.py, row 8
(nbgrader) in test_grade_nbgrader.py.

- row 1: a submission's own ``json.py`` (``numpy.py``, ``sitecustomize.py``, a ``.pth``, a ``torch/`` or ``lab/``
  package) ran in the trusted grade_worker, outside the sandbox, and scored 7/7 from the stub;
- rows 2-3: a symlink in a folder submission, or a linked student entry, was followed (the solution, or
  /etc/passwd, copied into the sandbox and its feedback);
- row 5: one forged answer whose leaves all name one 8 MB array grew the grader by GBs, after its deadline;
- row 6: a 30 MB ``__name__`` became a 31 MB feedback file and grade sheet;
- row 7: hidden entries skipped silently, a long name stopped the batch, a re-run duplicated escaped names,
  ``alice``/``Alice`` stopped the batch;
- row 9: /proc/1 inside the sandbox showed the instructor's PATH and the grader's paths.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
import unicodedata
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from lab.grading import grade as grade_module
from lab.grading.assignments import ASSIGNMENTS
from lab.grading.collect import collect
from lab.grading.generate import generate
from lab.grading.grade import grade
from lab.grading.grade_sheet import read_cell
from lab.grading.names import file_stem
from lab.grading.remote import StudentProcess, StudentProcessEnded
from lab.grading.sandbox import Limits

from ._sandbox import require_sandbox
from .test_grade_inputs import _column, _students, _Stub

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments"
NAME = "03_histogram_losses_and_bin_width"
A = ASSIGNMENTS[NAME]
MODULE = A.modules[0]
FULL = {t.cell: t.points for t in A.tests}
ZERO = {t.cell: 0.0 for t in A.tests}


@pytest.fixture
def stub(monkeypatch):
    """run_submission replaced by test_grade_inputs' stub (no processes)."""
    def install(**kwargs) -> _Stub:
        fake = _Stub(**kwargs)
        monkeypatch.setattr(grade_module, "run_submission", fake)
        return fake
    return install


def _points(path: Path, student: str) -> dict[str, float]:
    with open(path, newline="", encoding="utf-8") as f:
        return {r["test"]: float(r["points"]) for r in csv.DictReader(f) if r["student"] == student}


def _totals(path: Path) -> dict[str, dict]:
    with open(path.with_name(path.stem + "_totals.csv"), newline="", encoding="utf-8") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


# ---------------------------------------------------------------- row 1: the student's files never run here
# Each writes a marker into a folder of the host when it runs; inside the sandbox that folder does not exist.
SHADOWS = ["json.py", "numpy.py", "sitecustomize.py", "usercustomize.py", "torch/__init__.py", "lab/__init__.py"]
PTH = "ranklab_attack.pth"


def _shadow(marker: Path, name: str) -> str:
    return (f"import os\ntry:\n    open(os.path.join({str(marker)!r}, {name.replace('/', '_')!r}), 'w').write('ran')\n"
            "except OSError:\n    pass\n")


@pytest.fixture(scope="module")
def shadow_course(tmp_path_factory):
    require_sandbox()
    root = tmp_path_factory.mktemp("shadows")
    g = {x.name: x for x in generate(SOURCE, root / "build", only=NAME)}[NAME]
    marker = root / "markers"
    marker.mkdir()
    subs = root / "subs"
    texts = {"untouched": (g.student_dir / MODULE).read_text(), "correct": (SOURCE / NAME / MODULE).read_text()}
    for who, text in texts.items():
        base = root / f"base_{who}"
        base.mkdir()
        (base / MODULE).write_text(text)
        shutil.copy(g.student_dir / A.notebook, base / A.notebook)
        (subs / who).mkdir(parents=True)
        shutil.copytree(base, subs / who, dirs_exist_ok=True)
        # folder form: every shadow, packages included, and a .pth
        folder = subs / f"folder_{who}"
        shutil.copytree(base, folder)
        for name in SHADOWS:
            (folder / name).parent.mkdir(exist_ok=True)
            (folder / name).write_text(_shadow(marker, name))
        (folder / PTH).write_text(f"import os; open(os.path.join({str(marker)!r}, 'pth'), 'w').write('ran')\n")
        # zip form: the same entries, by hand
        with zipfile.ZipFile(subs / f"zip_{who}.zip", "w") as zf:
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    zf.write(p, p.relative_to(folder).as_posix())
        # collect form: what the students' own command packs (every top-level .py)
        packed = root / f"collect_src_{who}"
        shutil.copytree(folder, packed)
        collect(packed, subs / f"collect_{who}.zip", assignment=NAME, self_checks=False)
    (subs / "wrapper").mkdir()  # hands its work to lab's references: full marks, and the lab_code column says so
    (subs / "wrapper" / MODULE).write_text(WRAPPER)
    out = root / "out" / "grades.csv"
    # The grader is started the way an instructor would, from the submissions folder itself (the worst cwd).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "lab.grading.grade", str(subs), "-o", str(out), "--assignment", NAME,
                           "--timeout", "30", "--jobs", "2"], cwd=subs, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(out=out, marker=marker)


WRAPPER = """import lab.losses.functional as LF
from lab.ranking import soft_histogram


def fast_ap(scores, targets, mask, num_bins):
    return LF.fast_ap(scores, targets, mask=mask, reduction="none", num_bins=num_bins)
"""


@pytest.mark.slow
def test_the_lab_code_column_names_a_submission_that_calls_lab_and_not_an_honest_one(shadow_course):
    out = shadow_course["out"]
    assert _points(out, "wrapper") == FULL
    with open(out, newline="", encoding="utf-8") as f:
        rows = {(r["student"], r["function"]): r["lab_code"] for r in csv.DictReader(f)}
    assert rows[("correct", "fast_ap")] == rows[("correct", "soft_histogram")] == ""
    assert rows[("wrapper", "fast_ap")].startswith("ran lab.losses.fast_ap.fast_ap")  # lab's own, first
    assert "uses lab's fast_ap (histograms.py:6)" in rows[("wrapper", "fast_ap")]
    assert "imports lab's soft_histogram" in rows[("wrapper", "soft_histogram")]
    assert "soft_histogram" in rows[("wrapper", "soft_histogram")].split(";")[0]  # the trace saw it run


@pytest.mark.slow
@pytest.mark.parametrize("form", ["folder", "zip", "collect"])
def test_a_submission_shipping_json_py_numpy_py_sitecustomize_or_a_pth_scores_as_without_them(shadow_course, form):
    out = shadow_course["out"]
    assert _points(out, f"{form}_untouched") == _points(out, "untouched") == ZERO
    assert _points(out, f"{form}_correct") == _points(out, "correct") == FULL  # the files break nothing honest
    assert sorted(p.name for p in shadow_course["marker"].iterdir()) == []  # none of them ran on the host


def test_the_worker_and_the_student_process_run_python_isolated(tmp_path, monkeypatch):
    """The commands themselves: ``python -I`` (no cwd, no PYTHONPATH, no user site on the path), a cwd without the
    student's files, their folder passed as an argument."""
    from lab.grading.launch import python_module

    argv = python_module("lab.grading.grade_worker", "--help")
    assert argv[1] == "-I"
    (tmp_path / "json.py").write_text("raise SystemExit('the student json.py ran')\n")
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr
    seen = {}

    class Popen:  # what run_submission starts, without starting it
        def __init__(self, cmd, cwd=None, **kwargs):
            seen.update(cmd=cmd, cwd=Path(cwd))
            self.returncode, self.pid = 0, 0

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(grade_module.subprocess, "Popen", Popen)
    sub = _students(tmp_path / "subs", "alice") / "alice"
    from lab.grading.find import Submission

    tests = [dict(cell=t.cell, function=t.function, points=t.points, code="", where="") for t in A.tests]
    grade_module.run_submission(Submission("alice", sub, A), tests, 10, sandbox=False)
    assert seen["cmd"][1] == "-I" and "--folder" in seen["cmd"]
    assert not (seen["cwd"] / MODULE).exists()  # the worker's folder holds none of the student's files


# --------------------------------------------------------------------- rows 2-3: no link is followed
@pytest.mark.parametrize("attack", ["module_is_a_link", "extra_link_to_passwd", "link_in_a_subfolder",
                                    "entry_is_a_link", "hard_link"])
def test_links_in_a_folder_submission_are_refused_with_a_note_naming_them(tmp_path, attack):
    """Refused before anything runs (sandbox=False would otherwise run the code unisolated: nothing ran)."""
    subs = tmp_path / "subs"
    solution = SOURCE / NAME / MODULE
    alice = subs / "alice"
    alice.mkdir(parents=True)
    if attack == "module_is_a_link":
        (alice / MODULE).symlink_to(solution)
    elif attack == "extra_link_to_passwd":
        (alice / MODULE).write_text("x = 1\n")
        (alice / "leak.py").symlink_to("/etc/passwd")
    elif attack == "link_in_a_subfolder":
        (alice / MODULE).write_text("x = 1\n")
        (alice / "data").mkdir()
        (alice / "data" / "secret").symlink_to(solution)
    elif attack == "entry_is_a_link":
        alice.rmdir()
        alice.symlink_to(solution.parent, target_is_directory=True)
    else:
        shutil.copy(solution, tmp_path / "copy.py")
        os.link(tmp_path / "copy.py", alice / MODULE)
    out = tmp_path / "g.csv"
    grade(subs, out, assignment=NAME, sandbox=False, timeout=5)
    totals = _totals(out)
    assert totals["alice"]["status"] == "error" and "refused" in totals["alice"]["notes"]
    assert ("symbolic link" in totals["alice"]["notes"]) == (attack != "hard_link")
    assert ("hard links" in totals["alice"]["notes"]) == (attack == "hard_link")
    assert _points(out, "alice") == ZERO
    feedback = Path(totals["alice"]["feedback_file"]).read_text()
    assert "root:" not in feedback and "BEGIN SOLUTION" not in feedback and "def fast_ap" not in feedback


# ------------------------------------------------------------- row 5: the wire cannot make the grader big
FORGER = '''
import io, sys, numpy as _np
_server = sys.modules["__main__"]  # the running student_server
_BIG = io.BytesIO()
_np.save(_BIG, _np.ones(2 * 2**20, dtype=_np.float32))  # 8 MB
def _forged(self, req, arrays):
    leaf = {"kind": "tensor", "dtype": "float32", "array": 0, "requires_grad": False}
    return {"output": {"kind": "list", "items": [leaf] * LEAVES}, "modified": {}}, [_BIG.getvalue()]
_server.Server.call = _forged
def soft_histogram(values, centres, width, weights):
    return values
'''


def test_a_forged_answer_aliasing_one_array_cannot_make_the_grader_big_or_late(tmp_path):
    folder = tmp_path / "forger"
    folder.mkdir()
    (folder / MODULE).write_text(FORGER.replace("LEAVES", "64"))  # 64 x 8 MB = 512 MB decoded, before
    process = StudentProcess(NAME, folder, tmp_path / "log", Limits(), sandbox=False)
    assert process.start(120, 60) is None
    try:
        process.deadline = time.monotonic() + 60
        tracemalloc.start()
        start = time.monotonic()
        with pytest.raises(StudentProcessEnded, match="decodes to more than|bytes"):
            process.functions["soft_histogram"](torch.zeros(2, 3), torch.zeros(4), 0.5, torch.ones(2, 3))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        process.kill()
    assert peak < 64 * 2**20, f"the grader allocated {peak / 2**20:.0f} MB decoding one answer"
    assert time.monotonic() - start < 60


def test_decoding_counts_every_leaf_stops_at_its_deadline_and_bounds_arrays():
    from lab.grading.wire import MAX_ARRAYS, Budget, WireError, decode, encode, receive, send

    arrays: list[bytes] = []
    one = encode(torch.zeros(1000), arrays)
    with pytest.raises(WireError, match="decodes to more than"):
        decode({"kind": "list", "items": [one] * 100}, arrays, Budget(50 * 4000))
    assert len(decode({"kind": "list", "items": [one] * 10}, arrays, Budget(50 * 4000))) == 10
    with pytest.raises(WireError) as info:
        decode(one, arrays, Budget(10**9, deadline=time.monotonic() - 1))
    assert info.value.reason == "deadline"
    r, w = os.pipe()
    send(w, {"x": 1}, [b"\0" * 10] * (MAX_ARRAYS + 1))
    with pytest.raises(WireError, match="arrays in one message"):
        receive(r, time.monotonic() + 5, 10**6)
    r, w = os.pipe()
    os.set_blocking(w, False)
    header = b'{"arrays": 1}'
    os.write(w, len(header).to_bytes(8, "little") + header + (64 * 2**20).to_bytes(8, "little"))
    with pytest.raises(WireError, match="at most"):  # refused from its length, before its bytes are read
        receive(r, time.monotonic() + 5, 2**20)
    # a header that declares far more data than came is refused before numpy allocates it
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (4_000_000_000,)})
    lying = buf.getvalue() + bytes(16)
    with pytest.raises(WireError, match="declares"):
        decode({"kind": "ndarray", "array": 0}, [lying], Budget(10**12))


# ------------------------------------------------------------ rows 6-7: what a student names is bounded
def test_long_odd_and_escaped_names_are_graded_and_read_back_exactly(tmp_path, stub):
    """A 240-character name, names that a spreadsheet would run, a tab, a hidden entry: every one gets its row
    (the hidden one refused with a note), a short unique feedback file, and a re-run keeps each student once."""
    stub(messages={"+bob": "x" * 30_000_000})  # a 30 MB message (a __name__, a repr): bounded in every file
    names = ["a" * 240, "+bob", "-carl", "=dan", "@eve", "\tfay", "'gil", "plain"]
    subs = _students(tmp_path / "subs", *names[1:], ".hidden")
    with zipfile.ZipFile(subs / f"{names[0]}.zip", "w") as zf:
        zf.writestr(MODULE, "x = 1\n")
    out = tmp_path / "out" / "g.csv"
    grade(subs, out, assignment=NAME)
    every = sorted(names + [".hidden"])
    assert sorted(map(read_cell, _column(out.with_name("g_totals.csv"), "student"))) == every
    assert sorted(map(read_cell, _column(out, "student"))) == sorted(n for n in every for _ in A.tests)
    assert "'+bob" in _column(out, "student")  # escaped in the file, for spreadsheets
    hidden = {read_cell(k): v for k, v in _totals(out).items()}[".hidden"]
    assert hidden["status"] == "error" and "hidden entry" in hidden["notes"]
    feedback = out.with_name("g_feedback")
    assert all(len(p.name) <= 80 and not p.name.startswith(".") for p in feedback.iterdir())
    assert len({file_stem(n) for n in every}) == len(every)
    assert max(p.stat().st_size for p in feedback.iterdir()) < 100_000
    assert out.stat().st_size < 100_000 and out.with_name("g_totals.csv").stat().st_size < 100_000
    again = stub()
    grade(subs, out, assignment=NAME)
    assert again.calls == []  # every student was found again by name, escaped or not
    assert sorted(map(read_cell, _column(out, "student"))) == sorted(n for n in every for _ in A.tests)  # once


@pytest.mark.parametrize("second", ["alice.zip", "Alice", "alice_nfd"])
def test_two_entries_of_one_student_are_refused_naming_both_and_the_others_are_graded(tmp_path, stub, second):
    first = "José" if second == "alice_nfd" else "alice"
    subs = _students(tmp_path / "subs", first, "bob")
    if second == "alice.zip":
        with zipfile.ZipFile(subs / second, "w") as zf:
            zf.writestr(MODULE, "x = 1\n")
    else:
        _students(subs, unicodedata.normalize("NFD", first) if second == "alice_nfd" else second)
    fake = stub()
    grade(subs, tmp_path / "g.csv", assignment=NAME)
    totals = _totals(tmp_path / "g.csv")
    assert fake.calls == ["bob"] and totals["bob"]["status"] == "complete"
    refused = [r for s, r in totals.items() if s != "bob"]
    assert len(refused) == (1 if second == "alice.zip" else 2)  # one name, one row; two names, two rows
    assert all(r["status"] == "error" and "two entries of one student" in r["notes"] for r in refused)
    assert "'alice' and 'alice.zip'" in refused[0]["notes"] or second != "alice.zip"


# ------------------------------------------------------------ rows 6 and 9, through the real sandbox
PROC_SNOOP = '''
def soft_histogram(values, centres, width, weights):
    raise NotImplementedError("ENV " + open("/proc/1/environ", "rb").read().decode(errors="replace")
                              + " CMD " + open("/proc/1/cmdline", "rb").read().decode(errors="replace"))
'''
HUGE_NAME = '''
def fast_ap(scores, targets, mask, num_bins):
    raise NotImplementedError("x" * 30_000_000)
fast_ap.__name__ = "y" * 30_000_000
'''


@pytest.mark.slow
def test_proc_1_shows_no_instructor_variable_or_grader_path_and_a_30_mb_name_stays_small(tmp_path):
    require_sandbox()
    g = {x.name: x for x in generate(SOURCE, tmp_path / "build", only=NAME)}[NAME]
    untouched = (g.student_dir / MODULE).read_text()
    subs = tmp_path / "subs"
    for who, extra in (("snoop", PROC_SNOOP), ("huge", HUGE_NAME)):
        (subs / who).mkdir(parents=True)
        (subs / who / MODULE).write_text(untouched + extra)
    out = tmp_path / "out" / "g.csv"
    grade(subs, out, assignment=NAME, timeout=30)
    totals = _totals(out)
    snooped = Path(totals["snoop"]["feedback_file"]).read_text()
    assert "ENV PATH=/usr/bin:/bin" in snooped  # bwrap's own minimal environment, nothing of the instructor's
    assert os.environ["PATH"] == "/usr/bin:/bin" or os.environ["PATH"] not in snooped
    assert "ranklab_grade_" not in snooped and "--ro-bind" not in snooped and str(tmp_path) not in snooped
    assert max(p.stat().st_size for p in out.with_name("g_feedback").iterdir()) < 100_000
    assert out.stat().st_size < 100_000
    assert _points(out, "huge") == ZERO
