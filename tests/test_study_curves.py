"""Study 1's learning curves per loss (issue 33, item 6), from synthetic runs that carry a ``curve``: the
mean over seeds by hand, the plateau by the pilot's rule, which losses the page says have none, the figure."""
from __future__ import annotations

import pytest

from lab.studies.reporting import curves as cv
from lab.studies.running import rerun_curves as rc
from lab.studies.running.spec import METHODS, V2_STEPS, plateau_step


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
                                      {"step": 1000, **{f: FINAL[f] for f in rc.REPRODUCED if f != "steps"}}],
           "curve_every": 500, "provenance": {"commit": "abc"}}
    new["curve"][-1].update({f: v for f, v in change.items() if f in new["curve"][-1]})
    return {"runs": {"k0": old}}, {"runs": {"k0": new}}


def test_a_rerun_that_reproduces_the_stored_run_gives_it_its_curve():
    stored, rerun = stored_and_rerun()
    given, refused = rc.attach_rerun_curves(stored, rerun)
    run = stored["runs"]["k0"]
    assert given == ["k0"] and refused == [] and run["curve"] == rerun["runs"]["k0"]["curve"]
    assert run["curve_every"] == 500 and run["curve_rerun"]["provenance"] == {"commit": "abc"}
    assert all(run[f] == FINAL[f] for f in FINAL)  # the stored run's own numbers are kept
    assert rc.attach_rerun_curves(stored, rerun) == ([], [])  # a run with a curve keeps it


@pytest.mark.parametrize("field", rc.EXACT)
def test_a_rerun_one_ulp_away_on_a_rank_number_is_refused_with_the_number(field):
    value = FINAL[field]
    moved = value + 1 if isinstance(value, int) else float.__add__(value, value * 2 ** -52)
    assert moved != value
    stored, rerun = stored_and_rerun(**{field: moved})
    given, refused = rc.attach_rerun_curves(stored, rerun)
    assert given == [] and "curve" not in stored["runs"]["k0"]
    assert refused == [f"FastAP seed 0 (k0): {field}: stored {value!r}, re-run {moved!r}"]


@pytest.mark.parametrize("field", list(rc.ROUNDING))
def test_a_float_reduction_joins_within_its_rounding_bound_and_no_further(field):
    bound, value = rc.ROUNDING[field], FINAL[field]
    stored, rerun = stored_and_rerun(**{field: value + bound / 2})
    assert rc.attach_rerun_curves(stored, rerun)[0] == ["k0"]
    within = stored["runs"]["k0"]["curve_rerun"]["within_rounding"]
    assert within == {field: pytest.approx(bound / 2)} and stored["runs"]["k0"][field] == value  # its own number
    stored, rerun = stored_and_rerun(**{field: value + 2 * bound})
    given, refused = rc.attach_rerun_curves(stored, rerun)
    assert given == [] and refused[0].startswith(f"FastAP seed 0 (k0): {field}: stored {value!r}, re-run")
    assert f"(more than {bound:g} apart)" in refused[0]


def test_a_curve_that_does_not_end_on_the_runs_numbers_is_refused():
    stored, rerun = stored_and_rerun()
    rerun["runs"]["k0"]["curve"][-1]["mAP@R"] = 0.61
    assert rc.attach_rerun_curves(stored, rerun)[1] == ["FastAP seed 0 (k0): curve end mAP@R"]
    stored, rerun = stored_and_rerun()
    rerun["runs"]["k0"]["curve"].pop()
    assert "curve ends at step 500, not 1000" in rc.attach_rerun_curves(stored, rerun)[1][0]


def test_the_command_rewrites_the_stored_file_only_when_a_curve_joins(tmp_path, capsys):
    from lab.studies.running.results_file import load_results, save_results

    stored, rerun = stored_and_rerun(mAP=0.5)
    save_results(tmp_path / "stored.json", stored)
    save_results(tmp_path / "rerun.json", rerun)
    before = (tmp_path / "stored.json").read_bytes()
    assert rc.main([str(tmp_path / "rerun.json"), str(tmp_path / "stored.json")]) == 1
    assert (tmp_path / "stored.json").read_bytes() == before
    assert "not reproduced, no curve: FastAP seed 0 (k0): mAP: stored 0.7, re-run 0.5\n" in capsys.readouterr().out
    stored, rerun = stored_and_rerun()
    save_results(tmp_path / "stored.json", stored)
    save_results(tmp_path / "rerun.json", rerun)
    assert rc.main([str(tmp_path / "rerun.json"), str(tmp_path / "stored.json")]) == 0
    assert load_results(tmp_path / "stored.json")["runs"]["k0"]["curve"] == rerun["runs"]["k0"]["curve"]


def test_the_page_says_which_curves_a_rerun_recorded_and_that_it_reproduced_its_run():
    stored, rerun = stored_and_rerun()
    rc.attach_rerun_curves(stored, rerun)
    records = [*RECORDS, stored["runs"]["k0"]]
    text, _ = cv.curves_section(records, list(METHODS))
    assert "The curve of FastAP seed 0 was recorded by re-running that stored run" in text
    assert f"reproduced {', '.join(rc.EXACT)} bit for bit, and {', '.join(rc.ROUNDING)} within the rounding" in text
    assert "largest difference: none" in text
    stored, rerun = stored_and_rerun(gap_heldout=FINAL["gap_heldout"] + 1e-9)
    rc.attach_rerun_curves(stored, rerun)
    assert "largest difference: gap_heldout 1.0e-09)" in cv.curves_section([stored["runs"]["k0"]], list(METHODS))[0]
    assert "re-running" not in cv.curves_section(RECORDS, list(METHODS))[0]


# A re-run whose evaluation differs from the stored run's in last bits beyond ROUNDING (the real case: mAP one
# ulp, gap_heldout 3.8e-8), and the check of lab.studies.running.evaluated_then that settles it.
LAST_BITS = {"mAP": float.__add__(FINAL["mAP"], FINAL["mAP"] * 2 ** -52), "gap_heldout": FINAL["gap_heldout"] + 4e-8}


def a_check(stored: dict, rerun: dict, **change) -> dict:
    """What evaluated_then.check records when it reproduces both: its training evaluated by the re-run's code
    gives the re-run's numbers, by the stored run's code the stored numbers (unless ``change``)."""
    old, new = stored["runs"]["k0"], rerun["runs"]["k0"]
    check = {"key": "k0", "train_at": "abc", "evaluated_then_at": "eb7e669" + "0" * 33,
             "now": {**{f: new[f] for f in rc.EVALUATED}, "steps": new["steps"]},
             "then": {**{f: old[f] for f in rc.EVALUATED}, "steps": 0}}
    for where, values in change.items():
        check[where] = {**check[where], **values} if isinstance(values, dict) else values
    return {"k0": check}


def test_a_rerun_off_by_last_bits_joins_only_with_a_check_that_both_codes_reproduce_their_numbers():
    stored, rerun = stored_and_rerun(**LAST_BITS)
    assert rc.attach_rerun_curves(stored, rerun)[0] == []  # refused without its check
    check = a_check(stored, rerun)
    given, refused = rc.attach_rerun_curves(stored, rerun, check)
    run = stored["runs"]["k0"]
    assert given == ["k0"] and refused == [] and run["curve"] == rerun["runs"]["k0"]["curve"]
    assert all(run[f] == FINAL[f] for f in FINAL)  # the stored run keeps its own numbers
    assert run["curve_rerun"]["checked"]["differences"] == {f: LAST_BITS[f] - FINAL[f] for f in LAST_BITS}
    assert run["curve_rerun"]["checked"]["evaluated_then_at"] == check["k0"]["evaluated_then_at"]


@pytest.mark.parametrize("field", rc.EVALUATED)
@pytest.mark.parametrize("side", ["now", "then"])
def test_a_check_one_ulp_off_on_either_side_refuses_the_curve(field, side):
    stored, rerun = stored_and_rerun(**LAST_BITS)
    value = a_check(stored, rerun)["k0"][side][field]
    moved = value + 1 if isinstance(value, int) else float.__add__(value, value * 2 ** -52)
    given, refused = rc.attach_rerun_curves(stored, rerun, a_check(stored, rerun, **{side: {field: moved}}))
    assert given == [] and "curve" not in stored["runs"]["k0"]
    code = "re-run's code" if side == "now" else "stored run's code"
    assert f"its check: {code}: {field}: " in refused[0]


def test_a_check_of_another_commit_run_or_length_and_a_bad_curve_are_refused():
    for change, why in ((dict(train_at="def"), "the check trained at def, the re-run at abc"),
                        (dict(key="k1"), "the check is of run k1, not k0"),
                        (dict(now={"steps": 999}), "the check trained 999 steps, the run 1000")):
        stored, rerun = stored_and_rerun(**LAST_BITS)
        refused = rc.attach_rerun_curves(stored, rerun, a_check(stored, rerun, **change))[1]
        assert refused and refused[0].endswith(f"its check: {why}")
    stored, rerun = stored_and_rerun(**LAST_BITS)
    rerun["runs"]["k0"]["curve"].pop()  # a check vouches for numbers, not for a curve that ends elsewhere
    given, refused = rc.attach_rerun_curves(stored, rerun, a_check(stored, rerun))
    assert given == [] and refused and "curve" not in stored["runs"]["k0"]


def test_the_page_says_which_curves_a_check_admitted_and_the_command_reads_the_checks(tmp_path):
    import json

    from lab.studies.running.results_file import load_results, save_results

    stored, rerun = stored_and_rerun(**LAST_BITS)
    save_results(tmp_path / "stored.json", stored)
    save_results(tmp_path / "rerun.json", rerun)
    (tmp_path / "checks.json").write_text(json.dumps(a_check(stored, rerun)))
    assert rc.main([str(tmp_path / "rerun.json"), str(tmp_path / "stored.json")]) == 1
    assert rc.main([str(tmp_path / "rerun.json"), str(tmp_path / "stored.json"), "--checked",
                    str(tmp_path / "checks.json")]) == 0
    run = load_results(tmp_path / "stored.json")["runs"]["k0"]
    text = cv.curves_section([run], list(METHODS))[0]
    assert "The re-run of FastAP seed 0 differed from the stored run in the last bits of the evaluation " \
           "(largest difference: mAP 1.1e-16; gap_heldout 4.0e-08)" in text
    assert "the same final weights evaluated by the stored runs' code (eb7e669) gave the stored run's numbers " \
           "bit for bit" in text and "re-running that stored run" not in text


def test_the_stored_checks_reproduce_the_stored_numbers_and_the_curves_they_admitted():
    """results/v2/rerun_checks.json against results/v2/methods.json: each check's evaluation by the stored
    run's code is the stored record bit for bit, by the re-run's code the curve's last point."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    checks = json.loads((root / "results" / "v2" / "rerun_checks.json").read_text())
    runs = json.loads((root / "results" / "v2" / "methods.json").read_text())["runs"]
    admitted = {k for k, r in runs.items() if r.get("curve_rerun", {}).get("checked")}
    assert admitted and admitted <= set(checks)
    for key in admitted:
        run, check = runs[key], checks[key]
        assert {f: check["then"][f] for f in rc.EVALUATED} == {f: run[f] for f in rc.EVALUATED}
        end = run["curve"][-1]
        assert end["step"] == check["now"]["steps"] == run["steps"]
        assert all(end[f] == check["now"][f] for f in rc.EVALUATED if f in end)
        moved = run["curve_rerun"]["checked"]["differences"]
        assert moved and all(check["now"][f] - run[f] == d for f, d in moved.items())


@pytest.mark.slow
def test_final_weights_saved_and_evaluated_again_by_the_same_code_give_the_same_numbers():
    """evaluated_then's two processes: the weights saved after training, loaded into a fresh Trainer and
    evaluated again (the held-out gap included) give every number bit for bit, so that where two codes
    disagree it is their evaluation, not the loading."""
    from pathlib import Path

    from lab.studies.running.evaluated_then import evaluate_both
    from lab.train import TrainConfig

    root = Path(__file__).resolve().parents[1]
    config = TrainConfig(dataset="glyphs", model="small_cnn", loss="sup_recall", steps=3, eval_max_items=300,
                         seed=1, batch_size=32, m=4).to_dict()
    now, again = evaluate_both(config, root, root)
    assert now["steps"] == 3 and again["steps"] == 0 and 0 < now["mAP@R"] < 1 and now["gap_heldout"] != 0
    assert {f: now[f] for f in rc.EVALUATED} == {f: again[f] for f in rc.EVALUATED}


def test_the_page_says_which_losses_plateaued_and_how_much_the_others_still_gained():
    """By hand from RECORDS: FastAP's mean curve is flat from step 1,000; SmoothAP's rises by 0.10 between
    step 1,500 (the last the rule judges in 2,500 steps) and 2,500: the budget is not its plateau."""
    text, _ = cv.curves_section(RECORDS, list(METHODS))
    assert "By that rule, 1 of the 2 losses with a curve reached a plateau within their curve: FastAP." in text
    assert "The other 1 (SmoothAP) still gained +10.00 to +10.00 point of mAP@R between step 1,500 and 2,500" in text
    assert "at least the rule's 0.5: whether they level off after it is not measured" in text
    short = run("BlackBoxAP", 0, [0.1, 0.2, 0.3, 0.4, 0.5])  # curves ending at different steps
    assert "in the last 1,000 steps of their curve" in cv.curves_section(RECORDS + [short], list(METHODS))[0]
    flat = [run("FastAP", 5, [0.1, 0.5, 0.6, 0.601, 0.602, 0.603])]
    text, _ = cv.curves_section(flat, list(METHODS))
    assert "1 of the 1 losses with a curve reached a plateau" in text and "still gained" not in text


def test_the_runs_of_an_unread_replication_look_show_no_curve():
    """Seeds of a look not read yet (issue 43): their losses' curves are left out and named, with the look's count;
    a loss with a curve on another seed keeps that one."""
    records = RECORDS + [run("SupAP", 0, [0.1, 0.5, 0.55, 0.57, 0.58, 0.58])]
    text, fig = cv.curves_section(records, list(METHODS), held=range(5, 15), held_note="look 1: 3 of 20 runs done")
    assert ("Not shown: FastAP, SmoothAP, whose curves were recorded by runs of the replication's seeds 5-14 "
            "(look 1: 3 of 20 runs done)") in text
    assert "| FastAP |" not in text and "| SupAP | 1: seed 0 |" in text
    assert [line.get_label() for line in fig.axes[0].get_lines()][0] == "SupAP (1 seed)"
    assert "Not shown" not in cv.curves_section(records, list(METHODS))[0]


def test_a_loss_above_the_pilot_at_every_step_is_said_so_with_both_gains_at_the_end(monkeypatch):
    """By hand: FastAP above the pilot at each of 5 steps, gaining +3 pt over the last 1,000 steps against the
    pilot's +4 pt; then a pilot that gains +2 pt there; then a loss below the pilot at one step."""
    monkeypatch.setattr(cv.spec, "V2_STEPS", 2500)
    pilot = [{"step": 250 * i, "mAP@R": v} for i, v in enumerate([0.1, 0.2, 0.3, 0.35, 0.4, 0.42, 0.44, 0.45, 0.46,
                                                                  0.47, 0.48])]
    fast = run("FastAP", 0, [0.1, 0.4, 0.5, 0.52, 0.53, 0.55])  # 500 apart, from step 0 (equal there: not compared)
    text = cv.pilot_comparison(cv.mean_curves([fast]), pilot)
    assert ("FastAP (1 seed) is above the pilot at every one of the 5 steps both evaluated, from step 500 on; over "
            "steps 1,500-2,500 it gains +3.00 pt and the pilot +4.00, so the pilot gains more there") in text
    flatter = [{"step": 250 * i, "mAP@R": v} for i, v in enumerate([0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.305, 0.31,
                                                                    0.315, 0.32])]  # +2 pt over steps 1,500-2,500
    assert "it gains +3.00 pt and the pilot +2.00, so it still gains more at the budget's end" in \
        cv.pilot_comparison(cv.mean_curves([fast]), flatter)
    behind = run("FastAP", 0, [0.1, 0.15, 0.5, 0.52, 0.53, 0.55])  # below the pilot at step 500
    assert cv.pilot_comparison(cv.mean_curves([behind]), pilot).startswith("No loss's curve is above")
