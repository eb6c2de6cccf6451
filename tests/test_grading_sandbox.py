"""The student's process and the grader's stand-ins for its functions (lab.grading.remote, wire, sandbox):
a check run on a function in the student's process says exactly what it says in-process (values,
gradients, NaN gradients traced to the student's line, in-place edits, crashes, odd return values);
the wire refuses pickles; without bubblewrap, grading refuses in one line naming the package.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lab.grading import CHECKS
from lab.grading import sandbox as sandbox_module
from lab.grading.assignments import ASSIGNMENTS
from lab.grading.grade import main
from lab.grading.remote import StudentProcess, TestTimeout
from lab.grading.sandbox import Limits, lab_package
from lab.grading.wire import WireError, decode, encode, rebuild_exception

from . import grading_students as st
from ._sandbox import require_sandbox
from .test_grading import WRONG

ROOT = Path(__file__).resolve().parents[1]
# Each check's message is compared through the student's process and in-process, on these variants.
VARIANTS = [(topic, fn.keywords) for topic, fn, _ in WRONG] + [(t, {}) for t in
                                                              ("h_minus", "sup_ap", "average_precision", "fast_ap")]
WRAPPER = """
import functools, json
from pathlib import Path
import grading_students as _st
def _pick(name):
    return functools.partial(getattr(_st, name), **json.loads(Path("bug.json").read_text()))
"""


def _module(functions: list[str]) -> str:
    return WRAPPER + "".join(f"def {f}(*args):\n    return _pick({f!r})(*args)\n" for f in functions)


def _message(check, fn) -> str:
    try:
        check(fn, verbose=False)
    except AssertionError as exc:
        return str(exc)
    return "passed"


def _named(name: str, fn, **bugs):
    def student(*args):
        return fn(*args, **bugs)
    student.__name__ = name
    return student


@pytest.fixture(scope="module")
def students(tmp_path_factory):
    """One unsandboxed student process per assignment (the wire is what is tested here), whose functions
    take their bug from bug.json in its folder, rewritten between checks."""
    out = {}
    for assignment in ASSIGNMENTS.values():
        folder = tmp_path_factory.mktemp(assignment.name)
        shutil.copy(ROOT / "tests" / "grading_students.py", folder)
        (folder / assignment.modules[0]).write_text(_module([t.function for t in assignment.tests]))
        (folder / "bug.json").write_text("{}")
        process = StudentProcess(assignment.name, folder, folder.parent / f"{assignment.name}.log", Limits(),
                                 sandbox=False)
        assert process.start(120, 60) is None
        for t in assignment.tests:
            out[t.function] = (process, folder)
    yield out
    for process, _ in out.values():
        process.kill()


@pytest.mark.slow
@pytest.mark.parametrize("topic, bugs", VARIANTS, ids=[f"{t}-{'-'.join(map(str, b.values())) or 'right'}"
                                                       for t, b in VARIANTS])
def test_a_check_says_the_same_through_the_student_process(students, topic, bugs):
    process, folder = students[topic]
    (folder / "bug.json").write_text(json.dumps(bugs))
    process.deadline = time.monotonic() + 120
    check = CHECKS[f"check_{topic}"]
    remote = _message(check, process.functions[topic])
    assert remote == _message(check, _named(topic, getattr(st, topic), **bugs))
    process.forget()


def test_a_deadline_kills_the_student_process(students, tmp_path):
    folder = tmp_path / "hang"
    folder.mkdir()
    (folder / "histograms.py").write_text("import time\ndef soft_histogram(*args):\n    time.sleep(600)\n")
    process = StudentProcess("03_histogram_losses_and_bin_width", folder, tmp_path / "log", Limits(), sandbox=False)
    assert process.start(120, 60) is None
    process.deadline = time.monotonic() + 1
    with pytest.raises(TestTimeout):
        process.functions["soft_histogram"](torch.zeros(2, 3))
    assert not process.alive


# ----------------------------------------------------------------------------------------- wire
def test_values_cross_as_plain_data():
    arrays: list[bytes] = []
    value = [torch.tensor([1.0, float("nan")], dtype=torch.float64).requires_grad_(), np.arange(3), 2.5, None,
             ("x", True), torch.zeros(2, dtype=torch.bfloat16)]
    got = decode(encode(value, arrays), arrays)
    assert got[0].dtype == torch.float64 and torch.equal(got[0].isnan(), value[0].isnan())
    assert np.array_equal(got[1], value[1]) and got[2:5] == [2.5, None, ("x", True)]
    assert got[5].dtype == torch.bfloat16
    assert type(decode(encode(object(), arrays), arrays)).__name__ == "object"


def test_a_pickle_in_an_array_is_refused():
    buf = io.BytesIO()
    np.save(buf, np.array([{"code": "anything"}], dtype=object), allow_pickle=True)
    with pytest.raises(WireError, match="not a plain .npy"):
        decode({"kind": "ndarray", "array": 0}, [buf.getvalue()])
    with pytest.raises(WireError, match="unknown"):
        decode({"kind": "pickle", "data": "gASV"}, [])


def test_student_exceptions_are_rebuilt_by_name_with_the_students_line():
    exc = rebuild_exception(dict(type="NotImplementedError", message="TODO", where="h.py, line 3", code="raise",
                                 base="Exception"))
    assert isinstance(exc, NotImplementedError) and exc.student_frame == ("h.py, line 3", "raise")
    odd = rebuild_exception(dict(type="LinAlgError", message="singular", base="Exception"))
    assert isinstance(odd, Exception) and type(odd).__name__ == "LinAlgError"
    assert rebuild_exception(dict(type="SystemExit", exit_code=3, base="BaseException")).code == 3


# --------------------------------------------------------------------------- without bubblewrap
def test_without_bwrap_grading_refuses_in_one_line_naming_the_package(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sandbox_module, "_probe", lambda: "bwrap is not installed")
    (tmp_path / "alice").mkdir()
    with pytest.raises(SystemExit) as info:
        main([str(tmp_path), "-o", str(tmp_path / "g.csv")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "bubblewrap" in err and "--no-sandbox" in err


def test_no_sandbox_says_what_it_gives_up(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path), "-o", str(tmp_path / "g.csv"), "--no-sandbox"])
    first = capsys.readouterr().err.splitlines()[0]
    assert "--no-sandbox" in first and "read and write your files" in first and "network" in first


def test_the_sandbox_works_here_or_the_test_says_why():
    require_sandbox()  # in CI (RANKLAB_REQUIRE_SANDBOX=1) a missing bwrap fails here
    assert sandbox_module._probe() == ""


def test_a_checkout_under_tmp_is_still_visible_in_the_sandbox(tmp_path):
    """The sandbox mounts its own /tmp: a grader whose lab (or venv) lives under /tmp, as a CI clone may,
    must still be importable there (mounted in the other order, the tmpfs hid it: 30 tests failed)."""
    import subprocess
    import sys

    require_sandbox()
    shutil.copytree(lab_package(), tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    probe = ("import subprocess, sys\nfrom lab.grading.sandbox import Limits, bwrap_command, start\n"
             "cmd, fds = bwrap_command([sys.executable, '-c', 'import lab; print(lab.__file__)'], [], Limits())\n"
             "proc, _ = start(cmd, fds, Limits(), group=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE,\n"
             "                text=True)\n"
             "out, err = proc.communicate()\nprint(out.strip() or err)")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == str(tmp_path / "lab" / "__init__.py"), done.stdout + done.stderr
