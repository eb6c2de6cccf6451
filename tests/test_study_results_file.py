"""A study's results file with many writers (issue 44): two study calls on one folder keep each other's runs,
a record that disagrees with the file's is refused naming both, a writer killed mid-write leaves the last
good file, and ``python -m lab study merge`` unions parts by run. Real processes where the race is real."""
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _run(method: str, seed: int, r1: float = 0.5, **more) -> dict:
    """A record as the runner writes one (without a config: its key is kept as given)."""
    return {"study": "methods", "method": method, "seed": seed, "params": {}, "R@1": r1, "mAP@R": r1 / 2,
            "seconds": 1.0 + seed, "started": "2026-12-01 10:00:00", **more}


def _part(runs: dict, **more) -> dict:
    return {"study": "methods", "mode": "quick", "runs": runs, "sessions": [], **more}


def _records(path: Path) -> dict:
    return json.loads(path.read_text())["runs"]


# ------------------------------------------------------------------ two writers at once
@pytest.mark.slow
def test_two_study_calls_on_one_folder_at_once_keep_every_run(tmp_path):
    """The measured loss: each call logged "2 runs trained" and methods.json kept 2 of the 4."""
    calls = [subprocess.Popen([sys.executable, "-m", "lab", "study", "methods", "--quick", "--no-render",
                               "--methods", method, "--out", str(tmp_path)], cwd=ROOT, env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for method in ("SmoothAP", "ROADMAP")]
    for call in calls:
        out, err = call.communicate(timeout=600)
        assert call.returncode == 0, err
    runs = _records(tmp_path / "methods.json")
    assert sorted((r["method"], r["seed"]) for r in runs.values()) == \
        [("ROADMAP", 0), ("ROADMAP", 1), ("SmoothAP", 0), ("SmoothAP", 1)]
    sessions = json.loads((tmp_path / "methods.json").read_text())["sessions"]
    assert len(sessions) == 2 and sorted(s["trained"] for s in sessions) == [2, 2]
    assert all(not s["stopped"] for s in sessions)


WRITER = r"""
import sys
from pathlib import Path
from lab.studies.running.results_file import add_results
path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()  # both writers start together
for i in range(count):  # each write sends only its new run: a write that drops another's drops it for good
    add_results(path, {"study": "methods", "mode": "quick", "runs": {f"{name}{i}": {"method": name, "seed": i}},
                       "sessions": [{"id": name, "trained": i + 1}]})
"""


@pytest.mark.slow
def test_two_processes_adding_runs_one_by_one_lose_none(tmp_path):
    """Each write reads the file again under its lock: 2 x 60 interleaved writes keep 120 runs (without the
    lock, results_lock patched to do nothing, the same writers kept 63-66 of them in 3 of 3 tries)."""
    path, count = tmp_path / "methods.json", 60
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(count)], cwd=ROOT, env=ENV,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    for w in writers:
        assert w.stdout.readline() == "ready\n", w.stderr.read()
    for w in writers:
        w.stdin.write("go\n")
        w.stdin.flush()
    for w in writers:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err
    data = json.loads(path.read_text())
    assert sorted(data["runs"]) == sorted(f"{n}{i}" for n in "ab" for i in range(count))
    assert sorted((s["id"], s["trained"]) for s in data["sessions"]) == [("a", count), ("b", count)]


# ------------------------------------------------------------------ a record that disagrees
def test_a_record_that_disagrees_with_the_files_is_refused_naming_both(tmp_path):
    from lab.studies.running.results_file import ResultsConflict, add_results

    path = tmp_path / "methods.json"
    add_results(path, _part({"k1": _run("SmoothAP", 0, 0.5)}))
    before = path.read_bytes()
    with pytest.raises(ResultsConflict) as e:
        add_results(path, _part({"k1": _run("SmoothAP", 0, 0.625)}))
    message = str(e.value)
    assert "\n" not in message and str(path) in message and "key k1" in message and "differ in R@1" in message
    assert "SmoothAP, seed 0 has 0.5" in message and "SmoothAP, seed 0 has 0.625" in message
    assert path.read_bytes() == before  # nothing written
    # The same run measured again (other timings, another session): one run, kept as it was.
    again = _run("SmoothAP", 0, 0.5, seconds=99.0, started="2026-12-02 11:00:00")
    assert add_results(path, _part({"k1": again}))["runs"]["k1"]["seconds"] == 1.0
    # A learning curve: its timings may differ, its values may not; a record with one replaces one without.
    curve = [{"step": 0, "mAP@R": 0.1, "eval_seconds": 1.0}, {"step": 3, "mAP@R": 0.25, "eval_seconds": 1.0}]
    timed_again = [{**p, "eval_seconds": 2.0} for p in curve]
    assert add_results(path, _part({"k1": _run("SmoothAP", 0, 0.5, curve=curve)}))["runs"]["k1"]["curve"] == curve
    assert add_results(path, _part({"k1": _run("SmoothAP", 0, 0.5, curve=timed_again)}))["runs"]["k1"]["curve"] == curve
    moved = [curve[0], {**curve[1], "mAP@R": 0.5}]
    with pytest.raises(ResultsConflict, match=r"key k1\) differ in curve: SmoothAP, seed 0 has \[\{"):
        add_results(path, _part({"k1": _run("SmoothAP", 0, 0.5, curve=moved)}))


def test_a_recorded_run_leaves_failed_and_a_session_line_is_its_latest(tmp_path):
    from lab.studies.running.results_file import merge_results

    disk = _part({}, failed={"k1": {"error": "nan"}, "k2": {"error": "nan"}},
                 sessions=[{"id": "s1", "finished": "10:00", "trained": 1}, {"command": "old, no id"}])
    mine = _part({"k1": _run("SmoothAP", 0)}, sessions=[{"id": "s1", "finished": "10:05", "trained": 2},
                                                       {"command": "old, no id"}, {"id": "s2", "trained": 0}])
    merged = merge_results(disk, mine)
    assert sorted(merged["runs"]) == ["k1"] and merged["failed"] == {"k2": {"error": "nan"}}
    assert merged["sessions"] == [{"id": "s1", "finished": "10:05", "trained": 2}, {"command": "old, no id"},
                                  {"id": "s2", "trained": 0}]
    assert merge_results(mine, disk)["sessions"][0]["trained"] == 2  # the later line, whichever side holds it
    assert disk["failed"] == {"k1": {"error": "nan"}, "k2": {"error": "nan"}}  # the inputs are not changed


def test_quick_and_full_records_do_not_mix_in_one_file(tmp_path):
    from lab.studies.running.results_file import ResultsConflict, add_results

    add_results(tmp_path / "methods.json", _part({"k1": _run("SmoothAP", 0)}))
    with pytest.raises(ResultsConflict, match="quick-mode and full-mode results do not mix"):
        add_results(tmp_path / "methods.json", _part({"k2": _run("SmoothAP", 1)}, mode="full"))


# ------------------------------------------------------------------ a writer killed mid-write
KILLED = r"""
import os, sys
from pathlib import Path
from lab.studies.running.results_file import add_results
path = Path(sys.argv[1])
add_results(path, {"study": "methods", "mode": "quick", "runs": {"k1": {"method": "SmoothAP", "seed": 0}}})

def stuck(fd):  # the new file is written into its temporary file, not yet renamed: wait there to be killed
    print("writing", flush=True)
    sys.stdin.readline()

os.fsync = stuck
add_results(path, {"study": "methods", "mode": "quick", "runs": {"k2": {"method": "ROADMAP", "seed": 0}}})
"""


@pytest.mark.slow
def test_a_writer_killed_mid_write_leaves_the_last_good_file_and_frees_the_lock(tmp_path):
    from lab.studies.running.results_file import add_results, load_results, lock_path

    path = tmp_path / "methods.json"
    writer = subprocess.Popen([sys.executable, "-c", KILLED, str(path)], cwd=ROOT, env=ENV, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n", writer.stderr.read()
        good = path.read_bytes()
        strays = list(tmp_path.glob(".methods.json.*.tmp"))
        assert len(strays) == 1 and b"k2" in strays[0].read_bytes()  # killed with the new file half-done
        with open(lock_path(path)) as f, pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # and holding the lock
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert path.read_bytes() == good and sorted(load_results(path)["runs"]) == ["k1"]
    merged = add_results(path, _part({"k3": _run("SupAP", 0)}))  # the kernel dropped the dead writer's lock
    assert sorted(merged["runs"]) == ["k1", "k3"] and sorted(_records(path)) == ["k1", "k3"]
    assert not list(tmp_path.glob(".methods.json.*.tmp"))  # the dead writer's temporary file is cleared


# ------------------------------------------------------------------ python -m lab study merge
def test_merge_unions_parts_by_run_into_the_folder(tmp_path, capsys):
    a, b, out = tmp_path / "a" / "methods.json", tmp_path / "b" / "methods.json", tmp_path / "out"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(json.dumps(_part({"k1": _run("SmoothAP", 0), "k2": _run("ROADMAP", 0)},
                                  sessions=[{"id": "node-a", "trained": 2}])))
    b.write_text(json.dumps(_part({"k2": _run("ROADMAP", 0, seconds=7.0), "k3": _run("ROADMAP", 1)},
                                  sessions=[{"id": "node-b", "trained": 2}], failed={"k1": {"error": "nan"}})))
    bins = tmp_path / "b" / "bins.json"
    bins.write_text(json.dumps({**_part({"k9": _run("FastAP", 0)}), "study": "bins"}))
    main(["study", "merge", str(a), str(b), str(bins), "--out", str(out)])
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"{out / 'methods.json'}: 3 runs (3 added)", f"{out / 'bins.json'}: 1 runs (1 added)"]
    merged = json.loads((out / "methods.json").read_text())
    assert sorted(merged["runs"]) == ["k1", "k2", "k3"] and merged["mode"] == "quick"
    assert [s["id"] for s in merged["sessions"]] == ["node-a", "node-b"] and merged["failed"] == {}
    assert sorted(_records(out / "bins.json")) == ["k9"]
    main(["study", "merge", str(a), "--out", str(out)])  # again: nothing new
    assert capsys.readouterr().out.splitlines() == [f"{out / 'methods.json'}: 3 runs (0 added)"]


def test_merge_refuses_a_conflict_in_one_line_and_writes_nothing(tmp_path, capsys):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out"
    a.write_text(json.dumps(_part({"k1": _run("SmoothAP", 0, 0.5)})))
    b.write_text(json.dumps(_part({"k1": _run("SmoothAP", 0, 0.25)})))
    bins = tmp_path / "bins.json"
    bins.write_text(json.dumps({**_part({"k9": _run("FastAP", 0)}), "study": "bins"}))
    with pytest.raises(SystemExit) as e:
        main(["study", "merge", str(bins), str(a), str(b), "--out", str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m lab study: error: ")
    assert "key k1) differ in R@1: SmoothAP, seed 0 has 0.5, SmoothAP, seed 0 has 0.25" in err
    assert f"{b} into {out / 'methods.json'}" in err
    assert not list(out.glob("*.json"))  # not even the study that merged cleanly
    with pytest.raises(SystemExit):
        main(["study", "merge", str(tmp_path / "nowhere.json"), "--out", str(out)])
    assert "merge: part" in capsys.readouterr().err


# ----------------------------------------------------------- a results file validated record by record
def _file(tmp_path, runs=None, **top):
    from lab.studies.running.spec import study_runs

    spec = study_runs("methods", quick=True)[0]
    good = {"key": spec.key, "method": spec.method, "seed": spec.seed, "config": spec.config, "R@1": 0.5,
            "mAP@R": 0.25}
    path = tmp_path / "methods.json"
    path.write_text(json.dumps({"study": "methods", "mode": "quick", "sessions": [], "runs": runs or {spec.key: good},
                                **top}))
    return path, good, spec.key


@pytest.mark.parametrize("change, phrase", [
    (dict(metric=float("nan")), "mAP@R is nan, not a finite number"),
    (dict(metric="0.5"), "mAP@R is 0.5, not a finite number"),
    (dict(seed=-1), "its seed is '-1', not an integer >= 0"),
    (dict(method=None), "its method is 'None', not a name"),
    (dict(record="junk"), "is a str, not a run's record"),
    (dict(top={"sessions": 5}), "'sessions' is 5, not a list of session lines"),
    (dict(top={"failed": [1]}), "'failed' is [1], not a mapping of failed runs"),
], ids=["nan", "text", "seed", "method", "junk", "sessions", "failed"])
def test_a_results_file_is_checked_record_by_record_in_one_line(tmp_path, change, phrase):
    """Issue 47, point 7: a NaN rendered a verdict ('+nan pt ... does not reproduce'), "sessions": 5 or
    "failed": [1] made --render crash with a traceback, a junk record was kept."""
    from lab.studies.running.results_file import load_results

    path, good, key = _file(tmp_path)
    load_results(path)  # the good one loads
    rec = dict(good, **{k: v for k, v in change.items() if k in ("seed", "method")})
    if "metric" in change:
        rec["mAP@R"] = change["metric"]
    runs = {key: change.get("record", rec)}
    path, _, _ = _file(tmp_path, runs, **change.get("top", {}))
    with pytest.raises(ValueError) as info:
        load_results(path)
    assert phrase in str(info.value) and "\n" not in str(info.value) and str(path) in str(info.value)


def test_every_stored_results_file_passes_the_checks():
    from lab.studies.running.paths import RESULTS
    from lab.studies.running.results_file import load_results

    files = [p for p in sorted(RESULTS.rglob("*.json")) if "runs" in json.loads(p.read_text())
             and isinstance(json.loads(p.read_text())["runs"], dict) and p.name != "replay_fingerprint.json"]
    assert len(files) >= 10
    for path in files:
        load_results(path)


def test_render_of_a_file_with_a_nan_is_one_line(tmp_path, capsys):
    path, good, key = _file(tmp_path)
    data = json.loads(path.read_text())
    data["runs"][key]["R@1"] = float("nan")
    path.write_text(json.dumps(data))
    with pytest.raises(SystemExit) as info:
        main(["study", "methods", "--render", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code != 0 and len(err) == 1 and "R@1 is nan" in err[0]
