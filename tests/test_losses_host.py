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
    """The shapes of the 2-d bool masks summed along dim 1 (``summed``) or copied to integers (``copied``):
    on a CPU a sum of a bool mask first copies it to integers, as costly as the sum or more (at B = 4096
    a tenth of smooth_ap's time went to counting masks again or in one piece)."""

    def __init__(self) -> None:
        super().__init__()
        self.summed: list[tuple[int, ...]] = []
        self.copied: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        def bool_2d(x) -> bool:
            return isinstance(x, torch.Tensor) and x.dtype == torch.bool and x.dim() == 2
        if func.overloadpacket is torch.ops.aten.sum and bool_2d(args[0]):
            self.summed.append(tuple(args[0].shape))
        if func.overloadpacket is torch.ops.aten.copy_ and bool_2d(args[1]) and args[0].dtype != torch.bool:
            self.copied.append(tuple(args[1].shape))
        return func(*args, **(kwargs or {}))


def _counted_call(name: str, hparams: dict, q: int, n: int, chunk_size=None) -> MaskCounts:
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(q, n, generator=g, requires_grad=True)
    targets = (torch.arange(q)[:, None] % 5) == (torch.arange(n)[None, :] % 5)
    with MaskCounts() as probe:
        getattr(LF, name)(scores, targets, chunk_size=chunk_size, **hparams).backward()
    return probe


COUNTED = [("smooth_ap", {}), ("smooth_ap", {"exact_rank_pos": True}), ("sup_ap", {}), ("smooth_recall", {})]


@pytest.mark.parametrize("name, hparams", COUNTED)
def test_a_cpu_block_counts_its_items_once_and_its_positives_never(name, hparams):
    """The positives are counted once per call (the chunks' sizes need them) and each block reuses that
    count; a block's items (kept or negatives) are counted once, compacted or not. 1 chunk against 24."""
    counts = {chunk_size: sum(shape[1] == 40 for shape in _counted_call(name, hparams, 24, 40, chunk_size).summed)
              for chunk_size in (None, 1)}
    assert counts[None] >= 1, "the probe saw no count of a mask: it must follow the code"
    assert counts[1] - counts[None] == 23, f"{name}: {counts[None]} mask counts in 1 chunk, {counts[1]} in 24"


@pytest.mark.parametrize("name, hparams", COUNTED)
def test_a_call_counts_its_masks_in_row_chunks_only(name, hparams):
    """No (Q, N) mask is summed or copied to integers in one piece: the call's count of positives goes
    through the plan's row chunks (32 rows of 256 items in a 64 KB budget), as the blocks do."""
    with L.memory_budget("64KB"):
        rows = blocks.row_chunks(256, 256, torch.device("cpu"))[0].stop
        probe = _counted_call(name, hparams, 256, 256)
    counted = [shape[0] for shape in probe.summed + probe.copied if shape[1] == 256]
    assert counted, "the probe saw no mask counted: it must follow the code"
    largest = max(counted)
    assert largest <= rows, f"{name}: a mask of {largest} rows counted in one piece (row chunks: {rows})"


@pytest.mark.parametrize("q, n", [(0, 5), (5, 0), (7, 3), (257, 256)])
def test_count_rows_gives_each_rows_count(q, n):
    flags = torch.rand(q, n, generator=torch.Generator().manual_seed(q + n)) < 0.3
    with L.memory_budget("64KB"):  # 257 rows of 256: 9 chunks of 32 rows, the last of one
        got = blocks.count_rows(flags)
    assert got.dtype == torch.int32 and got.tolist() == [sum(row.tolist()) for row in flags]
