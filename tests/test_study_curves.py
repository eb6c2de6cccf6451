"""Study 1's learning curves per loss (issue 33, item 6), from synthetic runs that carry a ``curve``: the
mean over seeds by hand, the plateau by the pilot's rule, which losses the page says have none, the figure."""
from __future__ import annotations

import pytest

from lab.studies import curves as cv
from lab.studies.spec import METHODS, V2_STEPS, plateau_step


def run(method: str, seed: int, values: list[float], every: int = 500) -> dict:
    curve = [{"step": every * i, "mAP@R": v, "R@1": v + 0.2, "num_queries": 10} for i, v in enumerate(values)]
    return {"method": method, "seed": seed, "curve": curve, "curve_every": every, "mAP@R": values[-1]}


RECORDS = [run("FastAP", 5, [0.1, 0.5, 0.6, 0.601, 0.602, 0.603]), run("FastAP", 6, [0.1, 0.4, 0.6, 0.6, 0.6, 0.601]),
           run("SmoothAP", 5, [0.1, 0.3, 0.4, 0.5, 0.55, 0.60]),
           {"method": "ROADMAP", "seed": 0, "mAP@R": 0.65}]  # a run without a curve (all of seeds 0-4)


def test_a_loss_curve_is_the_mean_over_the_seeds_that_recorded_one():
    curves = cv.mean_curves(RECORDS)
    assert list(curves) == ["FastAP", "SmoothAP"]
    seeds, points = curves["FastAP"]
    a, b = (r["curve"] for r in RECORDS[:2])
    assert seeds == [5, 6] and points == [(p["step"], (p["mAP@R"] + q["mAP@R"]) / 2) for p, q in zip(a, b)]
    # a seed whose curve stops early: only the steps every seed has
    short = run("FastAP", 7, [0.1, 0.5, 0.6])
    assert [s for s, _ in cv.mean_curves(RECORDS + [short])["FastAP"][1]] == [0, 500, 1000]


def test_the_page_names_the_losses_without_a_curve_and_each_plateau_by_the_pilots_rule():
    text, fig = cv.curves_section(RECORDS[::-1], list(METHODS), {"curve": [{"step": 0, "mAP@R": 0.1}]})
    missing = [m for m in METHODS if m not in ("FastAP", "SmoothAP")]
    assert f"No curve yet: {', '.join(missing)}: their plateau is not measured." in text
    assert "every 500 steps" in text
    for loss, (seeds, points) in cv.mean_curves(RECORDS).items():
        plateau = plateau_step(points)
        cell = "none yet" if plateau is None else f"{plateau:,}"
        ids = f"{len(seeds)}: seed{'' if len(seeds) == 1 else 's'} {', '.join(map(str, seeds))}"
        assert f"| {loss} | {ids} | {points[-1][0]:,} | {100 * points[-1][1]:.2f} | {cell} |" in text
    assert plateau_step(cv.mean_curves(RECORDS)["FastAP"][1]) is not None  # both branches of the cell occur
    assert plateau_step(cv.mean_curves(RECORDS)["SmoothAP"][1]) is None
    lines = fig.axes[0].get_lines()
    # in the study's order of the losses, whatever the records' order; the budget marked
    assert [line.get_label() for line in lines] == ["FastAP (2 seeds)", "SmoothAP (1 seed)",
                                                    "ROADMAP, the pilot (seed 0)", f"budget: {V2_STEPS:,} steps"]
    assert list(lines[1].get_ydata()) == pytest.approx([0.1, 0.3, 0.4, 0.5, 0.55, 0.60])


def test_without_any_curve_the_page_says_so_and_draws_nothing(tmp_path):
    stale = tmp_path / "figures" / "study_curves_v2.png"
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    lines = cv.curves_lines(RECORDS[3:], {}, tmp_path)
    assert "No run of study 1 has recorded a learning curve yet" in lines[0] and not stale.exists()
    lines = cv.curves_lines(RECORDS, {}, tmp_path)
    assert stale.stat().st_size > 1000 and "![Learning curves per loss](figures/study_curves_v2.png)" in lines
