"""Bounds on the decomposability gap (ROADMAP Eq. 8-9) and the toys of Fig. 1b / supp. Fig. 9-10."""
import random

import pytest
import torch

from lab.metrics import (calibration_counts, dg_upper_bound, dg_upper_bound_calibrated, juxtaposed_batches,
                         query_gap)
from lab.viz.decomposability_toys import bound_is_tighter, fig1b_toy, gap_summary, plot_calibration_bounds, toy_batches


def interleavings(counts):
    """Every sequence of batch ids with counts[b] copies of b (multiset permutations)."""
    if not any(counts):
        yield []
        return
    for b, c in enumerate(counts):
        if c:
            rest = list(counts)
            rest[b] -= 1
            for tail in interleavings(rest):
                yield [b] + tail


def ap_of(flags):
    hits, total = 0, 0.0
    for rank, is_pos in enumerate(flags, start=1):
        if is_pos:
            hits += 1
            total += hits / rank
    return total / hits


def worst_gap(batches, valid=lambda seq: True):
    """Largest 1 - AP over every global ranking that keeps each batch's own order (AP_b = 1).

    batches: per batch, its items top to bottom as (is_positive, kind) pairs.
    """
    best = 0.0
    for ids in interleavings([len(b) for b in batches]):
        cursor = [0] * len(batches)
        seq = []
        for b in ids:
            seq.append(batches[b][cursor[b]])
            cursor[b] += 1
        if valid(seq):
            best = max(best, 1 - ap_of([is_pos for is_pos, _ in seq]))
    return best


@pytest.mark.parametrize("num_pos, num_neg",
                         [([2, 2], [2, 2]), ([3, 1, 2], [1, 4, 2]), ([1], [5]), ([4, 4, 4], [0, 3, 9])])
def test_eq8_is_attained_by_the_juxtaposed_batches(num_pos, num_neg):
    scores, targets, batch_ids = juxtaposed_batches(num_pos, num_neg)
    gap = query_gap(scores, targets, batch_ids)  # ranks the items for real (lab.metrics.average_precision)
    assert gap == pytest.approx(dg_upper_bound(num_pos, num_neg, order="given"), abs=1e-12)
    assert dg_upper_bound(num_pos, num_neg) >= gap - 1e-12  # the worst order is at least as bad


def test_eq8_on_the_toy_of_supplementary_fig_9():
    # 2 batches of 2+/2-: positives at global ranks 1, 2, 5, 6 -> AP = (1 + 1 + 3/5 + 4/6) / 4.
    assert dg_upper_bound([2, 2], [2, 2]) == pytest.approx(1 - (2 + 3 / 5 + 4 / 6) / 4)
    r = gap_summary(*fig1b_toy(calibrated=False))
    assert r["batch_ap"] == [1.0, 1.0] and r["gap"] == pytest.approx(dg_upper_bound([2, 2], [2, 2]))
    r = gap_summary(*fig1b_toy(calibrated=True))
    assert r["batch_ap"] == [1.0, 1.0] and r["global_ap"] == 1.0 and r["gap"] == 0.0 and r["eq9"] == 0.0


@pytest.mark.parametrize("comps",
                         [[(2, 2), (2, 2)], [(1, 3), (2, 0), (1, 1)], [(2, 1), (1, 3)], [(1, 2), (1, 2), (1, 2)]])
def test_eq8_worst_order_is_the_worst_of_all_rankings(comps):
    batches = [[(True, "p")] * p + [(False, "n")] * n for p, n in comps]
    bound = dg_upper_bound([p for p, _ in comps], [n for _, n in comps])
    assert worst_gap(batches) == pytest.approx(bound, abs=1e-12)  # tight: a juxtaposition attains it


def test_given_order_is_not_a_bound_for_unequal_batches():
    # Batch 1: 1 positive over 3 negatives, batch 2: 3 positives over 1 negative. Stacking
    # batch 2 first is the worse global ranking, which "given" (the formula as printed) misses.
    assert dg_upper_bound([3, 1], [1, 3], order="given") < dg_upper_bound([1, 3], [3, 1], order="given")
    assert dg_upper_bound([3, 1], [1, 3]) == dg_upper_bound([1, 3], [3, 1]) == pytest.approx(
        max(dg_upper_bound([3, 1], [1, 3], order="given"), dg_upper_bound([1, 3], [3, 1], order="given")))


CALIBRATED_COMPS = [[(1, 1, 1, 1), (2, 0, 0, 1)], [(0, 2, 1, 1), (1, 0, 0, 2)], [(2, 1, 1, 0), (1, 1, 0, 2)],
                    [(1, 0, 1, 1), (1, 1, 1, 0), (0, 1, 0, 1)]]


@pytest.mark.parametrize("comps", CALIBRATED_COMPS)
def test_eq9_bounds_every_ranking_the_thresholds_allow(comps):
    """(G+, E+, G-, E-) per batch. Within a batch: calibrated positives, other positives, negatives
    above beta, negatives below beta. Globally, scores >= alpha > beta separate the kinds."""
    batches = [[(True, "G+")] * gp + [(True, "E+")] * ep + [(False, "E-")] * en + [(False, "G-")] * gn
               for gp, ep, gn, en in comps]

    def valid(seq):
        where = {k: [i for i, (_, kind) in enumerate(seq) if kind == k] for k in ("G+", "E+", "E-", "G-")}
        last_gp, last_en = max(where["G+"], default=-1), max(where["E-"], default=-1)
        return (last_gp < min(where["E+"] + where["G-"], default=len(seq))
                and last_en < min(where["G-"], default=len(seq)))

    bound = dg_upper_bound_calibrated(*[list(c) for c in zip(*comps)])
    assert worst_gap(batches, valid) <= bound + 1e-12


def test_eq9_is_below_eq8_under_the_stated_condition():
    rng = random.Random(0)
    checked = 0
    for _ in range(400):
        k = rng.randint(1, 4)
        counts = {"pos_above_alpha": [rng.randint(0, 4) for _ in range(k)],
                  "pos_below_alpha": [rng.randint(0, 3) for _ in range(k)],
                  "neg_below_beta": [rng.randint(0, 5) for _ in range(k)],
                  "neg_above_beta": [rng.randint(0, 5) for _ in range(k)]}
        pos = [a + b for a, b in zip(counts["pos_above_alpha"], counts["pos_below_alpha"])]
        if 0 in pos or not bound_is_tighter(counts):
            continue
        neg = [a + b for a, b in zip(counts["neg_below_beta"], counts["neg_above_beta"])]
        assert dg_upper_bound_calibrated(**counts) <= dg_upper_bound(pos, neg) + 1e-12
        checked += 1
    assert checked > 50


def test_eq9_as_printed_can_exceed_eq8_when_negatives_violate_most():
    # Batch 1: both positives below alpha and both negatives above beta; batch 2: positives calibrated.
    counts = dict(pos_above_alpha=[0, 2], pos_below_alpha=[2, 0], neg_below_beta=[0, 0], neg_above_beta=[2, 2])
    assert not bound_is_tighter(counts)
    assert dg_upper_bound_calibrated(**counts) > dg_upper_bound([2, 2], [2, 2])


def test_perfect_calibration_closes_the_gap_bound():
    assert dg_upper_bound_calibrated([3, 3, 3], [0, 0, 0], [5, 2, 7], [0, 0, 0]) == 0.0
    assert dg_upper_bound([3, 3, 3], [5, 2, 7]) > 0.3


@pytest.mark.parametrize("seed", range(12))
def test_both_bounds_hold_on_random_calibrated_batches(seed):
    rng = random.Random(seed)
    scores, targets, ids = toy_batches(rng.randint(2, 5), rng.randint(1, 4), rng.randint(1, 6), rng.uniform(0, 0.5),
                                       seed)
    alpha = rng.uniform(0.55, 0.95)
    beta = rng.uniform(0.2, alpha - 0.01)
    r = gap_summary(scores, targets, ids, alpha, beta)
    assert r["batch_ap"] == [1.0] * len(r["batch_ap"])  # the bounds' assumption holds
    assert r["gap"] == pytest.approx(1 - r["global_ap"])
    assert r["gap"] <= r["eq9"] + 1e-12 and r["gap"] <= r["eq8"] + 1e-12


def test_calibration_counts_on_the_toy():
    counts = calibration_counts(*fig1b_toy(calibrated=False), alpha=0.9, beta=0.6)
    assert counts == {"pos_above_alpha": [2, 0], "pos_below_alpha": [0, 2], "neg_below_beta": [0, 2],
                      "neg_above_beta": [2, 0]}


def test_calibration_figure_reports_the_numbers():
    fig = plot_calibration_bounds(shift=0.4, alpha=0.6, beta=0.5)
    bars = [t for t in fig.data if t.type == "bar"][0]
    r = gap_summary(*toy_batches(shift=0.4), 0.6, 0.5)
    assert list(bars.y) == pytest.approx([r["gap"], r["eq9"], r["eq8"]])
    assert 0 < r["gap"] < r["eq9"] < r["eq8"]  # the sliders' defaults show the refinement


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="one length"):
        dg_upper_bound([1, 2], [1])
    with pytest.raises(ValueError, match="at least one positive"):
        dg_upper_bound([0, 0], [1, 1])
    with pytest.raises(ValueError, match="order"):
        dg_upper_bound([1], [1], order="best")
    with pytest.raises(ValueError, match="1-D"):
        query_gap(torch.zeros(2, 2), torch.ones(2, 2, dtype=torch.bool), torch.zeros(2, 2))


def test_juxtaposed_figure_draws_one_band_per_batch_and_the_ranked_gap():
    from lab.viz.decomposability_toys import plot_juxtaposed

    fig = plot_juxtaposed(num_batches=4, num_pos=2, num_neg=3)
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [(b.x0, b.x1) for b in bands] == [(0.5, 5.5), (5.5, 10.5), (10.5, 15.5), (15.5, 20.5)]
    positives = fig.data[0]
    assert list(positives.x) == [1, 2, 6, 7, 11, 12, 16, 17]  # each batch's positives first
    bound = dg_upper_bound([2] * 4, [3] * 4)
    assert f"{bound:.3f}" in fig.layout.annotations[0].text
