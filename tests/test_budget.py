"""The memory budget of a loss call (lab.core.budget): parsed with clear errors, derived from the device,
set by one knob (function, context manager, environment), and obeyed by the engine's blocks, tiles
and histogram chunks (asserted on tensor sizes)."""
from __future__ import annotations

import threading

import pytest
import torch

import lab.core.budget as budget
from lab.losses import functional as LF
from lab.losses.engine import blocks, plan

from .test_losses_inputs import LargestTensor

GiB, MiB = 2**30, 2**20


@pytest.mark.parametrize("text, expected", [("512MB", 512 * MiB), ("2GB", 2 * GiB), ("1.5GiB", int(1.5 * GiB)),
                                            (" 64 kb ", 64 * 2**10), ("100000", 100000), (2**20, 2**20)])
def test_parse_budget(text, expected):
    assert budget.parse_budget(text) == expected


@pytest.mark.parametrize("bad", ["lots", "2 parsecs", "-1GB", 10, 0, float("nan"), float("inf"), True, [1]])
def test_bad_budgets_are_refused_with_the_accepted_forms(bad):
    with pytest.raises(ValueError, match="budget must be"):
        budget.parse_budget(bad)


def test_device_defaults():
    assert budget.device_budget("cpu") == budget.CPU_BUDGET
    assert budget.device_budget("cuda", 80 * GiB) == budget.CUDA_MAX_BUDGET  # an idle H100: capped
    assert budget.device_budget("cuda", 4 * GiB) == GiB  # a quarter of what is free
    assert budget.device_budget("cuda", 10 * MiB) == budget.CUDA_MIN_BUDGET
    assert budget.uses_cache_blocks("cpu") and not budget.uses_cache_blocks("cuda")


def test_the_knob_function_context_and_environment(monkeypatch):
    monkeypatch.delenv(budget.BUDGET_ENV, raising=False)
    assert budget.budget_bytes("cpu") == budget.CPU_BUDGET
    monkeypatch.setenv(budget.BUDGET_ENV, "1GB")
    assert budget.budget_bytes("cpu") == GiB
    budget.set_memory_budget("256MB")
    try:
        assert budget.budget_bytes("cpu") == 256 * MiB  # the function wins over the environment
        with budget.memory_budget("8MB"):
            assert budget.budget_bytes("cuda") == 8 * MiB  # and the context over both, on any device
        assert budget.budget_bytes("cpu") == 256 * MiB
    finally:
        budget.set_memory_budget(None)
    assert budget.budget_bytes("cpu") == GiB
    monkeypatch.setenv(budget.BUDGET_ENV, "plenty")
    with pytest.raises(ValueError, match="RANKLAB_MEMORY_BUDGET must be"):
        budget.budget_bytes("cpu")


def test_the_context_manager_is_per_thread(monkeypatch):
    """The dashboard trains one session per thread: one session's budget must not leak into another."""
    monkeypatch.delenv(budget.BUDGET_ENV, raising=False)
    seen = []
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen.append(budget.budget_bytes("cpu"))
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with budget.memory_budget("4MB"):
        inside.set()
        done.wait()
        assert budget.budget_bytes("cpu") == 4 * MiB
    thread.join()
    assert seen == [budget.CPU_BUDGET]


def test_sizes_follow_the_device():
    """On a CPU, cache-sized pieces as before; on CUDA, pieces as large as the budget allows (the
    device is only named, so no GPU is needed)."""
    cpu = plan.plan_for(16384, 16384, "cpu")
    assert cpu.block_entries == 2**22  # today's CPU block: 16 MB of float32
    assert cpu.tile_entries == plan.CPU_TILE_ENTRIES
    with budget.memory_budget("2GB"):
        cuda = plan.plan_for(16384, 16384, "cuda", torch.float64)  # float64: the PyTorch path on any machine
        assert cuda.block_entries == 2 * GiB // plan.PAIR_BLOCK_BYTES_PER_ENTRY
        assert cuda.tile_entries == cuda.block_entries  # a tile is the whole block
        assert plan.plan_for(4096, 4096, "cuda").block_entries == 3 * 4096 * 4096  # one chunk at B = 4096
        assert len(blocks.row_chunks(4096, 4096, "cuda")) == 1
        assert len(blocks.row_chunks(4096, 4096, "cpu")) == 4096 * 4096 // plan.CPU_TILE_ENTRIES
        rows = plan.plan_for(4096, 4096, "cuda", torch.float64, "histograms").chunk_rows
        assert rows == 2 * GiB // plan.HISTOGRAM_BYTES_PER_ENTRY // 4096 >= 4096  # one chunk
        rows = plan.plan_for(4096, 4096, "cpu", work="histograms").chunk_rows
        assert rows == plan.CPU_HISTOGRAM_ENTRIES // 4096 == 64


@pytest.mark.parametrize("name", ["sup_ap", "smooth_ap", "fast_ap", "calibration"])
def test_a_small_budget_bounds_the_largest_tensor_and_changes_no_value(name):
    """Q = 64 queries, N = 512 items, half of them positive: a 1 MB budget (131,072 block entries) is
    smaller than one query's P N (131,072 = 256 x 512) times a few rows; no tensor exceeds it, and the
    values and gradients are those of the default budget."""
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(64, 512, generator=g, requires_grad=True)
    targets = torch.zeros(64, 512, dtype=torch.bool)
    targets[:, ::2] = True
    want = getattr(LF, name)(scores, targets, reduction="none")
    g_want, = torch.autograd.grad(want.sum(), scores)
    with budget.memory_budget("1MB"), LargestTensor() as probe:
        got = getattr(LF, name)(scores, targets, reduction="none")
        g_got, = torch.autograd.grad(got.sum(), scores)
    assert probe.largest <= max(MiB // plan.PAIR_BLOCK_BYTES_PER_ENTRY, 2 * 64 * 512)  # or a few (Q, N) tensors
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(g_got, g_want)


def test_cpu_sized_runs_the_cpus_engine_on_any_device(monkeypatch):
    """The benchmarks' switch: inside ``cpu_sized()`` a CUDA call gets the CPU's plan (PyTorch path, cache
    tiles, the CPU's budget) even where the fused kernels are asked for; after it, the device's own."""
    monkeypatch.setenv(plan.FUSED_ENV, "1")
    with budget.memory_budget("2GB"):
        gpu = plan.plan_for(4096, 4096, "cuda")
        with plan.cpu_sized():
            sized = plan.plan_for(4096, 4096, "cuda")
            assert sized == plan.plan_for(4096, 4096, "cpu")
        assert plan.plan_for(4096, 4096, "cuda") == gpu
    assert not sized.fused and sized.block_entries == 2**22 and sized.tile_entries == plan.CPU_TILE_ENTRIES
    assert gpu.block_entries == 3 * 4096 * 4096 and gpu.tile_entries == gpu.block_entries
    assert gpu.fused == (plan._triton.triton is not None)
    with pytest.raises(AttributeError):
        gpu.fused = False  # a frozen record: nothing below the plan changes it
