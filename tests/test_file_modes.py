"""Atomic writes give a file the mode a plain open() would: the umask's for a new file, the old
file's for one replaced (mkstemp's owner-only 0o600 made a study's results unreadable to the group)."""
from __future__ import annotations

import contextlib
import json
import os
import stat
import zipfile

import pytest

from lab.data import glyphs
from lab.grading import grade_sheet, unzip
from lab.studies.running import results_file
from lab.core.files import write_text_atomic


@contextlib.contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def plain_open_mode(path, mask: int) -> int:
    """The reference: what open(path, "w") gives under ``mask``."""
    with umask(mask), open(path, "w") as f:
        f.write("x")
    return mode(path)


def unzipped(path) -> None:
    """A submission's file extracted by lab.grading.unzip into ``path``'s folder, under ``path``'s name."""
    archive = path.parent / "submission.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(path.name, "print('hello')\n")
    unzip.extract(archive, path.parent, keep=lambda name: name == path.name)
    archive.unlink()


WRITERS = {
    "save_results": lambda path: results_file.save_results(path, {"runs": {}}),
    "write_text_atomic": lambda path: write_text_atomic(path, "text\n"),
    "grade_sheet": lambda path: grade_sheet.write_atomic(path, "student,total\n"),  # grades and feedback
    "unzip": unzipped,
    "glyph_cache_text": lambda path: glyphs._write_atomic(path, lambda f: json.dump([1, 2], f)),
    "glyph_cache_bytes": lambda path: glyphs._write_atomic(path, lambda f: f.write(b"\x93NUMPY"), mode="wb"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_a_new_file_gets_the_mode_of_a_plain_open(tmp_path, writer, mask):
    expected = plain_open_mode(tmp_path / "reference", mask)
    with umask(mask):
        WRITERS[writer](tmp_path / "out.json")
    assert mode(tmp_path / "out.json") == expected, (writer, oct(mask))


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("old_mode", [0o640, 0o604, 0o600, 0o664])
def test_a_replaced_file_keeps_its_mode(tmp_path, writer, old_mode):
    path = tmp_path / "out.json"
    path.write_text("{}")
    os.chmod(path, old_mode)
    with umask(0o022):
        WRITERS[writer](path)
    assert mode(path) == old_mode, (writer, oct(old_mode))
    assert path.read_bytes() != b"{}"  # it was replaced, not left alone


def test_save_results_still_writes_the_data_and_no_temporary_file(tmp_path):
    data = {"study": "s", "runs": {"k": {"seed": 1}}}
    results_file.save_results(tmp_path / "deep" / "r.json", data)
    assert json.loads((tmp_path / "deep" / "r.json").read_text()) == data
    assert [p.name for p in (tmp_path / "deep").iterdir()] == ["r.json"]


def test_the_cache_and_grade_writers_write_what_they_are_given(tmp_path):
    WRITERS["glyph_cache_text"](tmp_path / "c.json")
    WRITERS["glyph_cache_bytes"](tmp_path / "c.npy")
    WRITERS["grade_sheet"](tmp_path / "grades.csv")
    WRITERS["unzip"](tmp_path / "solution.py")
    assert json.loads((tmp_path / "c.json").read_text()) == [1, 2]
    assert (tmp_path / "c.npy").read_bytes() == b"\x93NUMPY"
    assert (tmp_path / "grades.csv").read_bytes() == b"student,total\n"
    assert (tmp_path / "solution.py").read_text() == "print('hello')\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "c.npy", "grades.csv", "solution.py"]
