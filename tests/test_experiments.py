"""The notebooks' runs (lab.experiments) and the figures of their rows (lab.viz.comparisons: ROADMAP Fig. 5,
FastAP Fig. 4b, Table 2), with one tiny run."""
import pytest

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
    lines = {t.name: (list(t.x), list(t.y)) for t in fig.data if t.type == "scatter"}
    assert lines["sup_ap"] == ([32.0, 128.0], [0.30, 0.10]) and lines["roadmap"] == ([32.0, 128.0], [0.20, 0.09])
    bars = [t for t in fig.data if t.type == "bar"][0]
    assert list(bars.x) == ["32", "128"] and list(bars.y) == pytest.approx([25.0, 5.0])


def test_bins_figure_draws_the_rows():
    data = [{"loss": "fast_ap", "steps": 3, "num_bins": n, "R@1": r, "mAP@R": r / 2} for n, r in ((4, 0.3), (20, 0.5))]
    fig = comparisons.plot_bins_study(data)
    assert list(fig.data[0].x) == [4.0, 20.0] and list(fig.data[0].y) == [0.3, 0.5]


def test_fast_mode_shrinks_the_runs(monkeypatch):
    monkeypatch.setenv("LAB_FAST", "1")
    fast = runs.notebook_config("roadmap")
    monkeypatch.setenv("LAB_FAST", "0")
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


def ablation_rows():
    return [{"loss": loss, "steps": 300, "seed": 0, "R@1": r1, "R@2": r1 + 0.05, "R@4": r1 + 0.1, "R@8": r1 + 0.15,
             "mAP@R": m} for loss, r1, m in (("smooth_ap", 0.621, 0.239), ("sup_ap", 0.629, 0.246), ("roadmap", 0.642, 0.253))]


def test_loss_comparison_changes_only_the_loss(monkeypatch):
    calls = []
    monkeypatch.setattr(runs, "train_and_evaluate", lambda loss, **kw: calls.append((loss, kw)) or {"loss": loss})
    rows = runs.loss_comparison(fast=True, seed=3)
    assert [r["loss"] for r in rows] == ["smooth_ap", "sup_ap", "roadmap"]  # ROADMAP Table 2's rows
    assert [kw for _, kw in calls] == [{"fast": True, "seed": 3}] * 3


def test_metrics_table_prints_percent_and_bolds_the_best():
    lines = comparisons.metrics_table(ablation_rows()).splitlines()
    assert lines[0] == "| loss | R@1 | R@2 | R@4 | R@8 | mAP@R |" and lines[1] == "|---|---|---|---|---|---|"
    assert lines[2] == "| smooth_ap | 62.1 | 67.1 | 72.1 | 77.1 | 23.9 |"
    assert lines[4] == "| roadmap | **64.2** | **69.2** | **74.2** | **79.2** | **25.3** |"
    assert comparisons.metrics_table(ablation_rows(), ["mAP@R"]).splitlines()[3] == "| sup_ap | 24.6 |"


def test_loss_comparison_figure_draws_the_rows():
    fig = comparisons.plot_loss_comparison(ablation_rows())
    assert [t.name for t in fig.data] == ["smooth_ap", "sup_ap", "roadmap"]
    assert list(fig.data[2].x) == list(comparisons.RETRIEVAL)
    assert list(fig.data[2].y) == pytest.approx([0.642, 0.692, 0.742, 0.792, 0.253])
    assert fig.layout.barmode == "group" and "300 steps" in fig.layout.title.text
    recall = comparisons.plot_recall_study(ablation_rows())  # the same builder, R@k only
    assert list(recall.data[0].x) == ["R@1", "R@2", "R@4", "R@8"]


def test_fast_runs_use_one_thread_and_give_it_back(monkeypatch):
    import torch

    before = torch.get_num_threads()
    monkeypatch.setenv("LAB_FAST", "1")
    with runs.fast_threads():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    monkeypatch.setenv("LAB_FAST", "0")
    with runs.fast_threads():
        assert torch.get_num_threads() == before
