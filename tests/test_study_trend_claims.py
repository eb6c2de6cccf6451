"""The primary table's families beyond study 1 (issues 33, 43): FastAP's bins (10 bins above 2; within a margin of
5, 20 and 40 bins by two one-sided tests), the batch size, the gap and supp. Table 6 at each batch size, each claim
a per-seed difference tested with Holm within its family, against a by-hand computation."""
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
    o = value(bins, "FastAP", 2, "num_bins", "R@1")
    diffs["FastAP: 10 bins > 2 bins (R@1)"] = ("FastAP's bins", [100 * (ten[s] - o[s]) for s in SEEDS])
    for other in (5, 20, 40):
        o = value(bins, "FastAP", other, "num_bins", "R@1")
        diffs[f"FastAP: 10 bins ≈ {other} bins (R@1, ±1)"] = ("FastAP's bins, equivalence",
                                                               [100 * (ten[s] - o[s]) for s in SEEDS])

    def gain(b):
        road, sup = (value(records["batch_size"], m, b, "batch_size", "mAP@R") for m in ("ROADMAP", "SupAP"))
        return {s: 100 * (road[s] - sup[s]) / sup[s] for s in SEEDS}
    for large in (128, 256):
        diffs[f"gain at B = 32 > gain at B = {large}"] = ("batch size", [gain(32)[s] - gain(large)[s] for s in SEEDS])
    for b in (32, 64, 128, 256):
        road, sup = (value(records["gap"], m, b, "batch_size", "gap_heldout") for m in ("ROADMAP", "SupAP"))
        diffs[f"ROADMAP's held-out gap < SupAP's, B = {b}"] = ("decomposability gap",
                                                              [100 * (sup[s] - road[s]) / sup[s] for s in SEEDS])
        road, sup = (value(records["batch_size"], m, b, "batch_size", "mAP@R") for m in ("ROADMAP", "SupAP"))
        diffs[f"ROADMAP > SupAP, B = {b}"] = ("calibration at each batch size",
                                              [100 * (road[s] - sup[s]) for s in SEEDS])
    out = {}
    for family in {f for f, _ in diffs.values()}:
        names = [n for n, (f, _) in diffs.items() if f == family]
        equivalence = family.endswith("equivalence")
        ps = [(tost_by_hand if equivalence else lambda d: t_by_hand(d)[1])(diffs[n][1]) for n in names]
        for n, p in zip(names, holm_by_hand(ps)):
            mean = sum(diffs[n][1]) / len(SEEDS)
            out[n] = (mean, p, pc.UNRESOLVED if p >= 0.05 else pc.HOLDS if mean > 0 or equivalence else pc.CONTRADICTED)
    return out


def tost_by_hand(diffs, margin=1.0):
    """The larger p of the one-sided t-tests of mean <= -margin and mean >= margin."""
    from scipy.stats import t

    n = len(diffs)
    mean = sum(diffs) / n
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) / math.sqrt(n)
    return max(t.sf((mean + margin) / se, n - 1), t.cdf((mean - margin) / se, n - 1))


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


def test_a_flat_bins_curve_resolves_too_few_bins_and_equivalence_needs_a_tight_interval():
    """R@1 92.9 / 92.9 / 93.0 / 92.1 at 5 / 10 / 20 / 40 bins (v1's numbers): 10 bins above 2 bins is resolved; no
    superiority over 40 bins is tested (the paper claims none); equivalence within ±1 point holds where the 90 %
    interval is within the margin, and the section's verdict names both families."""
    tests = {t.claim.claim: t for t in tc.trend_tests({"bins": FLAT})}
    assert tests["FastAP: 10 bins > 2 bins (R@1)"].verdict == pc.HOLDS
    assert not any("> 40 bins" in c for c in tests)
    for k in (5, 20, 40):
        t = tests[f"FastAP: 10 bins ≈ {k} bins (R@1, ±1)"]
        inside = -1.0 < t.interval.low and t.interval.high < 1.0  # the 90 % interval within the margin
        assert inside == (t.test.p < 0.05) and t.claim.protocol == "v1" and t.claim.margin == tc.BINS_MARGIN
    verdict = analyse_bins(FLAT).verdict
    found = list(tests.values())
    assert verdict == (tc.family_headline(found, "FastAP's bins") + "; not overly sensitive: "
                       + tc.family_headline(found, "FastAP's bins, equivalence"))
    assert verdict.startswith("of the papers' 1 claim, 1 holds, 0 contradicted, 0 not resolved (paired t")
    assert "(two one-sided t-tests against ±1, Holm within the family, n = 5)" in verdict
    far = bins_records({2: 0.83, 5: 0.90, 10: 0.93, 20: 0.91, 40: 0.88})  # 2-5 points apart: never equivalent
    assert "not overly sensitive: of the papers' 3 claims, 0 hold, 0 contradicted, 3 not resolved" in \
        analyse_bins(far).verdict
    close = bins_records({2: 0.83, 5: 0.9301, 10: 0.93, 20: 0.9302, 40: 0.9299})
    assert "not overly sensitive: of the papers' 3 claims, 3 hold" in analyse_bins(close).verdict


def test_the_tosts_size_at_the_margin_is_at_most_005():
    """Declaring equivalence when the true difference is the margin, simulated with another seed than the page's."""
    from lab.studies.reporting.error_rates import tost_error

    for n in (3, 5):
        err = tost_error(n, seed=11)
        assert err.rate <= 0.05 + 3 * err.se, err


def test_a_study_without_records_tests_none_of_its_claims():
    assert {t.claim.family for t in tc.trend_tests({"bins": FLAT, "gap": []})} == {"FastAP's bins",
                                                                                "FastAP's bins, equivalence"}
    assert tc.trend_section([]) == ""
