"""Protocol v2's statistics (lab.studies.reporting.stats): paired 95 % intervals against scipy's, Holm's adjustment
against its definition written as a loop and its properties, the verdict rule for adjacent pairs in the
paper's order, and ranks per seed."""
from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats as sps

from lab.studies.reporting.stats import (REVERSED, RESOLVED, UNRESOLVED, adjacent_pairs, adjacent_verdict, holm,
                               paired_interval, seed_ranks)


@pytest.mark.parametrize("seed", range(5))
def test_paired_interval_is_scipys(seed):
    rng = random.Random(seed)
    a = [rng.gauss(0.6, 0.02) for _ in range(5)]
    b = [x - rng.gauss(0.005, 0.01) for x in a]
    got = paired_interval([x - y for x, y in zip(a, b)])
    want = sps.ttest_rel(a, b).confidence_interval(0.95)
    assert math.isclose(got.low, want.low, rel_tol=1e-9) and math.isclose(got.high, want.high, rel_tol=1e-9)
    assert got.low < got.mean < got.high and got.n == 5


def test_paired_interval_of_one_pair_has_no_bounds():
    one = paired_interval([0.3])
    assert one.mean == 0.3 and math.isnan(one.low) and math.isnan(one.high)


def holm_by_definition(pvalues):
    """Holm (1979): with p_(1) <= ... <= p_(m), the adjusted p_(i) = max over j <= i of min(1, (m - j + 1) p_(j))."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    for pos, i in enumerate(order):
        out[i] = max(min(1.0, (m - j) * pvalues[order[j]]) for j in range(pos + 1))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_holm_is_its_definition_and_bounded(seed):
    rng = random.Random(seed)
    p = [rng.random() ** 3 for _ in range(rng.randint(1, 7))]
    adjusted = holm(p)
    assert adjusted == pytest.approx(holm_by_definition(p))
    m = len(p)
    for raw, adj in zip(p, adjusted):
        assert raw <= adj <= min(1.0, m * raw) + 1e-12  # between the raw p and Bonferroni
    for (r1, a1), (r2, a2) in itertools.combinations(zip(p, adjusted), 2):
        assert (a1 <= a2) if r1 <= r2 else (a2 <= a1)  # the order of the raw p-values is kept
    if m == 1:
        assert adjusted == p


def test_holm_leaves_untested_comparisons_out():
    assert holm([0.01, math.nan, 0.02])[0] == pytest.approx(0.02)  # m = 2, not 3
    assert math.isnan(holm([0.01, math.nan])[1])


def test_adjacent_verdict_rule():
    assert adjacent_verdict(+0.01, 0.01) == RESOLVED
    assert adjacent_verdict(-0.01, 0.01) == REVERSED
    assert adjacent_verdict(+0.01, 0.05) == UNRESOLVED  # the threshold itself is not below 0.05
    assert adjacent_verdict(+0.01, math.nan) == UNRESOLVED


def records(means, seeds=5, spread=0.002, seed=0):
    """Fake study-1 records: method -> mean mAP@R, a shared per-seed offset plus small noise."""
    rng = random.Random(seed)
    offsets = [rng.gauss(0, 0.01) for _ in range(seeds)]
    return [{"method": m, "seed": s, "mAP@R": mu + offsets[s] + rng.gauss(0, spread)}
            for m, mu in means.items() for s in range(seeds)]


def test_adjacent_pairs_follow_the_order_and_correct_over_the_family():
    recs = records({"A": 0.50, "B": 0.52, "C": 0.52, "D": 0.49})
    rows = adjacent_pairs(recs, ["A", "B", "C", "D"], "mAP@R")
    assert [(r["worse"], r["better"]) for r in rows] == [("A", "B"), ("B", "C"), ("C", "D")]
    assert [r["verdict"] for r in rows] == [RESOLVED, UNRESOLVED, REVERSED]
    for r in rows:
        values = {m: [x["mAP@R"] for x in recs if x["method"] == m] for m in (r["better"], r["worse"])}
        assert r["test"].p == pytest.approx(sps.ttest_rel(values[r["better"]], values[r["worse"]]).pvalue)
        assert r["p_holm"] >= r["test"].p
    assert [r["p_holm"] for r in rows] == pytest.approx(holm([r["test"].p for r in rows]))


def test_seed_ranks():
    recs = records({"A": 0.50, "B": 0.60, "C": 0.55}, seeds=3, spread=0.0)
    recs.append({"method": "A", "seed": 9, "mAP@R": 1.0})  # a seed without B and C is left out
    assert seed_ranks(recs, ["A", "B", "C"], "mAP@R") == {"A": [3, 3, 3], "B": [1, 1, 1], "C": [2, 2, 2]}
