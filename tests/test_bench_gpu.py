"""bench/gpu.py measures what it says: without a GPU it exits 0 and writes nothing; its peer is the same
objective as ours; its engine modes really switch the sizes and the kernels, and restore them; a smoke
run on the CPU covers every loss, composition and target. (Timings themselves are never asserted.)"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import gpu  # noqa: E402
import peers  # noqa: E402

import lab.losses as L  # noqa: E402
from lab.core import budget  # noqa: E402
from lab.losses import engine, fused_sums  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu, "publish", lambda *a, **k: pytest.fail("wrote a section without a GPU"))
    assert gpu.main([]) == 0
    assert "no CUDA device" in capsys.readouterr().out


@pytest.mark.parametrize("per_class", [2, 4, 7])
def test_cubic_smooth_ap_is_our_objective(per_class):
    g = torch.Generator().manual_seed(per_class)
    emb = torch.randn(28, 16, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.arange(28) // per_class
    theirs, ours = peers.cubic_smooth_ap(emb, labels), L.SmoothAP()(emb, labels)
    torch.testing.assert_close(theirs.double(), ours, rtol=1e-6, atol=1e-6)
    g_theirs, = torch.autograd.grad(theirs, emb)
    g_ours, = torch.autograd.grad(ours, emb)
    torch.testing.assert_close(g_theirs.double(), g_ours, rtol=1e-4, atol=1e-6)


def test_engine_modes_switch_and_restore(monkeypatch):
    monkeypatch.setenv(fused_sums.FUSED_ENV, "auto")
    with budget.memory_budget("2GB"):
        gpu_block = engine.block_budget(4096, 4096, "cuda")
        with gpu.engine("cpu-sized"):
            assert engine.block_budget(4096, 4096, "cuda") == 2**22  # the CPU's block, on a GPU
            assert engine.row_chunks(4096, 4096, "cuda") == engine.row_chunks(4096, 4096, "cpu")
            assert not fused_sums.fused_path("cuda", torch.float32, True, False)
        with gpu.engine("pytorch"):
            assert engine.block_budget(4096, 4096, "cuda") == gpu_block
            assert not fused_sums.fused_path("cuda", torch.float32, True, False)
        assert engine.block_budget(4096, 4096, "cuda") == gpu_block
        assert fused_sums.fused_path("cuda", torch.float32, True, False)


def test_smoke_run_covers_every_loss_and_target(monkeypatch):
    published = []
    monkeypatch.setattr(gpu, "publish", lambda name, text, dry_run: published.append((name, text, dry_run)))
    assert gpu.main(["--smoke"]) == 0
    (name, out, dry_run), = published
    assert name == "gpu" and dry_run  # a smoke run never writes docs/benchmarks.md
    for name in L.LOSSES:
        assert f"| {name} | 16 |" in out and f"| {name} | 32 |" in out
    for composition in ("4/class", "2 classes", "2 levels"):
        assert f"#### {composition}" in out
    assert out.count("not measured.") == len(gpu.TARGETS) + 1  # no B = 16384 nor 100k in a smoke run
    evaluation = [line.split("|") for line in out.splitlines() if line.startswith(("| 500 x 128", "| 1000 x 128"))]
    assert [(row[1].strip(), row[2].strip()) for row in evaluation] == [
        (f"{n} x 128", data) for n in (500, 1000) for data in ("easy", "hard")]
    for row in evaluation:  # the same numbers as AccuracyCalculator's, where it is installed
        assert row[-2].strip() == "not installed" or float(row[-2]) < 1e-6
    assert re.search(r"on glyphs \(small_cnn, 5\d\d images\)", out)  # 500 asked, whole classes
    training = [line.split("|") for line in out.splitlines() if line.startswith("| smoke: small_cnn, B = 16")]
    assert len(training) == len(gpu.TRAIN_CASES)
    for row in training:  # rates measured (their values are timings: never asserted)
        assert float(row[3]) > 0 and float(row[5]) > 0 and float(row[7].strip(" %")) > 0
    cubic = [line for line in out.splitlines() if line.startswith("| cubic SmoothAP")]
    assert len(cubic) == 2 and all(float(line.split("|")[-2]) < 1e-5 for line in cubic)
