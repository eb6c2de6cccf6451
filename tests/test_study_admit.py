"""Runs trained elsewhere join a results file only as the planned runs (lab/studies/running/admit.py): each check
fails on a record made wrong in that one respect, and a passing file is merged by the locked writer."""
from __future__ import annotations

import copy
import json
import math
import subprocess
from pathlib import Path

import pytest

from lab.studies.running import admit as ad
from lab.studies.running.results_file import load_results, save_results
from lab.studies.running.spec import record_key, study_runs

from ._history import require_history

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "results" / "v2" / "methods.json"
pytestmark = pytest.mark.skipif(not STORED.exists(), reason="no raw results")


def planned():
    return study_runs("methods", False, 15, "v2")


def a_new_run(seed: int = 12) -> dict:
    """ROADMAP seed 5's stored record (trained at 00e5c4c, 1 thread, cpu) made into the planned run of ``seed``."""
    require_history("00e5c4c")
    data = load_results(STORED)
    rec = copy.deepcopy(next(r for r in data["runs"].values() if r["method"] == "ROADMAP" and r["seed"] == 5))
    spec = next(s for s in study_runs("methods", False, 15, "v2") if (s.method, s.seed) == ("ROADMAP", seed))
    rec["seed"], rec["config"], rec["trained_config"]["seed"] = seed, copy.deepcopy(spec.config), seed
    rec["key"] = record_key(rec)
    assert rec["key"] == spec.key
    return rec


def stored_without(*recs: dict) -> dict:
    """The stored results without the runs ``recs`` stand in for: once the look trains a seed for real, its
    stored run would make the made-up one "already held" (tests of that: test_a_run_already_present_is_refused)."""
    data = load_results(STORED)
    for rec in recs:
        data["runs"].pop(rec["key"], None)
    return data


def store_copy(into: Path, *recs: dict) -> int:
    """Write the stored results without ``recs``' runs to ``into``; returns its number of runs."""
    data = stored_without(*recs)
    save_results(into, data)
    return len(data["runs"])


def test_the_planned_run_passes():
    rec = a_new_run()
    assert ad.problems(rec, planned(), list(stored_without(rec)["runs"])) == []


def spoil(kind: str, rec: dict) -> dict:
    rec = copy.deepcopy(rec)
    if kind == "key":
        rec["key"] = "0" * 16
    elif kind == "config":
        rec["config"]["lr"] = rec["trained_config"]["lr"] = 0.002
        rec["key"] = record_key(rec)
    elif kind == "unplanned":
        rec["config"]["seed"] = rec["trained_config"]["seed"] = rec["seed"] = 40
        rec["key"] = record_key(rec)
    elif kind == "commit":
        rec["provenance"]["commit"] = "f" * 40
    elif kind == "dirty":
        rec["provenance"]["dirty"] = True
    elif kind == "threads":
        rec["threads"] = rec["provenance"]["threads"] = 2
    elif kind == "device":
        rec["device"] = "cuda"
    elif kind == "metric":
        rec["mAP@R"] = math.nan
    return rec


@pytest.mark.parametrize("kind, says", [
    ("key", "carries key 0000000000000000"), ("config", "is no planned run"), ("unplanned", "is no planned run"),
    ("commit", "not in"), ("dirty", "dirty is True"), ("threads", "threads ['2']"),
    ("device", "device ['cpu', 'cuda']"), ("metric", "metrics not finite: mAP@R")])
def test_each_check_refuses_the_record_it_is_for(kind, says):
    found = ad.problems(spoil(kind, a_new_run()), planned(), [])
    assert found and any(says in p for p in found), found


def test_a_config_that_gives_a_planned_key_but_differs_is_refused():
    rec = a_new_run()
    rec["config"]["eval_every"] = 250  # not keyed (how often it evaluates), but not the planned config
    assert any("config differs from the planned run's in eval_every" in p for p in ad.problems(rec, planned(), []))


def test_a_run_already_present_is_refused():
    data = load_results(STORED)
    rec = next(r for r in data["runs"].values() if r["method"] == "SupAP" and r["seed"] == 5)
    assert any("already holds run" in p for p in ad.problems(rec, planned(), list(data["runs"])))


def test_a_commit_off_the_analysis_history_is_refused(tmp_path):
    """In a repository of two branches, the other branch's commit exists but is not an ancestor of HEAD."""
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    git("init", "-q", "-b", "main")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "base")
    git("checkout", "-q", "-b", "other")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "elsewhere")
    off = git("rev-parse", "HEAD")
    git("checkout", "-q", "main")
    assert not ad.is_ancestor(off, "HEAD", tmp_path) and ad.is_ancestor(git("rev-parse", "HEAD"), "HEAD", tmp_path)
    rec = a_new_run()
    rec["provenance"]["commit"] = off
    assert any("is not an ancestor of the analysis code" in p for p in ad.problems(rec, planned(), [], tmp_path))


def test_admit_merges_a_passing_file_and_writes_nothing_on_a_failing_one(tmp_path):
    into = tmp_path / "methods.json"
    good, bad = a_new_run(12), spoil("dirty", a_new_run(13))
    stored = store_copy(into, good, bad)
    before = into.read_text()
    part = {"study": "methods", "mode": "full", "sessions": [], "runs": {good["key"]: good, bad["key"]: bad}}
    (tmp_path / "part.json").write_text(json.dumps(part))
    one_line = r"not admitted: ROADMAP seed 13: dirty is True \(uncommitted changes to lab/ or unknown\)$"
    with pytest.raises(ValueError, match=one_line):
        ad.admit(tmp_path / "part.json", into)
    assert into.read_text() == before
    part["runs"] = {good["key"]: good}
    (tmp_path / "part.json").write_text(json.dumps(part))
    assert ad.admit(tmp_path / "part.json", into) == [good["key"]]
    merged = load_results(into)["runs"]
    assert good["key"] in merged and len(merged) == stored + 1


def test_admit_brings_the_session_lines_its_records_name_and_no_other(tmp_path):
    """A record's --jobs comes from the session line its provenance names: admitted without it, the page's
    compute paragraph counted the run as "of an unknown --jobs" (it did before admit carried the line)."""
    from lab.studies.reporting.compute import run_jobs
    into = tmp_path / "methods.json"
    good = a_new_run(12)
    store_copy(into, good)
    good["provenance"]["session"] = "2026-11-29T09:09:31-1-aaaaaa"
    theirs = {"id": good["provenance"]["session"], "jobs": 2, "threads": 1, "trained": 1, "command": "x",
              "finished": "2026-11-29 11:15:40", "elapsed_seconds": 1.0, "stopped": False}
    other = dict(theirs, id="2026-11-29T11:58:19-2-bbbbbb", jobs=7)
    part = {"study": "methods", "mode": "full", "sessions": [theirs, other], "runs": {good["key"]: good}}
    (tmp_path / "part.json").write_text(json.dumps(part))
    ad.admit(tmp_path / "part.json", into)
    merged = load_results(into)
    ids = [line.get("id") for line in merged["sessions"]]
    assert theirs["id"] in ids and other["id"] not in ids
    assert run_jobs({"methods": merged})[good["key"]] == 2
