"""The primary table's families beyond study 1 (issue 33): FastAP's bins, the batch size and the gap, each
claim a per-seed difference tested by t and Holm within its family, against a by-hand computation; a flat bins
curve resolves 10 bins above 2 but not above 40 (the old rule accepted any best mean in [5, 20])."""
from __future__ import annotations

import math

import pytest

from lab.studies.reporting import paper_claims as pc
from lab.studies.reporting import trend_claims as tc
from lab.studies.reporting.sweeps import analyse_bins

from .test_study_claims import holm_by_hand, t_by_hand

SEEDS = range(5)
NOISE = (0.003, -0.002, 0.004, -0.004, 0.001)
SCALE = {2: 1.0, 5: 2.0, 10: 3.0, 20: 1.5, 40: 0.5}  # per bin count: differences that vary by seed


def bins_records(r1: dict[int, float]) -> list[dict]:
    return [{"method": "FastAP", "seed": s, "R@1": v + NOISE[s] * SCALE[b], "mAP@R": v, "params": {"num_bins": b}}
            for b, v in r1.items() for s in SEEDS]


def batch_records(road: dict[int, float], sup: dict[int, float]) -> list[dict]:
    """mAP@R and held-out gap of ROADMAP and SupAP per batch size, with per-seed noise."""
    out = []
    for b in road:
        for s in SEEDS:
            for m, v in (("ROADMAP", road[b]), ("SupAP", sup[b])):
                wiggle = NOISE[(s + b) % 5] * (2 if m == "ROADMAP" else 1)
                out.append({"method": m, "seed": s, "mAP@R": v + wiggle, "gap_heldout": 0.3 - v / 3 + wiggle,
                            "params": {"batch_size": b}, "batch_size": b})
    return out


FLAT = bins_records({2: 0.83, 5: 0.929, 10: 0.929, 20: 0.930, 40: 0.921})
BATCH = batch_records({32: 0.58, 64: 0.63, 128: 0.645, 256: 0.667}, {32: 0.54, 64: 0.583, 128: 0.626, 256: 0.652})


def by_hand(records: dict[str, list[dict]]) -> dict[str, tuple[float, float, str]]:
    """{claim: (mean difference, Holm p, verdict)} from the formulas, family by family."""
    def value(recs, method, key, field, metric):
        return {r["seed"]: r[metric] for r in recs if r["method"] == method and r["params"][field] == key}

    diffs = {}
    bins = records["bins"]
    ten = value(bins, "FastAP", 10, "num_bins", "R@1")
    for other in (2, 40):
        o = value(bins, "FastAP", other, "num_bins", "R@1")
        diffs[f"FastAP: 10 bins > {other} bins (R@1)"] = ("FastAP's bins", [100 * (ten[s] - o[s]) for s in SEEDS])

    def gain(b):
        road, sup = (value(records["batch_size"], m, b, "batch_size", "mAP@R") for m in ("ROADMAP", "SupAP"))
        return {s: 100 * (road[s] - sup[s]) / sup[s] for s in SEEDS}
    for large in (128, 256):
        diffs[f"gain at B = 32 > gain at B = {large}"] = ("batch size", [gain(32)[s] - gain(large)[s] for s in SEEDS])
    for b in (32, 64, 128, 256):
        road, sup = (value(records["gap"], m, b, "batch_size", "gap_heldout") for m in ("ROADMAP", "SupAP"))
        diffs[f"ROADMAP's held-out gap < SupAP's, B = {b}"] = ("decomposability gap",
                                                              [100 * (sup[s] - road[s]) / sup[s] for s in SEEDS])
    out = {}
    for family in {f for f, _ in diffs.values()}:
        names = [n for n, (f, _) in diffs.items() if f == family]
        ps = [t_by_hand(diffs[n][1])[1] for n in names]
        for n, p in zip(names, holm_by_hand(ps)):
            mean = sum(diffs[n][1]) / len(SEEDS)
            out[n] = (mean, p, pc.UNRESOLVED if p >= 0.05 else pc.HOLDS if mean > 0 else pc.CONTRADICTED)
    return out


def test_each_claim_is_its_per_seed_difference_t_tested_with_holm_in_its_family_by_hand():
    records = {"bins": FLAT, "batch_size": BATCH, "gap": BATCH}
    tests = tc.trend_tests(records)
    expected = by_hand(records)
    assert [t.claim.claim for t in tests] == [c.claim for c in tc.CLAIMS]
    assert set(expected) == {c.claim for c in tc.CLAIMS}
    for t in tests:
        mean, p_holm, verdict = expected[t.claim.claim]
        assert t.interval.mean == pytest.approx(mean) and t.test.n == 5
        assert math.isclose(t.p_holm, p_holm, rel_tol=1e-9) and t.verdict == verdict
    assert {t.verdict for t in tests} >= {pc.HOLDS, pc.UNRESOLVED}
    assert {t.claim.family for t in tests} == set(tc.FAMILIES)
    text = tc.trend_section(tests)
    for row in tc.trend_rows(tests):
        assert "| " + " | ".join(row) + " |" in text


def test_a_flat_bins_curve_resolves_too_few_bins_but_not_a_peak():
    """R@1 92.9 / 92.9 / 93.0 / 92.1 at 5 / 10 / 20 / 40 bins (v1's numbers): the best mean in [5, 20] is no
    claim; 10 bins above 2 bins is resolved, above 40 is not, and the section's verdict says so."""
    tests = {t.claim.claim: t for t in tc.trend_tests({"bins": FLAT})}
    assert tests["FastAP: 10 bins > 2 bins (R@1)"].verdict == pc.HOLDS
    assert tests["FastAP: 10 bins > 40 bins (R@1)"].verdict == pc.UNRESOLVED
    verdict = analyse_bins(FLAT).verdict
    assert verdict == tc.family_headline(list(tests.values()), "FastAP's bins")
    assert verdict.startswith("of the papers' 2 claims, 1 hold, 0 contradicted, 1 not resolved")
    peaked = bins_records({2: 0.83, 5: 0.90, 10: 0.93, 20: 0.91, 40: 0.88})
    assert analyse_bins(peaked).verdict.startswith("of the papers' 2 claims, 2 hold")


def test_a_study_without_records_tests_none_of_its_claims():
    assert {t.claim.family for t in tc.trend_tests({"bins": FLAT, "gap": []})} == {"FastAP's bins"}
    assert tc.trend_section([]) == ""
