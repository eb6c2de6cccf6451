"""The notebooks' runs (lab.experiments) and the figures of their rows (lab.viz.comparisons: ROADMAP Fig. 5,
FastAP Fig. 4b, Table 2), with one tiny run."""
import re
from pathlib import Path

import pytest
import torch

from lab.experiments import runs
from lab.viz import comparisons


def rows():
    return [{"loss": loss, "batch_size": b, "steps": 5, "mAP@R": m, "R@1": m + 0.1, "gap": gap}
            for loss, b, m, gap in (("sup_ap", 32, 0.20, 0.30), ("roadmap", 32, 0.25, 0.20),
                                    ("sup_ap", 128, 0.40, 0.10), ("roadmap", 128, 0.42, 0.09))]


def test_relative_gain_is_fig_5s_axis():
    assert comparisons.relative_gain(rows()) == pytest.approx({32: 25.0, 128: 5.0})


def test_batch_size_figure_draws_the_rows():
    fig = comparisons.plot_batch_size_study(rows())
    lines = {(t.name, t.xaxis): (list(t.x), list(t.y)) for t in fig.data if t.type == "scatter"}
    assert lines["sup_ap", "x"] == ([32.0, 128.0], [0.20, 0.40])
    assert lines["roadmap", "x"] == ([32.0, 128.0], [0.25, 0.42])
    assert lines["sup_ap", "x3"] == ([32.0, 128.0], [0.30, 0.10])
    assert lines["roadmap", "x3"] == ([32.0, 128.0], [0.20, 0.09])
    bars = [t for t in fig.data if t.type == "bar"][0]
    assert list(bars.x) == ["32", "128"] and list(bars.y) == pytest.approx([25.0, 5.0])
    assert not bars.error_y.visible  # one run per setting: no spread to draw


def test_batch_size_figure_draws_the_held_out_gap_solid_and_the_probe_dotted():
    data = [{**r, "gap_heldout": h} for r, h in zip(rows(), (0.24, 0.23, 0.15, 0.14))]
    fig = comparisons.plot_batch_size_study(data)
    gaps = {(t.name, t.line.dash): list(t.y) for t in fig.data if t.xaxis == "x3" and t.y[0] is not None}
    assert gaps == {("sup_ap", "solid"): [0.24, 0.15], ("roadmap", "solid"): [0.23, 0.14],
                    ("sup_ap", "dot"): [0.30, 0.10], ("roadmap", "dot"): [0.20, 0.09]}
    legend = [t.name for t in fig.data if t.showlegend is not False and t.name.startswith("gap, ")]
    assert legend == ["gap, held-out: a fixed N test images in N/B batches",
                      "gap, train probe: a fixed number of training batches of B (8 in full mode)"]


def test_relative_gains_pair_the_seeds():
    """With per-seed values, the gain is computed seed by seed (ROADMAP seed s against SupAP seed s)."""
    def row(loss, values):
        return {"loss": loss, "batch_size": 32, "steps": 5, "mAP@R": sum(values) / 2, "seeds": [0, 1],
                "values": {"mAP@R": values}, "std": {"mAP@R": 0.0}}

    gains = comparisons.relative_gains([row("sup_ap", [0.2, 0.4]), row("roadmap", [0.3, 0.4])])
    assert gains == {32: pytest.approx([50.0, 0.0])}  # not 100 * (0.35 - 0.3) / 0.3 = 16.7
    gain = comparisons.relative_gain([row("sup_ap", [0.2, 0.4]), row("roadmap", [0.3, 0.4])])
    assert gain == {32: pytest.approx(25.0)}


def test_bins_figure_draws_the_rows():
    data = [{"loss": loss, "steps": 3, "num_bins": n, "R@1": r + d, "mAP@R": r / 2}
            for loss, d in (("fast_ap", 0.0), ("soft_bin_ap", 0.01)) for n, r in ((2, 0.3), (5, 0.5), (20, 0.52))]
    fig = comparisons.plot_bins_study(data)
    left = [t for t in fig.data if t.xaxis == "x"]
    right = [t for t in fig.data if t.xaxis == "x2"]
    assert [t.name for t in left] == ["fast_ap", "soft_bin_ap"]
    assert list(left[0].x) == [2.0, 5.0, 20.0] and list(left[0].y) == [0.3, 0.5, 0.52]
    assert list(right[1].x) == [5.0, 20.0] and list(right[1].y) == pytest.approx([0.51, 0.53])  # the zoom drops 2 bins
    lo, hi = fig.layout.yaxis2.range
    assert 0.4 < lo < 0.5 and 0.53 < hi < 0.6  # zoomed on 5 bins and more, the 0.3 left out
    assert list(fig.layout.xaxis.tickvals) == [2.0, 5.0, 20.0] and list(fig.layout.xaxis.ticktext) == ["2", "5", "20"]


def test_fast_mode_shrinks_the_runs(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    fast = runs.notebook_config("roadmap")
    monkeypatch.setenv("RANKLAB_FAST", "0")
    full = runs.notebook_config("roadmap")
    assert fast.steps < full.steps and fast.dataset_kwargs["num_classes"] <= 64 and full.dataset_kwargs == {}
    assert runs.notebook_config("fast_ap", {"num_bins": 7}, fast=True).loss_kwargs == {"num_bins": 7}


@pytest.mark.slow
def test_one_tiny_run_is_evaluated_and_cached():
    kw = dict(fast=True, steps=1, batch_size=16)
    first = runs.train_and_evaluate("sup_ap", **kw)
    assert first["steps"] == 1 and first["batch_size"] == 16 and first["loss"] == "sup_ap"
    assert 0 <= first["R@1"] <= first["R@8"] <= 1 and 0 <= first["mAP@R"] <= 1
    assert runs.trained_model("sup_ap", **kw) is runs.trained_model("sup_ap", **kw)  # one run, reused
    assert runs.train_and_evaluate("sup_ap", **kw) == first


def test_a_run_reports_the_held_out_gap_on_one_epoch_of_its_batches():
    import dataclasses

    from lab.metrics import decomposability_gap
    from lab.train.loading import probe_batches

    kw = dict(fast=True, steps=1, batch_size=16)
    row = runs.train_and_evaluate("sup_ap", **kw)
    trainer = runs.trained_model("sup_ap", **kw)
    emb, labels = trainer.embed("test", trainer.config.eval_max_items)
    index, batch_ids = probe_batches(labels, dataclasses.replace(trainer.config, probe_batches=10**6))
    assert len(set(index.tolist())) == len(index) and set(torch.bincount(batch_ids).tolist()) == {16}
    assert len(index) > 2 * 16  # N / B batches of the fixed held-out set, more than the probe's 2
    assert row["gap_heldout"] == pytest.approx(decomposability_gap(emb[index], labels[index], batch_ids))


def test_one_models_gap_cut_at_its_own_batch_size_is_the_probes_and_the_held_out_one():
    kw = dict(fast=True, steps=1, batch_size=16)
    trainer = runs.trained_model("sup_ap", **kw)
    own, other = runs.gap_by_batch_size(trainer, [16, 32])
    assert own["probe"] == pytest.approx(trainer.decomposability_gap())  # the trainer's own probe
    assert own["heldout"] == pytest.approx(runs.train_and_evaluate("sup_ap", **kw)["gap_heldout"])
    k = trainer.config.probe_batches
    assert (own["probe_images"], other["probe_images"]) == (16 * k, 32 * k)  # a fixed number of batches
    assert own["heldout_images"] - other["heldout_images"] < 32  # a fixed set, cut into 16 or 32 per batch


def test_the_two_gaps_sentence_says_what_the_rows_measured_with_the_printed_digits():
    # Issue 36, C-8: notebook 02's prose said "fell from 0.19 to 0.12" while its run printed 0.177 -> 0.112.
    rows = [{"batch_size": 256, "probe": 0.171, "heldout": 0.1124},
            {"batch_size": 32, "probe": 0.0512, "heldout": 0.1771}]
    text = comparisons.two_gaps_sentence(rows)
    assert text == ("In this run the probe's gap rose from 0.051 (B = 32) to 0.171 (B = 256), while the held-out gap "
                    "of the same model fell from 0.177 to 0.112.")
    flat = [dict(r, heldout=0.2) for r in rows]
    assert comparisons.two_gaps_sentence(flat).endswith("held-out gap of the same model stayed at 0.200.")


def test_notebook_02_writes_its_two_gaps_sentence_from_the_run():
    source = (Path(__file__).resolve().parents[1] / "notebooks" / "02_decomposability_gap.py").read_text()
    assert "Markdown(two_gaps_sentence(two_gaps))" in source
    assert not re.search(r"(rose|fell) from 0\.\d+ \(B = \d+\) to|fell from 0\.\d+ to", source)  # no typed-in numbers


def test_a_notebook_run_reports_its_progress_as_lines_a_saved_notebook_keeps(capsys):
    # Issue 36, C-5: tqdm's notebook widget was saved at "train: 0%|"; lines of text are saved as printed.
    class Fake:
        config = type("C", (), {"loss": "roadmap"})()
        step_count = 0

        def step(self):
            self.step_count += 1
            return {"loss": 1.0 / self.step_count}

    trainer = Fake()
    runs.train_with_text_progress(trainer, 8)
    lines = capsys.readouterr().out.splitlines()
    assert trainer.step_count == 8 and len(lines) == runs.PROGRESS_LINES
    assert [line.split(",")[0] for line in lines] == [f"train roadmap: step {s} / 8" for s in (2, 4, 6, 8)]
    assert "loss 0.1250" in lines[-1] and "%|" not in "".join(lines)
    runs.train_with_text_progress(Fake(), 3, progress=False)
    assert capsys.readouterr().out == ""


def ablation_rows():
    return [{"loss": loss, "steps": 300, "seed": 0, "R@1": r1, "R@2": r1 + 0.05, "R@4": r1 + 0.1, "R@8": r1 + 0.15,
             "mAP@R": m}
            for loss, r1, m in (("smooth_ap", 0.621, 0.239), ("sup_ap", 0.629, 0.246), ("roadmap", 0.642, 0.253))]


def test_loss_comparison_changes_only_the_loss(monkeypatch):
    calls = []
    monkeypatch.setattr(runs, "train_and_evaluate",
                        lambda loss, loss_kwargs=None, **kw: calls.append((loss, loss_kwargs, kw)) or {"loss": loss})
    rows = runs.loss_comparison(fast=True, seed=3)
    assert [r["loss"] for r in rows] == ["smooth_ap", "sup_ap", "roadmap"]  # ROADMAP Table 2's rows
    assert [(kwargs, kw) for _, kwargs, kw in calls] == [(None, {"fast": True, "retrain": False, "seed": 3})] * 3


def test_metrics_table_prints_percent_and_bolds_the_best():
    lines = comparisons.metrics_table(ablation_rows()).splitlines()
    assert lines[0] == "| loss | R@1 | R@2 | R@4 | R@8 | mAP@R |" and lines[1] == "|---|---|---|---|---|---|"
    assert lines[2] == "| smooth_ap | 62.1 | 67.1 | 72.1 | 77.1 | 23.9 |"
    assert lines[4] == "| roadmap | **64.2** | **69.2** | **74.2** | **79.2** | **25.3** |"
    assert comparisons.metrics_table(ablation_rows(), ["mAP@R"]).splitlines()[3] == "| sup_ap | 24.6 |"


def panels(fig):
    """{panel title: {trace name: (x, y)}} of a plot_metric_points figure (means only)."""
    titles = {f"x{'' if i == 0 else i + 1}": a.text for i, a in enumerate(fig.layout.annotations)}
    out = {}
    for t in fig.data:
        if t.name != "one seed":
            out.setdefault(titles[t.xaxis], {})[t.name] = (list(t.x), list(t.y))
    return out


def test_loss_comparison_figure_draws_the_rows():
    fig = comparisons.plot_loss_comparison(ablation_rows())
    drawn = panels(fig)
    assert list(drawn) == list(comparisons.RETRIEVAL)  # one panel per metric
    assert list(drawn["R@1"]) == ["smooth_ap", "sup_ap", "roadmap"]
    assert [drawn[m]["roadmap"][1][0] for m in drawn] == pytest.approx([0.642, 0.692, 0.742, 0.792, 0.253])
    assert [drawn["mAP@R"][loss][0][0] for loss in drawn["mAP@R"]] == [0.0, 1.0, 2.0]  # same x in every panel
    assert "300 steps" in fig.layout.title.text and "seed 0" in fig.layout.title.text
    recall = comparisons.plot_recall_study(ablation_rows())  # the same builder, R@k and the primary metric
    assert list(panels(recall)) == ["R@1", "R@2", "R@4", "R@8", "mAP@R"]  # issue 36, C-1: mAP@R was left out


def study_rows():
    """Rows as lab.experiments.cached makes them: mean, std and per-seed values (3 seeds)."""
    out = []
    for loss, values in (("smooth_ap", [0.912, 0.921, 0.918]), ("roadmap", [0.925, 0.936, 0.927])):
        mean = sum(values) / 3
        std = (sum((v - mean) ** 2 for v in values) / 2) ** 0.5
        out.append({"loss": loss, "steps": 300, "seeds": [0, 1, 2], "R@1": mean, "std": {"R@1": std},
                    "values": {"R@1": values}})
    return out


def test_small_differences_get_a_zoomed_axis_and_the_seed_spread():
    fig = comparisons.plot_metric_points(study_rows(), ["R@1"], "t")
    lo, hi = fig.layout.yaxis.range
    values = [v for r in study_rows() for v in r["values"]["R@1"]]
    assert 0.85 < lo < min(values) and max(values) < hi <= 1.0  # not from 0: 1-point differences fill the panel
    assert (hi - lo) < 0.1
    means = [t for t in fig.data if t.name != "one seed"]
    for t, row in zip(means, study_rows()):
        assert t.error_y.visible and list(t.error_y.array) == pytest.approx([row["std"]["R@1"]])  # one std over seeds
    dots = [t for t in fig.data if t.name == "one seed"]
    assert [list(t.y) for t in dots] == [r["values"]["R@1"] for r in study_rows()]  # every seed drawn
    assert "3 seeds" in comparisons.plot_loss_comparison([{**r, **{m: r["R@1"] for m in comparisons.RETRIEVAL},
                                                          "std": {m: 0.01 for m in comparisons.RETRIEVAL}}
                                                         for r in study_rows()]).layout.title.text
    assert "does not start at 0" in fig.layout.title.text


def test_zoomed_range_holds_the_data_and_a_minimum_span():
    assert comparisons.zoomed_range([0.5], [0.5]) == pytest.approx([0.49, 0.51])  # min_span 0.02 around one value
    lo, hi = comparisons.zoomed_range([0.60, 0.62], [0.64, 0.70])
    assert lo == pytest.approx(0.60 - 0.025) and hi == pytest.approx(0.70 + 0.025)
    assert comparisons.zoomed_range([0.001], [0.999]) == [0.0, 1.0]  # clipped to the metric's range
    lo, hi = comparisons.zoomed_range([-0.01], [0.02])  # a decomposability gap may be negative: not cut at 0
    assert lo == pytest.approx(-0.01 - 0.0075) and hi == pytest.approx(0.02 + 0.0075)


def test_metrics_table_prints_the_spread_over_seeds():
    lines = comparisons.metrics_table(study_rows(), ["R@1"]).splitlines()
    assert lines[2] == "| smooth_ap | 91.7 ± 0.5 |" and lines[3] == "| roadmap | **92.9 ± 0.6** |"


def test_runs_use_one_thread_and_give_it_back(monkeypatch):
    import torch

    before = torch.get_num_threads()
    for fast in ("1", "0"):  # full mode too: on 2 shared cores one thread trained 4x faster than two
        monkeypatch.setenv("RANKLAB_FAST", fast)
        with runs.run_threads():
            assert torch.get_num_threads() == runs.RUN_THREADS == 1
        assert torch.get_num_threads() == before


@pytest.mark.slow
def test_full_mode_paths_with_a_tiny_budget(monkeypatch, capsys):
    """Full mode's code (progress bars, the evaluation subset, the hierarchical settings, training
    what results/ lacks) on a run of 1 step: what notebooks 04-05 run, minus the minutes."""
    from lab.experiments import hierarchical_runs as hierarchical

    tiny = dict(steps=1, batch_size=16, dataset_kwargs={"num_classes": 120, "instances_per_class": 4},
                probe_batches=2, eval_max_items=60, progress=True)
    monkeypatch.setattr(runs, "FULL_RUN", tiny)
    monkeypatch.setattr(hierarchical, "FULL_HIERARCHY", {"sampler": "hierarchical"})
    monkeypatch.setenv("RANKLAB_FAST", "0")
    smooth, happier = hierarchical.hierarchical_study()
    assert happier["steps"] == 1 and happier["source"] == "trained" and 0 <= happier["H-AP"] <= 1
    out = capsys.readouterr()
    assert "train smooth_ap: step 1 / 1" in out.out and "train happier: step 1 / 1" in out.out  # progress lines
    assert "%|" not in out.out + out.err  # no tqdm bar: a saved notebook would keep it at 0 % (issue 36, C-5)
    trainer = hierarchical.hierarchical_model("happier")
    embeddings, labels, index = runs.evaluation_embeddings(trainer)
    assert 60 <= len(index) < len(trainer.test_set) and len(embeddings) == len(labels) == len(index)
    assert torch.equal(labels, trainer.test_set.labels[index])  # the rows of the images shown
    fine = set(labels[:, 0].tolist())
    assert all((trainer.test_set.labels[:, 0] == c).sum() == (labels[:, 0] == c).sum() for c in fine)  # whole classes
    assert runs.loss_comparison(["sup_ap"])[0]["source"] == "trained"  # not in results/: trained, not invented
