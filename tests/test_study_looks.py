"""The power plan's looks on study 1's stored runs plus synthetic later seeds (issue 33): each look re-tests
only the claims still open, on seeds 0..n-1, Holm within each family over those claims, at α = 0.025; a
partial look decides nothing. Checked against a by-hand t and Holm on the raw numbers."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from lab.studies.reporting import looks as lk
from lab.studies.reporting import paper_claims as pc
from lab.studies.reporting.ordering import analyse_methods_v2
from lab.studies.reporting.study_sections import study_records
from lab.studies.running.results_file import load_results

from .test_study_claims import holm_by_hand, t_by_hand

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "results" / "v2" / "methods.json"
POWER = ("ROADMAP", "SoftBinAP", "SupAP", "SmoothAP")  # the losses of the claims open at n = 5
# mAP@R of the synthetic seeds 5-14: SupAP far above SmoothAP (that claim resolves at n = 10), the rest close
LATER = {"ROADMAP": 0.650, "SoftBinAP": 0.652, "SupAP": 0.640, "SmoothAP": 0.600}
WIGGLE = (0.004, -0.006, 0.002, -0.003, 0.005)

pytestmark = pytest.mark.skipif(not STORED.exists(), reason="no raw results")


def with_seeds(tmp_path: Path, seeds: range, losses=POWER, count: int | None = None) -> Path:
    """results/v2/methods.json's seeds 0-4 copied, plus ``count`` (default all) synthetic runs of ``seeds`` x
    ``losses``, made from each loss's seed-0 record with its config's seed changed (so the record's key is that
    run's)."""
    folder = tmp_path / "v2"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "methods.json"
    fresh = not path.exists()
    if fresh:
        shutil.copy(STORED, path)
    data = json.loads(path.read_text())
    if fresh:  # the stored seeds 0-4 only: the power runs that have landed since are replaced by synthetic ones
        data["runs"] = {k: r for k, r in data["runs"].items() if r["seed"] < 5}
    base = {r["method"]: r for r in data["runs"].values() if r["seed"] == 0}
    new = [(m, s) for s in seeds for m in losses]
    for m, s in new[:count]:
        rec = {k: v for k, v in base[m].items() if k != "trained_config"}
        value = LATER[m] + WIGGLE[s % 5] * (1 if m in ("ROADMAP", "SupAP") else -1)
        data["runs"][f"{m}-{s}"] = {**rec, "seed": s, "config": {**rec["config"], "seed": s}, "mAP@R": value}
    path.write_text(json.dumps(data))
    return path


def records(path: Path) -> list[dict]:
    return study_records("methods", load_results(path), False, 15, "v2")


def by_hand(recs: list[dict], open_: list[pc.Claim], n: int, alpha: float) -> dict[str, tuple[float, str]]:
    """{claim: (Holm p, verdict)} of a look at n seeds over the claims ``open_``, from the formulas."""
    value = {(r["method"], r["seed"]): r["mAP@R"] for r in recs}
    ps = {}
    for c in open_:
        diffs = [value[(c.better, s)] - value[(c.worse, s)] for s in range(n)]
        ps[c] = (t_by_hand(diffs)[1], sum(diffs))
    out = {}
    for family in {c.family for c in open_}:
        mine = [c for c in open_ if c.family == family]
        for c, adjusted in zip(mine, holm_by_hand([ps[c][0] for c in mine])):
            verdict = pc.UNRESOLVED if adjusted >= alpha else (pc.HOLDS if ps[c][1] > 0 else pc.CONTRADICTED)
            out[f"{c.better} > {c.worse}"] = (adjusted, verdict)
    return out


def label(t: pc.ClaimTest) -> str:
    return f"{t.claim.better} > {t.claim.worse}"


def test_before_any_later_seed_every_claim_keeps_its_n_5_verdict_and_the_look_waits(tmp_path):
    recs = records(with_seeds(tmp_path, range(0)))
    first = pc.claim_tests(recs)
    statuses = lk.claim_status(recs)
    assert [s.test for s in statuses] == first
    open_ = [label(t) for t in first if t.verdict == pc.UNRESOLVED]
    assert open_ and {m for c in open_ for m in c.split(" > ")} == set(POWER)
    for s in statuses:
        assert s.look == ("n = 10: provisional, 0 of 20 runs done" if label(s.test) in open_ else "n = 5, final")
    assert lk.looks_section(recs) == ""  # no run of the look yet: nothing to show beyond n = 5's table


def test_a_partial_look_shows_its_numbers_but_changes_no_verdict(tmp_path):
    recs = records(with_seeds(tmp_path, range(5, 10), count=7))  # 7 of the 20 runs of the look at n = 10
    statuses = lk.claim_status(recs)
    first = pc.claim_tests([r for r in recs if r["seed"] < 5])
    assert [s.test for s in statuses] == first  # the verdicts, p and n are n = 5's
    assert {s.look for s in statuses if s.test.verdict == pc.UNRESOLVED} == {"n = 10: provisional, 7 of 20 runs done"}
    section = analyse_methods_v2([r for r in recs if r["seed"] < 5], recs)
    rows = [line for line in section.body.splitlines() if "| n = 10: provisional, 7 of 20 runs done | " in line]
    looks_rows = [line for line in rows if line.endswith("| — | — | 0.025 | — (provisional) |")]
    assert len(looks_rows) == 3 and len(rows) == 6  # the looks table, and the primary table's open claims
    assert section.verdict.endswith("n = 5; the look at n = 10: provisional, 7 of 20 runs done)")
    # the descriptive table and the measured line read seeds 0-4 only, whatever later seeds exist
    assert "(seeds 0-4, n = 5, whatever later seeds" in section.body


def test_a_complete_look_at_n_10_is_the_plans_rule_by_hand(tmp_path):
    recs = records(with_seeds(tmp_path, range(5, 10)))
    first = pc.claim_tests([r for r in recs if r["seed"] < 5])
    open_ = [t.claim for t in first if t.verdict == pc.UNRESOLVED]
    expected = by_hand(recs, open_, 10, 0.025)
    assert {v for _, v in expected.values()} >= {pc.HOLDS, pc.UNRESOLVED}  # both outcomes are exercised
    statuses = {label(s.test): s for s in lk.claim_status(recs)}
    still = [c for c in open_ if expected[f"{c.better} > {c.worse}"][1] == pc.UNRESOLVED]
    waiting = f"n = 15: provisional, 0 of {5 * len({m for c in still for m in (c.better, c.worse)})} runs done"
    for t in first:
        s = statuses[label(t)]
        if t.claim not in open_:  # resolved at n = 5: its verdict and n stay
            assert s.test == t and s.look == "n = 5, final"
            continue
        p_holm, verdict = expected[label(t)]
        assert s.test.test.n == 10 and s.test.verdict == verdict and math.isclose(s.test.p_holm, p_holm, rel_tol=1e-9)
        assert s.look == (waiting if verdict == pc.UNRESOLVED else "n = 10, final")


def test_the_last_look_at_n_15_tests_only_the_claims_open_after_n_10(tmp_path):
    path = with_seeds(tmp_path, range(5, 10))
    recs = records(path)
    open_10 = [t.claim for t in lk.looks(recs)[1].tests if t.verdict == pc.UNRESOLVED]
    losses = tuple(dict.fromkeys(m for c in open_10 for m in (c.better, c.worse)))
    recs = records(with_seeds(tmp_path, range(10, 15), losses))
    last = lk.looks(recs)[-1]
    assert last.n == 15 and last.complete and [t.claim for t in last.tests] == open_10
    expected = by_hand(recs, open_10, 15, 0.025)
    for t in last.tests:
        assert t.test.n == 15 and (t.p_holm, t.verdict) == pytest.approx(expected[label(t)])
    assert lk.pending_look(recs) is None  # no look after n = 15, whatever its verdicts
    resolved_10 = {label(t) for t in lk.looks(recs)[1].tests if t.verdict != pc.UNRESOLVED}
    assert all(s.test.test.n == 10 for s in lk.claim_status(recs) if label(s.test) in resolved_10)


def test_the_notebooks_and_the_dashboard_read_the_claims_the_looks_decide(tmp_path):
    from lab.studies.reporting.verdicts import claims_rows, study_verdict

    recs = records(with_seeds(tmp_path, range(5, 10)))
    statuses = lk.claim_status(recs)
    rows = claims_rows("methods", tmp_path)
    assert [(r["claim"], r["n"], r["verdict"]) for r in rows] == [
        (label(s.test), s.test.test.n, s.test.verdict) for s in statuses]
    assert {r["n"] for r in rows} == {5, 10}
    assert f"**Verdict: {analyse_methods_v2([r for r in recs if r['seed'] < 5], recs).verdict}.**" in \
        study_verdict("methods", tmp_path)


def test_the_readme_headline_names_the_n_the_looks_decided_and_the_look_pending(tmp_path):
    from lab.studies.reporting.headline import study1

    partial = records(with_seeds(tmp_path / "a", range(5, 10), count=7))
    first = [r for r in partial if r["seed"] < 5]
    said = study1(first, "v2", partial)
    assert "Holm within each family of claims, n = 5; the power plan's look at n = 10, written before its runs, is " \
           "not complete yet)" in said and pc.claims_headline(lk.final_tests(partial)) in said
    done = records(with_seeds(tmp_path / "b", range(5, 10)))
    said = study1(first, "v2", done)
    assert pc.claims_headline(lk.final_tests(done)) in said and "n = 5-10; the power plan's look at n = 15" in said
