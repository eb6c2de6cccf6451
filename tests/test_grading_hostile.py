"""Hostile submissions (issue 32's table): each attack, built on the untouched student version, scores
exactly what the untouched version scores, writes nothing outside its own scratch folder, and leaves
no process behind.

One batch grades every attack at once, with an honest ``correct`` and the ``untouched`` student
version beside them, through tests/_sandbox.py's driver: it watches the instructor's working folder,
the submissions folder, the output folder and the installed ``lab`` package (trees hashed before and
after), and lists every process left below it (a child subreaper: detached and ``setsid`` processes
are re-parented to it, each reported with its session and process group). Each test reads its row.
The attacks know the instructor's paths (they are written into their source): the strongest form.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lab.grading.assignments import ASSIGNMENTS
from lab.grading.generate import generate
from lab.grading.sandbox import GiB, lab_package
from tests._sandbox import require_sandbox

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments"
NAME = "03_histogram_losses_and_bin_width"
A = ASSIGNMENTS[NAME]
CELLS = [t.cell for t in A.tests]
MARK = "ranklab_attack_"  # every file an attack writes is named so

# Appended to the untouched student module. {instructor}, {subs}, {out}, {solution}, {ports} are filled in.
ATTACKS = {
    "shadow_checks": """
def check_soft_histogram(*args, **kwargs):
    return None
def check_fast_ap(*args, **kwargs):
    return None
""",
    "patch_run_check": """
import lab.grading.topic_checks as _checks, lab.grading.check_runner as _runner
_runner.run_check = _checks.run_check = lambda *args, **kwargs: None
""",
    "patch_isclose": """
import torch as _torch
_torch.isclose = lambda a, b, **kwargs: _torch.ones_like(a, dtype=_torch.bool)
def soft_histogram(values, centres, width, weights):
    return values.new_zeros(values.shape[0], centres.shape[0]) + 0 * values.sum()
def fast_ap(scores, targets, mask, num_bins):
    return (scores * 0).sum(1)
""",
    "forge_results": """
import json as _json, os as _os
try:
    with open("../results.jsonl", "a") as _f:
        for _cell in {cells!r}:
            _f.write(_json.dumps(dict(cell=_cell, status="passed", message="passed", seconds=0.0)) + "\\n")
except OSError:
    pass
_os._exit(0)
""",
    "detached_rewriter": """
import os as _os, time as _time
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        for _ in range(6000):
            _time.sleep(0.1)
            if _os.path.exists(r"{out}/grades_totals.csv"):
                break
        _time.sleep(1.0)
        for _name in ("grades.csv", "grades_totals.csv"):
            try:
                with open(r"{out}/" + _name, "a") as _f:
                    _f.write("detached_rewriter,FORGED,7,7\\n")
            except OSError:
                pass
    _os._exit(0)
_os.wait()
""",
    "patch_grader_file": """
import lab.grading.check_runner as _runner
try:
    with open(_runner.__file__, "a") as _f:
        _f.write("\\ndef run_check(*args, **kwargs):  # {mark}\\n    return None\\n")
except OSError:
    pass
""",
    "read_secrets": """
import glob as _glob, os as _os, lab as _lab
_found = []
for _p in ["../tests.json", r"{solution}",
           _os.path.join(_os.path.dirname(_os.path.dirname(_lab.__file__)), "assignments", {name!r}, {module!r})]:
    try:
        with open(_p) as _f:
            _found.append(_f.read()[:2000])
    except OSError:
        pass
_LEAK = "LEAKED: " + (" | ".join(_found) if _found else "nothing")
def soft_histogram(values, centres, width, weights):
    raise NotImplementedError(_LEAK)
def fast_ap(scores, targets, mask, num_bins):
    raise NotImplementedError(_LEAK)
""",
    "writes_everywhere": """
import os as _os
for _d in ["/tmp", r"{instructor}", r"{subs}", r"{out}", r"{lab}", ".."]:
    try:
        with open(_os.path.join(_d, "{mark}writes"), "w") as _f:
            _f.write("written by a student")
    except OSError:
        pass
""",
    "sockets": """
import socket as _socket
for _host, _port in {ports!r}:
    try:
        with _socket.create_connection((_host, _port), timeout=3) as _c:
            _c.sendall(b"a student was here")
    except OSError:
        pass
""",
    "fork_sleepers": """
import os as _os, time as _time
for _ in range(100):
    if _os.fork() == 0:
        _time.sleep(600)
        _os._exit(0)
if _os.fork() == 0:
    _os.setsid()
    _time.sleep(600)
    _os._exit(0)
""",
    "memory_20gb": """
import torch as _torch
def soft_histogram(values, centres, width, weights):
    _hog = _torch.ones(20 * 2**30, dtype=_torch.uint8)
    raise NotImplementedError("TODO: implement soft_histogram() (see its docstring)")
""",
    "alarm_cancel": """
import signal as _signal, time as _time
def soft_histogram(values, centres, width, weights):
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    _signal.signal(_signal.SIGALRM, _signal.SIG_IGN)
    _time.sleep(600)
""",
}
TIMEOUT = 10  # seconds per test in the batch
MEMORY = 2 * GiB  # the 20 GB attack then fails at once, without taking the machine's memory


def _host_address() -> str:
    """This machine's non-loopback address ('' when it has none): 'outbound' from the sandbox's view."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent: only picks the route's source address
            address = s.getsockname()[0]
    except OSError:
        return ""
    return "" if address.startswith("127.") else address


class Listener:
    """A TCP server on the host that records every connection it accepts."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen()
        self.sock.settimeout(0.5)
        self.port, self.accepted, self.stop = self.sock.getsockname()[1], [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted.append(peer)
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def build_course(root: Path, ports: list[tuple[str, int]]) -> dict[str, Path]:
    """The submissions folder (every attack, ``untouched`` and ``correct``), the instructor's working
    folder and the output folder, under ``root``."""
    g = {x.name: x for x in generate(SOURCE, root / "build", only=NAME)}[NAME]
    untouched = (g.student_dir / A.modules[0]).read_text()
    paths = dict(subs=root / "submissions", instructor=root / "instructor", out=root / "out")
    for p in paths.values():
        p.mkdir(parents=True)
    fill = dict(instructor=paths["instructor"], subs=paths["subs"], out=paths["out"], lab=lab_package(),
                solution=SOURCE / NAME / A.modules[0], name=NAME, module=A.modules[0], cells=CELLS, mark=MARK,
                ports=ports)
    texts = {"untouched": untouched, "correct": (SOURCE / NAME / A.modules[0]).read_text()}
    texts.update({name: untouched + code.format(**fill) for name, code in ATTACKS.items()})
    for student, text in texts.items():
        (paths["subs"] / student).mkdir()
        (paths["subs"] / student / A.modules[0]).write_text(text)
        shutil.copy(g.student_dir / A.notebook, paths["subs"] / student / A.notebook)
    return paths


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    require_sandbox()
    root = tmp_path_factory.mktemp("hostile")
    listeners = [Listener("127.0.0.1")] + ([Listener(_host_address())] if _host_address() else [])
    try:
        paths = build_course(root, [(s.sock.getsockname()[0], s.port) for s in listeners])
        guarded = lab_package() / "grading" / "check_runner.py"
        original = guarded.read_bytes()
        tmp_before = {p.name for p in Path("/tmp").iterdir() if p.name.startswith(MARK)}
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        cmd = [sys.executable, str(ROOT / "tests" / "_sandbox.py"), str(paths["subs"]),
               str(paths["out"] / "grades.csv"), str(root / "report.json"),
               "--timeout", str(TIMEOUT), "--memory", str(MEMORY)]
        for d in (paths["instructor"], paths["subs"], paths["out"], lab_package()):
            cmd += ["--watch", str(d)]
        try:
            done = subprocess.run(cmd, cwd=paths["instructor"], env=env, capture_output=True, text=True, timeout=1200)
        finally:
            if guarded.read_bytes() != original:  # never leave a broken grader behind, even when this test fails
                guarded.write_bytes(original)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        for s in listeners:
            s.close()
    report = json.loads((root / "report.json").read_text())
    with open(paths["out"] / "grades.csv", newline="") as f:
        rows = {(r["student"], r["test"]): r for r in csv.DictReader(f)}
    with open(paths["out"] / "grades_totals.csv", newline="") as f:
        totals = {r["student"]: r for r in csv.DictReader(f)}
    tmp_after = {p.name for p in Path("/tmp").iterdir() if p.name.startswith(MARK)}
    return dict(report=report, rows=rows, totals=totals, paths=paths, listeners=listeners,
                tmp_new=tmp_after - tmp_before)


def _points(batch, student: str) -> dict[str, float]:
    return {c: float(batch["rows"][(student, c)]["points"]) for c in CELLS}


def _scores_as_untouched_and_leaves_nothing(batch, student: str) -> None:
    assert _points(batch, student) == _points(batch, "untouched"), student
    report = batch["report"]
    assert report["processes_left"] == [], report["processes_left"]  # by session/process group, below the driver
    assert report["changed_after_grade"] == []
    outputs = {"grades.csv", "grades_totals.csv", "grades_feedback/", "grades_batch.json"}  # the grader's own
    for folder, before in report["trees_before"].items():
        after = {k: v for k, v in report["trees_after"][folder].items()
                 if folder != str(batch["paths"]["out"]) or k.split("/")[0] + ("/" if "/" in k else "") not in outputs}
        assert after == before, f"{folder} changed: {sorted(set(after.items()) ^ set(before.items()))[:5]}"
    assert batch["tmp_new"] == set()


# ------------------------------------------------------------------------------------ baselines
@pytest.mark.slow
def test_the_honest_and_the_untouched_submissions_score_as_the_weight_table_says(batch):
    assert _points(batch, "correct") == {t.cell: t.points for t in A.tests}
    assert _points(batch, "untouched") == {c: 0 for c in CELLS}
    assert batch["totals"]["correct"]["status"] == "complete"
    _scores_as_untouched_and_leaves_nothing(batch, "untouched")


# ---------------------------------------------------------------------------- one test per attack
@pytest.mark.slow
def test_no_op_checks_defined_in_the_module_do_not_replace_the_checks(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "shadow_checks")
    assert "not implemented yet" in batch["rows"][("shadow_checks", "fast-check")]["feedback"]


@pytest.mark.slow
def test_patching_run_check_at_import_changes_nothing_in_the_grader(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "patch_run_check")


@pytest.mark.slow
def test_patching_torch_isclose_at_import_changes_nothing_in_the_grader(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "patch_isclose")
    assert batch["rows"][("patch_isclose", "hist-check")]["status"] == "failed"


@pytest.mark.slow
def test_forged_result_records_and_an_early_exit_earn_nothing(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "forge_results")
    assert {batch["rows"][("forge_results", c)]["status"] for c in CELLS} == {"error"}
    assert batch["totals"]["forge_results"]["status"] == "error"  # an import that ends the process is not complete


@pytest.mark.slow
def test_a_detached_process_cannot_rewrite_the_grades_after_the_grader_exits(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "detached_rewriter")
    out = batch["paths"]["out"]
    assert "FORGED" not in (out / "grades.csv").read_text() + (out / "grades_totals.csv").read_text()


@pytest.mark.slow
def test_the_grader_s_own_files_cannot_be_patched(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "patch_grader_file")
    assert MARK not in (lab_package() / "grading" / "check_runner.py").read_text()
    assert _points(batch, "correct") == {t.cell: t.points for t in A.tests}


@pytest.mark.slow
def test_hidden_tests_and_solutions_cannot_be_read_into_the_feedback(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "read_secrets")
    feedback = (batch["paths"]["out"] / "grades_feedback" / "read_secrets.txt").read_text()
    assert "LEAKED: nothing" in feedback  # the channel works: it had nothing to carry
    cell = batch["rows"][("read_secrets", "fast-check")]["feedback"]
    for secret in ("seed=301", "### BEGIN SOLUTION", "BEGIN HIDDEN TESTS"):
        assert secret not in feedback and secret not in cell


@pytest.mark.slow
def test_writes_to_tmp_the_instructors_folders_and_the_lab_package_land_nowhere(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "writes_everywhere")
    for folder in list(batch["paths"].values()) + [Path("/tmp"), lab_package()]:
        assert not (folder / f"{MARK}writes").exists(), folder


@pytest.mark.slow
def test_sockets_reach_neither_the_hosts_loopback_nor_its_outward_address(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "sockets")
    assert [s.accepted for s in batch["listeners"]] == [[] for _ in batch["listeners"]]


@pytest.mark.slow
def test_a_hundred_sleepers_and_a_setsid_child_do_not_outlive_the_submission(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "fork_sleepers")


@pytest.mark.slow
def test_allocating_20_gb_fails_inside_the_memory_limit(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "memory_20gb")
    assert "allocate" in batch["rows"][("memory_20gb", "hist-check")]["feedback"].lower()


@pytest.mark.slow
def test_cancelling_the_alarm_does_not_cancel_the_timeout(batch):
    _scores_as_untouched_and_leaves_nothing(batch, "alarm_cancel")
    row = batch["rows"][("alarm_cancel", "hist-check")]
    assert row["status"] == "timeout" and f"did not finish within {TIMEOUT} s" in row["feedback"]
    # The next test ran in a fresh sandbox: the untouched fast_ap's own message, not "not run".
    assert "not implemented yet" in batch["rows"][("alarm_cancel", "fast-check")]["feedback"]
