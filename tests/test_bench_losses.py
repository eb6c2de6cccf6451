"""bench/losses.py measures what it says: its "today" engine really is the frozen one
(bench/frozen_autograd_engine.py), the new one really is lab.losses, the same batch goes to both,
peaks are seen, and only its own section of docs/benchmarks.md is rewritten. (Timings themselves are never asserted.)"""
from __future__ import annotations

import pytest
import torch

import lab.losses.functional as new_functional
from bench import loss_cases, measure
from bench import frozen_autograd_engine

TARGETS = ["smooth_ap", "sup_ap", "roadmap", "fast_ap", "soft_bin_ap"]


def functionals(module: torch.nn.Module) -> list:
    return [part.functional for part in module.modules() if getattr(part, "functional", None) is not None]


@pytest.mark.parametrize("name", TARGETS + ["sup_hap", "sup_ndcg", "smooth_recall"])
def test_today_is_the_frozen_engine_and_new_is_lab(name):
    today = functionals(loss_cases.build(name, 16, "today"))
    new = functionals(loss_cases.build(name, 16, "new"))
    assert today and all(getattr(frozen_autograd_engine, f.__name__) is f for f in today)
    assert all(getattr(new_functional, f.__name__) is f for f in new)
    assert not set(map(id, today)) & set(map(id, new))


def test_score_steps_of_both_engines_see_the_same_batch_and_agree():
    steps = {e: loss_cases.ScoreStep("sup_ap", 32, 4, e) for e in ("today", "new")}
    assert torch.equal(steps["today"].scores, steps["new"].scores)
    assert torch.equal(steps["today"].targets, steps["new"].targets)
    for step in steps.values():
        step()
    assert steps["new"].scores.grad.abs().sum() > 0
    value_diff, grad_diff = steps["new"].difference(steps["today"])
    assert value_diff < 1e-6 and grad_diff < 1e-5


def test_batch_classes():
    _, labels = loss_cases.batch(64, 32)
    assert labels[:, 0].unique().tolist() == [0, 1]
    _, labels = loss_cases.batch(64, loss_cases.PER_CLASS)
    assert torch.bincount(labels[:, 0]).tolist() == [loss_cases.PER_CLASS] * 16


def test_peak_memory_sees_a_64_mb_tensor():
    def allocate():
        torch.ones(16 * 2**20).sum()  # 64 MB, touched
    seconds, peak = measure.cpu_time_and_peak(allocate, repeat=1)
    assert seconds >= 0 and 60 <= peak < 200


def test_write_section_replaces_only_its_block(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- BEGIN metrics -->\nmetrics text\n<!-- END metrics -->\n\n"
                   "<!-- BEGIN losses -->\nold\n<!-- END losses -->\n")
    measure.write_section("losses", "new table", doc)
    measure.write_section("training", "appended", doc)
    text = doc.read_text()
    assert "metrics text" in text and "new table" in text and "old" not in text
    assert text.index("metrics text") < text.index("new table") < text.index("appended")
