"""Atomic writes give a file the mode a plain open() would: the umask's for a new file, the old
file's for one replaced (mkstemp's owner-only 0o600 made a study's results unreadable to the group)."""
from __future__ import annotations

import contextlib
import json
import os
import stat

import pytest

from lab.studies import runner
from lab.train.files import write_text_atomic


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


WRITERS = {
    "save_results": lambda path: runner.save_results(path, {"runs": {}}),
    "write_text_atomic": lambda path: write_text_atomic(path, "text\n"),
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
    assert path.read_text() != "{}"  # it was replaced, not left alone


def test_save_results_still_writes_the_data_and_no_temporary_file(tmp_path):
    data = {"study": "s", "runs": {"k": {"seed": 1}}}
    runner.save_results(tmp_path / "deep" / "r.json", data)
    assert json.loads((tmp_path / "deep" / "r.json").read_text()) == data
    assert [p.name for p in (tmp_path / "deep").iterdir()] == ["r.json"]
