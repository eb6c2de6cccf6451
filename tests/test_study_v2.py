"""Protocol v2 (issue 21): the plateau rule, the v2 budget and its runs, a resumable pilot, and a page on
which v2 supersedes v1's studies 1, 2 and 5 with the papers' claims, Holm-corrected within each family."""
from __future__ import annotations

import json
import math

import pytest
from matplotlib.figure import Figure

from lab.cli import main
from lab.studies.reporting import figures as plots
from lab.studies import cli as study_cli
from lab.studies.running import pilot as study_pilot
from lab.studies.running import results_file, runner
from lab.studies.running import spec as study_spec
from lab.studies.running.paths import RESULTS
from lab.studies.reporting.looks import pending_look
from lab.studies.reporting.ordering import analyse_methods_v2, claims_verdict, measured_order
from lab.studies.reporting.paper_claims import CLAIMS, claim_tests, claims_headline
from lab.studies.reporting.compute import compute_paragraph, expected_cost
from lab.studies.reporting.results_page import render
from lab.studies.reporting.stats import compare

from .test_study import fake, fake_execute  # noqa: F401 (fixture)


def plateau_by_definition(curve, window, gain):
    """The rule as the page states it, as a loop over every later point."""
    last = curve[-1][0]
    for step, value in curve:
        if step + window > last:
            return None
        if all(v < value + gain for s, v in curve if step < s <= step + window):
            return step
    return None


@pytest.mark.parametrize("curve", [
    [(0, 0.1), (250, 0.3), (500, 0.4), (750, 0.45), (1000, 0.452), (1250, 0.455), (1500, 0.454), (1750, 0.456)],
    [(0, 0.1), (250, 0.2), (500, 0.3), (750, 0.4)],  # still rising: no plateau
    [(0, 0.5), (250, 0.5), (500, 0.5)],  # flat from the start
    [(0, 0.1), (250, 0.4), (500, 0.39), (750, 0.41), (1000, 0.5), (1250, 0.5), (1500, 0.5)],  # a late jump
])
def test_plateau_step_is_the_stated_rule(curve):
    assert study_spec.plateau_step(curve, window=500, gain=0.005) == plateau_by_definition(curve, 500, 0.005)


def test_plateau_needs_the_whole_window_ahead():
    assert study_spec.plateau_step([(0, 0.5), (250, 0.5)], window=500, gain=0.005) is None


def test_v2_budget_needs_the_pilot_then_evaluates_the_whole_split_with_5_seeds(monkeypatch):
    monkeypatch.setattr(study_spec, "V2_STEPS", None)
    with pytest.raises(ValueError, match="run its pilot first"):
        study_spec.study_runs("methods", protocol="v2")
    monkeypatch.setattr(study_spec, "V2_STEPS", 1234)
    runs = study_spec.study_runs("methods", protocol="v2")
    assert len(runs) == 9 * 5 and {r.seed for r in runs} == set(range(5))
    assert all(r.config["eval_max_items"] is None and r.config["steps"] == 1234 for r in runs)
    assert all(r.config["batch_size"] == 128 and r.config["m"] == 4 for r in runs)
    v1_keys = {r.key for r in study_spec.study_runs("methods")}
    assert not v1_keys & {r.key for r in runs}  # v2 never reuses a v1 run
    with pytest.raises(ValueError, match="stays a v1 study"):
        study_spec.study_runs("bins", protocol="v2")
    with pytest.raises(ValueError, match="protocol must be one of"):
        study_spec.base_config(protocol="v3")


TINY = dict(study_spec.QUICK_BASE, loss="roadmap", loss_kwargs={}, seed=0, steps=6)


def test_pilot_records_a_curve_and_resumes_on_the_same_trajectory(tmp_path, monkeypatch):
    whole = study_pilot.run_pilot(tmp_path / "a", TINY, every=2, log=lambda _: None)
    assert [p["step"] for p in whole["curve"]] == [0, 2, 4, 6]
    assert json.loads((tmp_path / "a" / "pilot.json").read_text())["curve"] == whole["curve"]
    # Interrupt a second pilot after its second block of steps, then call it again.
    from lab.train import Trainer

    real_step, calls = Trainer.step, []

    def interrupted(self, n=1):
        calls.append(n)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_step(self, n)

    monkeypatch.setattr(Trainer, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        study_pilot.run_pilot(tmp_path / "b", TINY, every=2, log=lambda _: None)
    monkeypatch.setattr(Trainer, "step", real_step)
    resumed = study_pilot.run_pilot(tmp_path / "b", TINY, every=2, log=lambda _: None)
    metrics = ("R@1", "mAP@R", "mAP")
    assert [[p[m] for m in metrics] for p in resumed["curve"]] == [[p[m] for m in metrics] for p in whole["curve"]]


def test_a_longer_pilot_continues_the_curve_and_a_pilot_stops_when_the_rule_answers(tmp_path, monkeypatch):
    whole = study_pilot.run_pilot(tmp_path / "a", TINY, every=2, log=lambda _: None)
    study_pilot.run_pilot(tmp_path / "b", dict(TINY, steps=2), every=2, log=lambda _: None)
    longer = study_pilot.run_pilot(tmp_path / "b", TINY, every=2, log=lambda _: None)  # 2 steps more, then 2 more
    metrics = ("R@1", "mAP@R", "mAP")
    assert [[p["step"], *(p[m] for m in metrics)] for p in longer["curve"]] == \
        [[p["step"], *(p[m] for m in metrics)] for p in whole["curve"]]
    assert longer["config"]["steps"] == 6
    # Another trajectory (a different seed) starts over.
    other = study_pilot.run_pilot(tmp_path / "b", dict(TINY, seed=1, steps=2), every=2, log=lambda _: None)
    assert [p["step"] for p in other["curve"]] == [0, 2]
    # The rule answers at step 2 (its window seen by step 4): the pilot stops there, not at 6.
    monkeypatch.setattr(study_pilot, "plateau_step", lambda curve: 2 if curve[-1][0] >= 4 else None)
    stopped = study_pilot.run_pilot(tmp_path / "c", TINY, every=2, log=lambda _: None)
    assert [p["step"] for p in stopped["curve"]] == [0, 2, 4] and stopped["plateau_step"] == 2


def test_study_cli_runs_the_pilot_and_v2_studies_into_v2(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(study_cli, "run_pilot", lambda out, **k: seen.append(("pilot", out)))
    monkeypatch.setattr(study_cli, "run_studies",
                        lambda names, out, *a, **k: seen.append((tuple(names), out, k["protocol"])))
    main(["study", "pilot", "--out", str(tmp_path), "--no-render"])
    main(["study", "--protocol", "v2", "--out", str(tmp_path), "--no-render"])
    assert seen == [("pilot", tmp_path / "v2"), (study_spec.V2_STUDIES, tmp_path / "v2", "v2")]
    with pytest.raises(SystemExit):  # a v1-only study under v2: a one-line error
        main(["study", "bins", "--protocol", "v2", "--out", str(tmp_path), "--no-render"])


def v2_records(monkeypatch):
    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    return [fake_execute(s) for s in study_spec.study_runs("methods", protocol="v2")]


def test_methods_v2_tests_the_papers_claims_not_their_row_order(monkeypatch):
    records = v2_records(monkeypatch)
    section = analyse_methods_v2(records)
    tests = claim_tests(records)
    assert len(tests) == len(CLAIMS) == 8
    for t in tests:
        assert f"| {t.claim.family} | {t.claim.better} > {t.claim.worse} | {t.claim.source} |" in section.body
    # the row order is described, not tested: no adjacent pair of it that is not a claim gets a row
    assert "| SoftBinAP > FastAP |" not in section.body and "not a claim of the papers" in section.body
    # fake_execute: ROADMAP +3 pt, SupAP +1 pt over the other AP losses (equal up to noise).
    assert measured_order(records)[:2] == ["ROADMAP", "SupAP"]
    assert section.verdict == claims_verdict(tests, pending_look(records))
    assert section.verdict.startswith(claims_headline(tests))
    assert section.measured not in section.verdict and section.verdict not in section.measured
    assert "Holm" in section.body and "95 %" in section.body and "**Power plan**" in section.body
    extra = [r for r in records if r["method"] == "FastAP"][:1]  # one more seed of one loss: the claims' n is unchanged
    uneven = analyse_methods_v2(records + [{**extra[0], "seed": 99}])
    n = len({r["seed"] for r in records})
    assert any(f"Holm within each family, n = {n}{end}" in uneven.verdict for end in (")", "; the look at"))


@pytest.mark.slow
def test_page_with_v2_results_supersedes_v1s_studies(tmp_path, fake, monkeypatch):  # noqa: F811
    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    runner.run_studies(list(study_spec.ORDER), tmp_path / "r", quick=False, log=lambda _: None)
    runner.run_studies(list(study_spec.V2_STUDIES), tmp_path / "r" / "v2", quick=False, log=lambda _: None,
                       protocol="v2")
    curve = [{"step": s, "R@1": 0.5, "mAP@R": 0.3, "mAP": 0.3} for s in range(0, 2001, 250)]
    results_file.save_results(tmp_path / "r" / "v2" / "pilot.json", {"study": "pilot", "config": study_spec.PILOT,
                                                                "every": 250, "curve": curve, "plateau_step": 0})
    stale = tmp_path / "d" / "figures" / "study_methods.png"  # v1's figure of a study v2 supersedes
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"png")
    page = render(tmp_path / "r", tmp_path / "d").read_text()
    assert not stale.exists() and (tmp_path / "d" / "figures" / "study_bins.png").exists()
    v2, v1 = page.split("## Protocol v1")
    assert "### 1. Rank losses compared" in v2 and "### 2. Batch size" in v2 and "### 5. Decomposability gap" in v2
    assert "45 / 45" in v2 and "p (Holm)" in v2 and "**Plateau from step 0.**" in v2
    assert "## 1. Rank losses compared" not in v1 and "## 2. Batch size" not in v1 and "## 5." not in v1
    assert "## 3. Hyper-parameters" in v1 and "## 4. Number of bins" in v1 and "## 6. Memory bank" in v1
    assert "superseded by protocol v2" in v1 and "**Trust these.**" in v2
    # complete studies: nothing provisional but the power plan's look, which has no run yet
    assert "Verdict so far" not in page and "In progress" not in page
    assert "n = 10: provisional, 0 of " in page
    assert "runs left" not in page
    for name in ("study_methods_v2", "study_ranks_v2", "study_batch_size_v2", "study_gap_v2", "study_pilot_v2"):
        assert (tmp_path / "d" / "figures" / f"{name}.png").stat().st_size > 1000


@pytest.mark.slow
def test_a_v2_study_cut_short_is_provisional_and_keeps_v1s_section(tmp_path, fake, monkeypatch):  # noqa: F811
    """A session's end leaves seeds 0-1 of study 1: its v2 verdict says provisional, v1's study 1 stays the
    one to read, and the studies without v2 runs keep theirs."""
    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    runner.run_studies(list(study_spec.ORDER), tmp_path / "r", quick=False, log=lambda _: None)
    runner.run_studies(["methods"], tmp_path / "r" / "v2", quick=False, seeds=2, log=lambda _: None, protocol="v2")
    page = render(tmp_path / "r", tmp_path / "d").read_text()
    v1 = page
    assert "**In progress: 18 of 75 runs done.**" in page and "**Trust these.**" not in page
    assert "**Verdict so far (18 of 45 runs: provisional):" in page and "provisional: " in page
    assert "(mean ± std over n = 2 seeds a setting, seeds 0-1; metrics in %)" in page
    assert "The 57 runs left should take about" in page
    assert "## 1. Rank losses compared" in v1 and "## 2. Batch size" in v1 and "## 5." in v1
    assert "superseded by protocol v2" not in page


def test_the_notebooks_read_v2_once_its_study_is_complete(tmp_path, fake, monkeypatch):  # noqa: F811
    """study_verdict and claims_table (notebooks 02, 04, 06) read v1 with a note while v2 is cut short,
    v2's records and analysis once all its runs are done; studies v2 does not re-run stay on v1."""
    from lab.studies.reporting.verdicts import claims_table, study_verdict

    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    runner.run_studies(list(study_spec.ORDER), tmp_path, quick=False, log=lambda _: None)
    runner.run_studies(["methods"], tmp_path / "v2", quick=False, seeds=2, log=lambda _: None, protocol="v2")
    claim = [("Table 2", "ROADMAP", "SupAP", "mAP@R")]
    text = study_verdict("methods", tmp_path)
    assert "protocol v1** (`results/methods.json`, 3 seeds" in text and "has 18 of 45 runs" in text
    assert claims_table("methods", claim, tmp_path).startswith("Protocol v1 (`results/methods.json`, 3 seeds).")
    runner.run_studies(["methods"], tmp_path / "v2", quick=False, log=lambda _: None, protocol="v2")
    text = study_verdict("methods", tmp_path)
    records = [fake_execute(s) for s in study_spec.study_runs("methods", protocol="v2")]
    section = analyse_methods_v2(records)
    assert "protocol v2** (`results/v2/methods.json`, 5 seeds" in text and "runs of this study" not in text
    assert f"**Verdict: {section.verdict}.**" in text and section.measured in text
    table = claims_table("methods", claim, tmp_path).splitlines()
    assert table[0] == "Protocol v2 (`results/v2/methods.json`, 5 seeds)."  # one row: nothing to correct for
    two = claims_table("methods", claim + [("Table 2", "ROADMAP", "SupAP", "R@1")], tmp_path).splitlines()[0]
    assert "not corrected for the 2 rows tested together" in two and "Holm" in two
    c = compare(records, "mAP@R", {"method": "ROADMAP"}, {"method": "SupAP"})
    assert table[4].endswith(f"| {c['verdict']} |")
    assert "protocol v1** (`results/bins.json`" in study_verdict("bins", tmp_path)


def test_the_notebooks_tables_read_the_runs_their_verdicts_read(tmp_path, fake, monkeypatch):  # noqa: F811
    """reproduction_rows (the tables of notebooks 02, 04, 06 in full mode): v1's rows while v2 is cut
    short, v2's once complete; each row the mean over seeds of that method's records."""
    from lab.experiments.runs import source_note
    from lab.studies.reporting.verdicts import reproduction_rows

    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    runner.run_studies(["methods"], tmp_path, quick=False, log=lambda _: None)
    runner.run_studies(["methods"], tmp_path / "v2", quick=False, seeds=2, log=lambda _: None, protocol="v2")
    rows = reproduction_rows("methods", ("smooth_ap", "roadmap"), tmp_path)
    assert [r["source"] for r in rows] == ["results/methods.json"] * 2 and rows[0]["seeds"] == [0, 1, 2]
    assert rows[0]["eval_max_items"] == 2000
    runner.run_studies(["methods"], tmp_path / "v2", quick=False, log=lambda _: None, protocol="v2")
    rows = reproduction_rows("methods", ("roadmap", "smooth_ap"), tmp_path)
    assert [r["loss"] for r in rows] == ["roadmap", "smooth_ap"]  # the order asked for
    for row in rows:
        values = [fake_execute(s)["mAP@R"] for s in study_spec.study_runs("methods", protocol="v2")
                  if s.config["loss"] == row["loss"] and s.method == row["method"]]
        assert len(values) == 5 and row["seeds"] == [0, 1, 2, 3, 4]
        assert row["mAP@R"] == pytest.approx(sum(values) / len(values))
        assert row["source"] == "results/v2/methods.json" and row["eval_max_items"] is None
    assert "`python -m lab study methods --protocol v2` retrains them" in source_note(rows, "methods", "x()")
    assert len(reproduction_rows("methods", results=tmp_path)) == len(study_spec.METHODS)
    with pytest.raises(ValueError, match=r"losses: study 'methods' has no runs of \['hap'\]"):
        reproduction_rows("methods", ("roadmap", "hap"), tmp_path)


def test_rank_and_pilot_figures(monkeypatch):
    fig = plots.plot_ranks(v2_records(monkeypatch), study_spec.PAPER_ORDER)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = fig.axes
    assert [t.get_text() for t in left.get_xticklabels()] == list(study_spec.PAPER_ORDER)
    assert right.yaxis_inverted()  # rank 1 (best) on top
    assert any(c for c in left.containers)  # error bars
    pilot = plots.plot_pilot([{"step": s, "R@1": 0.5, "mAP@R": 0.3} for s in (0, 250, 500)], plateau=250)
    assert [line.get_xdata()[0] for line in pilot.axes[0].lines if line.get_linestyle() == "--"] == [250]


def test_the_v2_budget_is_the_plateau_of_the_committed_pilot():
    """V2_STEPS is not a free choice: it is what the rule reads off results/v2/pilot.json's curve."""
    path = RESULTS / "v2" / "pilot.json"
    if not path.exists():
        assert study_spec.V2_STEPS is None
        return
    pilot = json.loads(path.read_text())
    curve = [(p["step"], p["mAP@R"]) for p in pilot["curve"]]
    assert study_spec.V2_STEPS == study_spec.plateau_step(curve) == pilot["plateau_step"]
    assert study_pilot._trajectory(pilot["config"]) == study_pilot._trajectory(study_spec.PILOT)


def test_a_run_left_costs_the_mean_of_its_config_else_its_batch_size_else_all(monkeypatch):
    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    methods = study_spec.study_runs("methods", protocol="v2")
    sizes = study_spec.study_runs("batch_size", protocol="v2")
    sup_ap = [s for s in methods if s.method == "SupAP"]
    small = [s for s in sizes if s.params["batch_size"] == 32]
    assert len(sup_ap) == 5 and small
    finished = [{"config": s.config, "seconds": 100.0 * (s.seed + 1), "train_cpu_seconds": 10.0 * (s.seed + 1)}
                for s in sup_ap[:3]]  # SupAP, B = 128, seeds 0-2: 100, 200, 300 s
    finished.append({"config": small[0].config, "seconds": 1000.0, "train_cpu_seconds": 500.0})
    assert expected_cost(sup_ap[4], finished) == (200.0, 20.0)  # its own config, another seed
    other_loss = next(s for s in methods if s.method == "FastAP")
    assert expected_cost(other_loss, finished) == (200.0, 20.0)  # no FastAP yet: the runs of B = 128
    large = next(s for s in sizes if s.params["batch_size"] == 256)
    assert expected_cost(large, finished) == (400.0, 140.0)  # no B = 256 yet: all four
    with pytest.raises(ValueError):
        expected_cost(large, [])


def test_the_compute_line_adds_the_runs_left_to_the_runs_done(monkeypatch):
    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    wanted = {s.key: s for n in study_spec.V2_STUDIES for s in study_spec.study_runs(n, protocol="v2")}
    done = list(wanted.values())[:7]
    datas = {"methods": {"runs": {s.key: {"config": s.config, "seconds": 3600.0, "train_cpu_seconds": 1800.0}
                                  for s in done}}}
    text = compute_paragraph(datas, list(wanted.values()))
    left = len(wanted) - 7
    assert f"{7} distinct runs: 7.0 h of run time" in text
    assert f"The {left} runs left should take about {left:.1f} h more" in text
    assert f"about {len(wanted)} h of run time, {len(wanted) / 2:.0f} h of training CPU" in text
    assert "runs left" not in compute_paragraph(datas, done)


def test_the_compute_line_gives_the_gpu_time_once_runs_were_made_there(tmp_path, monkeypatch):
    from lab.studies.reporting.compute import gpu_runs

    monkeypatch.setattr(study_spec, "V2_STEPS", 1000)
    wanted = list({s.key: s for n in study_spec.V2_STUDIES for s in study_spec.study_runs(n, protocol="v2")}.values())
    cpu = {s.key: {"config": s.config, "seconds": 3600.0, "train_cpu_seconds": 1800.0} for s in wanted}
    assert "not measured" in compute_paragraph({"methods": {"runs": cpu}}, wanted, [])
    measured = [s for s in study_spec.study_runs("methods", protocol="v2") if s.seed == 0]  # a GPU session's runs
    records = {s.key: {"key": s.key, "method": s.method, "seed": s.seed, "config": s.config,
                       "loss": s.config["loss"], "device": "cuda", "accelerator": "NVIDIA H100",
                       "seconds": 40.0 + i, "train_seconds": 30.0 + i, "seconds_per_step": (30.0 + i) / 1000}
               for i, s in enumerate(measured)}
    cpu_only = {"key": "elsewhere", "method": "ROADMAP", "seed": 0, "loss": "roadmap", "device": "cpu", "seconds": 1.0}
    results_file.save_results(tmp_path / "methods.json", {"mode": "full", "runs": {**records, "elsewhere": cpu_only}})
    gpu = gpu_runs(tmp_path)
    assert sorted(r["key"] for r in gpu) == sorted(records)  # the CPU run is not a GPU time
    text = compute_paragraph({"methods": {"runs": cpu}}, wanted, gpu)
    mean = sum(r["seconds"] for r in gpu) / len(gpu)
    assert "On a GPU (NVIDIA H100; `--device cuda`" in text and f"{len(gpu)} runs took {mean:.0f} s each" in text
    assert f"{3600 * len(gpu) / sum(r['seconds'] for r in gpu):.1f}x faster than the same {len(gpu)} on one CPU" in text
    # by definition: a measured run counts its seconds; another its loss's seconds per step x its steps + evaluation
    evaluation = 10.0
    total = 0.0
    for s in wanted:
        if s.key in records:
            total += records[s.key]["seconds"]
        else:
            same_loss = [r for r in gpu if r["loss"] == s.config["loss"]]
            total += sum(r["seconds_per_step"] for r in same_loss) / len(same_loss) * s.config["steps"] + evaluation
    assert f"{len(wanted)} distinct runs would take about {total / 3600:.1f} h there" in text
    assert f"({len(wanted) - len(records)} of them estimated" in text


def test_the_reasons_name_the_contradicted_claims_and_what_they_share(monkeypatch):
    """why_not_v2 reads the claims' verdicts: contradictions that all involve a histogram loss get the
    kernel-width reading, with the order of the other losses checked, not asserted; others do not."""
    records = v2_records(monkeypatch)
    order = list(study_spec.PAPER_ORDER)
    methods = order + ["ROADMAP (L_DG*)", "Smooth-R@k", "Sup-R@k"]
    others = {"ROADMAP (L_DG*)": 0.65, "Smooth-R@k": 0.58, "Sup-R@k": 0.60}  # SupRank's claims hold

    def shifted(means):  # per-seed noise of up to 0.3 pt, different per loss, so every claim is resolved
        means = {**others, **means}
        return [{**r, "mAP@R": means[r["method"]]
                 + 0.003 * math.sin(1.7 * (r["seed"] + 1) * (methods.index(r["method"]) + 1))} for r in records]

    on_top = dict(zip(order, [0.70, 0.68, 0.60, 0.61, 0.62, 0.63]))  # the histogram losses first, the rest in order
    text = analyse_methods_v2(shifted(on_top)).if_not
    fast, soft = (t for t in claim_tests(shifted(on_top)) if t.claim.worse in ("FastAP", "SoftBinAP"))
    assert text.startswith(f"Contradicted (FastAP > ROADMAP by {-100 * fast.interval.mean:.1f} pt of mAP@R, "
                           f"in 5 of 5 seeds; SoftBinAP > ROADMAP by {-100 * soft.interval.mean:.1f} pt of mAP@R, "
                           "in 5 of 5 seeds)")
    assert "Not resolved" not in text
    assert "(FastAP, SoftBinAP) take the first 2 places here by mean mAP@R (FastAP first in 5 of 5, SoftBinAP " \
           "second in 5 of 5 seeds). Without them the other 4 come in the papers' row order." in text
    assert "FastAP's reaches 0.200 and SoftBinAP's reaches 0.105 of cosine score" in text  # 2 / 10, 2 / 19

    # some contradictions without a histogram loss
    swapped = {**on_top, "FastAP": 0.60, "SoftBinAP": 0.60, "ROADMAP": 0.59}
    text = analyse_methods_v2(shifted(swapped)).if_not
    assert "SmoothAP > ROADMAP by " in text and "histogram" not in text

    assert analyse_methods_v2(shifted(dict(zip(order, [0.60, 0.61, 0.62, 0.63, 0.64, 0.65])))).if_not == ""
