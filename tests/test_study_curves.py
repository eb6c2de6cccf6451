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


FINAL = {"R@1": 0.9, "R@2": 0.95, "R@4": 0.97, "R@8": 0.99, "mAP@R": 0.6, "mAP": 0.7, "num_queries": 10,
         "gap_heldout": 0.2, "gap_train_probe": 0.03, "steps": 1000}


def stored_and_rerun(**change):
    """A stored run without a curve and its re-run with one (the same final numbers unless ``change``)."""
    old = {"method": "FastAP", "seed": 0, "key": "k0", **FINAL}
    new = {**old, **change, "curve": [{"step": 0, "mAP@R": 0.1}, {"step": 500, "mAP@R": 0.4},
                                      {"step": 1000, **{f: FINAL[f] for f in cv.REPRODUCED if f != "steps"}}],
           "curve_every": 500, "provenance": {"commit": "abc"}}
    new["curve"][-1].update({f: v for f, v in change.items() if f in new["curve"][-1]})
    return {"runs": {"k0": old}}, {"runs": {"k0": new}}


def test_a_rerun_that_reproduces_the_stored_run_gives_it_its_curve():
    stored, rerun = stored_and_rerun()
    given, refused = cv.attach_rerun_curves(stored, rerun)
    run = stored["runs"]["k0"]
    assert given == ["k0"] and refused == [] and run["curve"] == rerun["runs"]["k0"]["curve"]
    assert run["curve_every"] == 500 and run["curve_rerun"]["provenance"] == {"commit": "abc"}
    assert all(run[f] == FINAL[f] for f in FINAL)  # the stored run's own numbers are kept
    assert cv.attach_rerun_curves(stored, rerun) == ([], [])  # a run with a curve keeps it


@pytest.mark.parametrize("field", cv.EXACT)
def test_a_rerun_one_ulp_away_on_a_rank_number_is_refused_with_the_number(field):
    value = FINAL[field]
    moved = value + 1 if isinstance(value, int) else float.__add__(value, value * 2 ** -52)
    assert moved != value
    stored, rerun = stored_and_rerun(**{field: moved})
    given, refused = cv.attach_rerun_curves(stored, rerun)
    assert given == [] and "curve" not in stored["runs"]["k0"]
    assert refused == [f"FastAP seed 0 (k0): {field}: stored {value!r}, re-run {moved!r}"]


@pytest.mark.parametrize("field", list(cv.ROUNDING))
def test_a_float_reduction_joins_within_its_rounding_bound_and_no_further(field):
    bound, value = cv.ROUNDING[field], FINAL[field]
    stored, rerun = stored_and_rerun(**{field: value + bound / 2})
    assert cv.attach_rerun_curves(stored, rerun)[0] == ["k0"]
    within = stored["runs"]["k0"]["curve_rerun"]["within_rounding"]
    assert within == {field: pytest.approx(bound / 2)} and stored["runs"]["k0"][field] == value  # its own number
    stored, rerun = stored_and_rerun(**{field: value + 2 * bound})
    given, refused = cv.attach_rerun_curves(stored, rerun)
    assert given == [] and refused[0].startswith(f"FastAP seed 0 (k0): {field}: stored {value!r}, re-run")
    assert f"(more than {bound:g} apart)" in refused[0]


def test_a_curve_that_does_not_end_on_the_runs_numbers_is_refused():
    stored, rerun = stored_and_rerun()
    rerun["runs"]["k0"]["curve"][-1]["mAP@R"] = 0.61
    assert cv.attach_rerun_curves(stored, rerun)[1] == ["FastAP seed 0 (k0): curve end mAP@R"]
    stored, rerun = stored_and_rerun()
    rerun["runs"]["k0"]["curve"].pop()
    assert "curve ends at step 500, not 1000" in cv.attach_rerun_curves(stored, rerun)[1][0]


def test_the_command_rewrites_the_stored_file_only_when_a_curve_joins(tmp_path, capsys):
    from lab.studies.runner import load_results, save_results

    stored, rerun = stored_and_rerun(mAP=0.5)
    save_results(tmp_path / "stored.json", stored)
    save_results(tmp_path / "rerun.json", rerun)
    before = (tmp_path / "stored.json").read_bytes()
    assert cv.main([str(tmp_path / "rerun.json"), str(tmp_path / "stored.json")]) == 1
    assert (tmp_path / "stored.json").read_bytes() == before
    assert "not reproduced, no curve: FastAP seed 0 (k0): mAP: stored 0.7, re-run 0.5\n" in capsys.readouterr().out
    stored, rerun = stored_and_rerun()
    save_results(tmp_path / "stored.json", stored)
    save_results(tmp_path / "rerun.json", rerun)
    assert cv.main([str(tmp_path / "rerun.json"), str(tmp_path / "stored.json")]) == 0
    assert load_results(tmp_path / "stored.json")["runs"]["k0"]["curve"] == rerun["runs"]["k0"]["curve"]


def test_the_page_says_which_curves_a_rerun_recorded_and_that_it_reproduced_its_run():
    stored, rerun = stored_and_rerun()
    cv.attach_rerun_curves(stored, rerun)
    records = [*RECORDS, stored["runs"]["k0"]]
    text, _ = cv.curves_section(records, list(METHODS))
    assert "The curve of FastAP seed 0 was recorded by re-running that stored run" in text
    assert f"reproduced {', '.join(cv.EXACT)} bit for bit, and {', '.join(cv.ROUNDING)} within the rounding" in text
    assert "largest difference: none" in text
    stored, rerun = stored_and_rerun(gap_heldout=FINAL["gap_heldout"] + 1e-9)
    cv.attach_rerun_curves(stored, rerun)
    assert "largest difference: gap_heldout 1.0e-09)" in cv.curves_section([stored["runs"]["k0"]], list(METHODS))[0]
    assert "re-running" not in cv.curves_section(RECORDS, list(METHODS))[0]
