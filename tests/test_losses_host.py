"""What a loss call costs the host, counted (never timed): the Python frames between ``SmoothAP()(emb,
labels)`` and its arithmetic, and the host synchronisations of the block loop, which must not grow
with the number of blocks (on a GPU each one drains the queue; issue 34's "last GPU mile")."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import lab.losses as L
from lab.losses import functional as LF
from lab.losses.engine import blocks, plan

# Tensor methods that wait for the device: a value has to reach the host.
SYNCS = ("item", "tolist", "nonzero", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy")


def test_smooth_ap_reaches_its_sigmoid_in_few_frames(monkeypatch):
    """13 frames before the engine became a package (12 of the review's count plus the closure's run);
    the block loop now calls the loss's block function and the block its sums directly."""
    depths = []
    sigmoid_ = torch.Tensor.sigmoid_

    def spy(self, *args, **kwargs):
        depths.append(len(inspect.stack(0)))
        return sigmoid_(self, *args, **kwargs)

    emb = torch.randn(16, 8, requires_grad=True)
    loss = L.SmoothAP()
    monkeypatch.setattr(torch.Tensor, "sigmoid_", spy)
    here = len(inspect.stack(0))
    loss(emb, torch.arange(16) % 4)
    assert depths, "the sigmoid was not reached through Tensor.sigmoid_: the probe must follow the code"
    frames = min(depths) - here - 1  # the frames strictly between this test and the spy
    assert frames <= 9, f"SmoothAP()(emb, labels) reaches its sigmoid through {frames} frames (13 before)"


@pytest.fixture
def syncs(monkeypatch):
    """Counts every call of a synchronising Tensor method."""
    count = {"n": 0}
    for name in SYNCS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            count["n"] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    monkeypatch.setattr(torch, "nonzero", lambda *a, _o=torch.nonzero, **k: count.__setitem__("n", count["n"] + 1)
                        or _o(*a, **k))
    return count


@pytest.fixture
def accelerator_plan(monkeypatch):
    """The plan an accelerator gets (``sync_free``), for the CPU tensors of these tests."""
    def accelerated(*args, **kwargs):
        return dataclasses.replace(plan.plan_for(*args, **kwargs), sync_free=True)
    monkeypatch.setattr(blocks, "plan_for", accelerated)


def test_only_accelerators_run_the_block_loop_sync_free():
    with L.memory_budget("1GB"):  # a device named, not asked (no GPU here)
        assert plan.plan_for(8, 8, "cuda").sync_free and plan.plan_for(8, 8, "mps").sync_free
    assert not plan.plan_for(8, 8, "cpu").sync_free  # nonzero is cheaper there, and a read costs nothing


@pytest.mark.parametrize("seed", range(5))
def test_sync_free_compaction_is_nonzeros(seed):
    g = torch.Generator().manual_seed(seed)
    flags = torch.rand(7, 13, generator=g) < [0.0, 0.1, 0.5, 1.0][seed % 4]
    flags[seed % 7, :] = seed % 2 == 0
    index, present = blocks.compact(flags)
    width = index.shape[1]
    for extra in (0, 3):
        got_index, got_present = blocks.compact(flags, width + extra)
        assert torch.equal(got_present[:, :width], present) and not got_present[:, width:].any()
        assert torch.equal(got_index[:, :width], index) and not got_index[:, width:].any()  # padding: column 0


@pytest.mark.parametrize("name", ["smooth_ap", "sup_ap", "smooth_recall", "fast_ap"])
def test_host_syncs_do_not_grow_with_the_number_of_blocks(name, syncs, accelerator_plan):
    """The same call in 1 chunk and in 24 chunks of one query, with an accelerator's plan: as many
    synchronisations (the call's own checks and the compaction widths, read once), forward and backward."""
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(24, 40, generator=g, requires_grad=True)
    targets = (torch.arange(24)[:, None] % 5) == (torch.arange(40)[None, :] % 5)
    fn = getattr(LF, name)
    fn(scores, targets, chunk_size=1).backward()  # warm host-side caches (constants per hyper-parameter)
    counts = {}
    for chunk_size in (None, 1):
        syncs["n"] = 0
        fn(scores, targets, chunk_size=chunk_size).backward()
        counts[chunk_size] = syncs["n"]
    assert counts[1] == counts[None], f"{name}: {counts[None]} syncs in one chunk, {counts[1]} in 24 chunks"
    assert counts[None] <= 8  # and few per call


def test_the_sync_counter_sees_the_cpus_syncs_per_block(syncs):
    """The probe can fail: on a CPU's plan each block reads its compaction widths, once per block."""
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(24, 40, generator=g, requires_grad=True)
    targets = (torch.arange(24)[:, None] % 5) == (torch.arange(40)[None, :] % 5)
    counts = {}
    for chunk_size in (None, 1):
        syncs["n"] = 0
        LF.smooth_ap(scores, targets, chunk_size=chunk_size).backward()
        counts[chunk_size] = syncs["n"]
    assert counts[1] >= counts[None] + 23


@pytest.mark.parametrize("name", ["smooth_ap", "sup_ap", "smooth_recall", "sup_recall"])
@pytest.mark.parametrize("chunk_size", [None, 3])
def test_the_sync_free_loop_gives_the_cpus_values_and_gradients(name, chunk_size, monkeypatch):
    """An accelerator's loop (widths read once per call, padded to the call's widths) against a CPU's
    (each chunk at its own widths), on uneven classes with ties and masked items."""
    g = torch.Generator().manual_seed(4)
    scores = (torch.randint(-8, 9, (11, 30), generator=g) / 16).double()
    targets = (torch.arange(11)[:, None] % 4) == (torch.randint(0, 6, (30,), generator=g)[None, :] % 4)
    mask = torch.rand(11, 30, generator=g) > 0.1
    results = []
    for sync_free in (False, True):
        with monkeypatch.context() as m:
            if sync_free:
                m.setattr(blocks, "plan_for",
                          lambda *a, **k: dataclasses.replace(plan.plan_for(*a, **k), sync_free=True))
            s = scores.clone().requires_grad_()
            losses = getattr(LF, name)(s, targets, mask=mask, reduction="none", chunk_size=chunk_size)
            results.append((losses.detach(), torch.autograd.grad(losses.sum(), s)[0]))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


class MaskCounts(TorchDispatchMode):
    """Counts the sums along dim 1 of 2-d bool masks ``columns`` wide: on a CPU each one first copies
    the mask to integers (at B = 4096 a tenth of smooth_ap's time went to counting the same masks again)."""

    def __init__(self, columns: int) -> None:
        super().__init__()
        self.columns, self.n = columns, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        x = args[0] if args else None
        if func.overloadpacket is torch.ops.aten.sum and isinstance(x, torch.Tensor) and x.dtype == torch.bool \
                and x.dim() == 2 and x.shape[1] == self.columns:
            self.n += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name, hparams", [("smooth_ap", {}), ("smooth_ap", {"exact_rank_pos": True}),
                                           ("sup_ap", {}), ("smooth_recall", {})])
def test_a_cpu_block_counts_its_items_once_and_its_positives_never(name, hparams):
    """The positives are counted once per call (the chunks' sizes need them) and each block reuses that
    count; a block's items (kept or negatives) are counted once, compacted or not. 1 chunk against 24."""
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(24, 40, generator=g, requires_grad=True)
    targets = (torch.arange(24)[:, None] % 5) == (torch.arange(40)[None, :] % 5)
    counts = {}
    for chunk_size in (None, 1):
        with MaskCounts(scores.shape[1]) as probe:
            getattr(LF, name)(scores, targets, chunk_size=chunk_size, **hparams).backward()
        counts[chunk_size] = probe.n
    assert counts[None] >= 2, "the probe saw no count of a mask: it must follow the code"
    assert counts[1] - counts[None] == 23, f"{name}: {counts[None]} mask counts in 1 chunk, {counts[1]} in 24"
