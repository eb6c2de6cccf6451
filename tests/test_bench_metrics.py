"""bench/metrics.py compares what it says: the same embeddings go to retrieval_metrics and to
AccuracyCalculator, the hard data is hard, and bench/gpu.py gets one row per kind of data with both
times and their largest difference. (Timings themselves are never asserted.)"""
from __future__ import annotations

import pytest
import torch

from bench import metrics as bench_metrics
from lab.metrics import retrieval_metrics


def test_the_four_kinds_of_data_span_the_range_of_r_at_1():
    """easy (a trained model), clustered, hard (early in training), random (labels ignored): the same
    labels, R@1 from ~0.93 down to chance (7 positives among 15k: 0.0005)."""
    r = {}
    for data in bench_metrics.KINDS:
        emb, labels = bench_metrics.embeddings(15000, data=data)
        assert emb.shape == (15000, 64) and torch.allclose(emb.norm(dim=1), torch.ones(15000))
        assert torch.equal(labels, bench_metrics.embeddings(15000, data="easy")[1])
        r[data] = retrieval_metrics(emb, labels[:, 0], full_map=False)["R@1"]
    assert r["easy"] > 0.9 and 0.2 < r["clustered"] < 0.45 and r["hard"] < 0.01 and r["random"] < 0.002
    assert r["random"] < r["hard"]
    for dim in (64, 128):  # the GPU's benchmark runs at D = 128: the hard spread follows D, R@1 stays low
        emb, labels = bench_metrics.embeddings(5000, data="hard", dim=dim)
        assert retrieval_metrics(emb, labels[:, 0], full_map=False)["R@1"] < 0.02
    with pytest.raises(ValueError, match="data must be one of"):
        bench_metrics.embeddings(10, data="medium")


def test_versus_accuracy_calculator_times_both_on_the_same_data():
    pytest.importorskip("pytorch_metric_learning")
    rows = bench_metrics.versus_accuracy_calculator(400, 16, "cpu", repeat=1)
    assert list(rows) == ["easy", "hard"]
    for data, row in rows.items():
        assert set(row) == {"n", "dim", "device", "R@1", "mAP@R", "ours_s", "ours_top_s", "accuracy_calculator_s",
                            "max_abs_diff"}
        assert (row["n"], row["dim"], row["device"]) == (400, 16, "cpu")
        assert row["ours_s"] > 0 and row["ours_top_s"] > 0 and row["accuracy_calculator_s"] > 0
        emb, labels = bench_metrics.embeddings(400, data=data, dim=16)
        ours = retrieval_metrics(emb, labels[:, 0])
        assert (row["R@1"], row["mAP@R"]) == (ours["R@1"], ours["mAP@R"])  # the numbers of that data
        assert row["max_abs_diff"] <= 1e-6  # and AccuracyCalculator's
    assert rows["hard"]["R@1"] < rows["easy"]["R@1"]


def test_without_pytorch_metric_learning_only_ours_is_timed(monkeypatch):
    monkeypatch.setattr(bench_metrics, "_accuracy_calculator", lambda device: None)
    rows = bench_metrics.versus_accuracy_calculator(200, 8, torch.device("cpu"), repeat=1)
    assert all(row["accuracy_calculator_s"] is None and row["max_abs_diff"] is None and row["ours_s"] > 0
               for row in rows.values())


def _row(ours_top, theirs=1.0):
    return {"wall": {"pml": theirs, "ours_top": ours_top, "ours_all": 2 * ours_top}, "top": {"R@1": 0.5, "mAP@R": 0.25},
            "diff": 0.0, "load": 1.5}


def test_the_table_gives_our_time_over_theirs_and_the_goal_names_each_miss():
    results = {(15000, "easy"): _row(0.5), (30000, "random"): _row(1.2)}
    lines = bench_metrics.table(results).splitlines()
    assert len(lines) == 4 and "| 15,000 | easy |" in lines[2] and "| 0.50 |" in lines[2] and "| 1.00 |" in lines[2]
    assert "| 30,000 | random |" in lines[3] and "| 1.20 |" in lines[3] and lines[3].endswith("| 1.5 |")
    goal = bench_metrics.goals(results)
    assert "**missed** at N = 30,000 random: 1.20." in goal and "easy" not in goal
    assert "met at every N" in bench_metrics.goals({(15000, "easy"): _row(0.5)})


def test_an_earlier_commit_is_timed_beside_ours_on_the_same_data():
    pytest.importorskip("pytorch_metric_learning")
    before = bench_metrics.lab_at("HEAD")
    assert before.__name__ == "lab_before.metrics"
    row = bench_metrics.run(600, "clustered", rounds=1, before=before)
    assert {"pml", "ours_top", "ours_all", "before_top", "before_all"} == set(row["wall"])
    emb, labels = bench_metrics.embeddings(600, data="clustered")
    assert row["top"] == retrieval_metrics(emb, labels[:, 0], full_map=False) and row["diff"] <= 1e-6
    assert "before, its metrics" in bench_metrics.table({(600, "clustered"): row})


def test_a_machine_busier_than_its_cores_gets_a_caveat():
    assert bench_metrics.busy(1.5, cores=2) == ""
    assert bench_metrics.busy(9.8, cores=2).startswith("- The load (9.8 on 2 cores) exceeded the cores")
