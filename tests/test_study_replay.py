"""Issue 33, 'same seed, same code, same device -> the same numbers': today's code still trains stored
study runs as the code that trained them did. A change that moves a run's bits (as the normalisation of
f815bf1 did until 47db65b, found only by hand) makes the stored runs something main no longer trains;
this guard fails on it. With the repository's full history it trains both codes side by side; a clone
without it (a shallow one) compares today's code with the fingerprint TRAINED_AT's code left
(results/v2/replay_fingerprint.json) where torch and the CPU kind match it, and otherwise fails with one
line saying what is missing: it never skips."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from lab.studies.running import replay

ROOT = Path(__file__).resolve().parents[1]
STEPS = 20  # a few seconds a run on one thread; the normalisation change of 47db65b showed within 20
REPLAYED = ("ROADMAP", "FastAP")  # a sort-based and a histogram loss of study 1, seed 0


def _stored_runs() -> list[dict]:
    runs = json.loads((ROOT / "results" / "v2" / "methods.json").read_text())["runs"].values()
    chosen = [r for r in runs if r["study"] == "methods" and r["seed"] == 0 and r["method"] in REPLAYED]
    assert sorted(r["method"] for r in chosen) == sorted(REPLAYED), "results/v2/methods.json lacks a replayed run"
    return sorted(chosen, key=lambda r: r["method"])


def _history_or_fail(*commits: str) -> list[str]:
    try:
        return [replay.resolve(c) for c in commits]
    except replay.MissingHistory as missing:
        reason = str(missing)
    pytest.fail(reason, pytrace=False)  # outside the except: one line, no chained traceback


def _utc(stamp: str) -> dt.datetime:
    # Runs write local time; the study machines run on UTC (their session lines and commits agree).
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)


def test_the_replayed_commit_is_the_training_code_of_the_stored_runs_whole_span():
    """TRAINED_AT was committed before each replayed run started, and lab/'s training code did not change
    from it until NEXT_TRAINING_CHANGE, after each finished: no other code can have trained them."""
    trained_at, next_change = _history_or_fail(replay.TRAINED_AT, replay.NEXT_TRAINING_CHANGE)
    changes = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%H", f"{trained_at}..{next_change}", "--",
                              *replay.TRAINING_CODE], check=True, capture_output=True, text=True).stdout.split()
    assert changes == [next_change], f"the training code changed between {replay.TRAINED_AT} and " \
                                     f"{replay.NEXT_TRAINING_CHANGE}: {[c[:7] for c in changes]}"

    def committed(commit: str) -> dt.datetime:
        return dt.datetime.fromisoformat(subprocess.run(["git", "-C", str(ROOT), "show", "-s", "--format=%cI", commit],
                                                        check=True, capture_output=True, text=True).stdout.strip())

    for run in _stored_runs():
        finished = _utc(run["finished"])
        started = finished - dt.timedelta(seconds=run["seconds"])
        assert committed(trained_at) <= started and finished <= committed(next_change), \
            f"{run['method']} seed 0 ran {started:%Y-%m-%d %H:%M}-{finished:%H:%M}, outside the span of " \
            f"{replay.TRAINED_AT}'s training code"


def _history_available() -> bool:
    try:
        replay.resolve(replay.TRAINED_AT)
        return True
    except replay.MissingHistory:
        return False


@pytest.mark.slow
def test_todays_code_trains_the_stored_runs_first_steps_bitwise(tmp_path):
    runs = _stored_runs()
    configs = [r["config"] for r in runs]
    stored = replay.read_fingerprint()
    assert stored["steps"] == STEPS
    for fingerprint in stored["fingerprints"]:
        assert sorted(fingerprint["runs"]) == [r["method"] for r in runs]
        assert all(fingerprint["runs"][r["method"]]["config"] == r["config"] for r in runs), "a fingerprint's configs"
    now = replay.train_first_steps(ROOT, configs, STEPS)
    if _history_available():
        then = replay.collect(replay.train_first_steps(replay.export_lab(replay.TRAINED_AT, tmp_path), configs, STEPS))
        mine = replay.fingerprint_for(stored, exact=True)
        if mine is not None:  # the stored fingerprint of this machine is what TRAINED_AT trains here
            assert [mine["runs"][r["method"]]["weights_sha256"] for r in runs] == \
                [t["weights_sha256"] for t in then], "results/v2/replay_fingerprint.json is not TRAINED_AT's run"
    elif replay.fingerprint_for(stored, exact=False) is not None:
        mine = replay.fingerprint_for(stored, exact=False)
        then = [mine["runs"][r["method"]] for r in runs]
    else:
        now.kill()
        machines = [f["machine"] for f in stored["fingerprints"]]
        pytest.fail(f"no history of {replay.TRAINED_AT} in this clone (shallow?) and the stored fingerprints were made "
                    f"on {machines}, not {replay.machine()}: fetch the history (git fetch --unshallow)",
                    pytrace=False)
    now = replay.collect(now)
    moved = [f"{run['method']} seed {run['seed']}: after {STEPS} steps weights {a['weights_sha256'][:12]} at "
             f"{replay.TRAINED_AT} vs {b['weights_sha256'][:12]} today; first difference: "
             f"{replay.first_difference(a['losses'], b['losses'])}"
             for run, a, b in zip(runs, then, now) if a["weights_sha256"] != b["weights_sha256"]]
    assert not moved, "today's code no longer trains the stored runs of results/v2: " + "; ".join(moved)
    assert all(len(r["losses"]) == STEPS for r in then + now)


# ---------------------------------------------------------------- the guard's own parts
def _repo(tmp_path: Path) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       check=True, capture_output=True)
    (tmp_path / "lab").mkdir(parents=True)
    (tmp_path / "lab" / "a.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    return tmp_path


def test_a_commit_missing_from_the_history_is_one_line_naming_it(tmp_path):
    repo = _repo(tmp_path / "repo")
    with pytest.raises(replay.MissingHistory) as missing:
        replay.resolve("eb7e669", repo)
    assert "commit eb7e669" in str(missing.value) and "\n" not in str(missing.value)


def test_a_shallow_clone_is_named_as_such(tmp_path):
    repo = _repo(tmp_path / "repo")
    (repo / "lab" / "a.py").write_text("x = 2\n")
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam",
                    "two"], check=True)
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    first = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD~1"], check=True, capture_output=True,
                           text=True).stdout.strip()
    with pytest.raises(replay.MissingHistory, match="shallow clone"):
        replay.resolve(first, shallow)


def test_an_export_holds_the_commits_lab_not_the_working_trees(tmp_path):
    repo = _repo(tmp_path / "repo")
    (repo / "lab" / "a.py").write_text("x = 'uncommitted'\n")
    out = replay.export_lab("HEAD", tmp_path / "out", repo)
    assert (out / "lab" / "a.py").read_text() == "x = 1\n"


def test_first_difference_names_the_first_step_that_parts():
    a, b = [1.0, 2.0, 3.0], [1.0, 2.5, 3.5]
    assert replay.first_difference([x.hex() for x in a], [x.hex() for x in b]) == "step 2's loss 2.0 vs 2.5"
    assert "the same" in replay.first_difference([x.hex() for x in a], [x.hex() for x in a])


def test_without_history_or_a_matching_fingerprint_the_guard_fails_in_one_line(monkeypatch, tmp_path):
    def missing(commit, repo=ROOT):
        raise replay.MissingHistory(f"commit {commit} is not in the history")

    monkeypatch.setattr(replay, "resolve", missing)
    monkeypatch.setattr(replay, "machine", lambda: {"torch": "0.0", "cpu_capability": "NONE", "machine": "z80"})
    with pytest.raises(pytest.fail.Exception) as failed:
        test_todays_code_trains_the_stored_runs_first_steps_bitwise(tmp_path)
    assert "fetch the history" in str(failed.value) and "\n" not in str(failed.value)


def test_a_fingerprint_is_this_machines_only_when_its_machine_says_so(monkeypatch):
    """Two machines that torch calls "AVX512" trained different bits (one had AMX): a fingerprint recorded
    before the CPU's features were named is only a shallow clone's fallback, never checked as this machine's."""
    here = {"torch": "2.0", "cpu_capability": "AVX512", "cpu_features": "amx_tile avx512f", "machine": "x86_64"}
    monkeypatch.setattr(replay, "machine", lambda: dict(here))
    older = {"machine": {k: v for k, v in here.items() if k != "cpu_features"}, "runs": {}}
    other = {"machine": {**here, "cpu_features": "avx512f"}, "runs": {}}
    assert replay.fingerprint_for({"fingerprints": [older, other]}, exact=True) is None
    assert replay.fingerprint_for({"fingerprints": [other, older]}, exact=False) is older
    exact = {"machine": dict(here), "runs": {}}
    assert replay.fingerprint_for({"fingerprints": [older, exact]}, exact=False) is exact
    assert replay.fingerprint_for({"fingerprints": [other]}, exact=False) is None


def test_a_damaged_fingerprint_is_one_line_naming_its_file(tmp_path):
    bad = tmp_path / "fp.json"
    bad.write_text('{"fingerprints": [{"runs": {}, "machine": {}}], "steps": 0}')
    with pytest.raises(ValueError, match="fp.json: not a replay fingerprint"):
        replay.read_fingerprint(bad)
