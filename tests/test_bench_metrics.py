"""bench/metrics.py compares what it says: the same embeddings go to retrieval_metrics and to
AccuracyCalculator, the hard data is hard, and bench/gpu.py gets one row per kind of data with both
times and their largest difference. (Timings themselves are never asserted.)"""
from __future__ import annotations

import pytest
import torch

from bench import metrics as bench_metrics
from lab.metrics import retrieval_metrics


def test_hard_data_puts_most_of_a_row_above_the_positives():
    for dim in (64, 128):  # the CPU's and the GPU's benchmarks: the hard spread follows D, R@1 stays low
        easy, hard = (bench_metrics.embeddings(15000, data=data, dim=dim) for data in ("easy", "hard"))
        r_easy, r_hard = (retrieval_metrics(emb, labels[:, 0])["R@1"] for emb, labels in (easy, hard))
        assert r_hard < 0.1 < 0.9 < r_easy
        assert torch.equal(easy[1], hard[1])  # the same classes: only the spread differs
        assert easy[0].shape == (15000, dim) and torch.allclose(hard[0].norm(dim=1), torch.ones(15000))


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


def test_a_missed_goal_gives_its_why_only_when_the_why_holds():
    def row(wall_top, thread_top):
        return {"wall": {"pml": 1.0, "flat_torch": 0.9, "flat_top": wall_top, "hier_torch": 1.0},
                "one_thread": {"pml": 1.0, "flat_torch": 0.9, "flat_top": thread_top, "hier_torch": 1.0}}

    wall_only = bench_metrics.goals({(30000, "hard"): row(1.1, 0.8)}).splitlines()
    assert wall_only[0].startswith("- Goal, its metrics") and "**missed** at N = 30,000 hard (wall): 1.10" in wall_only[0]
    assert wall_only[1] == "  Why: " + bench_metrics.WHY["its metrics"]
    assert all(line.startswith("- Goal") and "met at every N" in line for line in wall_only[2:])
    both = bench_metrics.goals({(30000, "hard"): row(1.1, 1.2)}).splitlines()
    assert "(one thread): 1.20" in both[0] and not both[1].startswith("  Why")  # "faster on one thread" would be false
