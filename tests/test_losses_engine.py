"""The fused loss engine against the old autograd engine, frozen in bench/frozen_autograd_engine.py: the same
values and gradients on random data with ties, on batches of one and two classes, and memory that
does not grow with the number of positives (asserted on tensor sizes, never on seconds)."""
from __future__ import annotations

import importlib
import re
import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import lab.core.budget as budget
import lab.losses as L
from lab.core.relevance import hap_relevance, ndcg_relevance
from lab.core.steps import h_minus, kernel_bins, soft_histogram
from lab.losses import functional as LF
from lab.losses.engine import pair_sums, plan

from bench import frozen_autograd_engine as R
from .test_losses_inputs import LargestTensor

# Score-level losses on the engine, each with its defaults and with other hyper-parameters.
CASES = [
    ("smooth_ap", {}), ("smooth_ap", dict(tau=0.05, exact_rank_pos=True)),
    ("sup_ap", {}), ("sup_ap", dict(tau=0.05, rho=3.0, delta=0.0)), ("sup_ap", dict(rho=0.0, delta=0.1)),
    ("smooth_recall", {}), ("sup_recall", dict(ks=(1, 3))), ("roadmap", {}), ("rod_recall", {}),
    ("calibration", {}), ("calibration", dict(alpha=0.5, beta=0.0)),
    ("fast_ap", {}), ("fast_ap", dict(num_bins=3)), ("soft_bin_ap", {}), ("soft_bin_ap", dict(num_bins=7)),
]
GRADED = ["sup_hap", "sup_ndcg"]


def tied_problem(q: int, n: int, seed: int, dtype: torch.dtype, grid: int = 20):
    """Scores on a grid of step 1 / grid (many ties, also at the kinks delta = 0.05 and 0, and on the
    histogram bin centres), uneven positives, masked items, a query without positive and one whose
    items are all positive."""
    g = torch.Generator().manual_seed(seed)
    scores = ((torch.rand(q, n, generator=g, dtype=torch.float64) * 2 - 1) * grid).round() / grid
    targets = torch.rand(q, n, generator=g) < torch.linspace(0.05, 0.6, q, dtype=torch.float64)[:, None]
    mask = torch.rand(q, n, generator=g) > 0.1
    targets[0] = False
    targets[1] = True
    return scores.to(dtype).requires_grad_(), targets, mask


def values_and_grads(fn, scores, *args, **kwargs):
    losses = fn(scores, *args, reduction="none", **kwargs)
    grad, = torch.autograd.grad((losses * torch.linspace(0.5, 1.5, len(losses), dtype=losses.dtype)).sum(), scores)
    return losses.detach(), grad


@pytest.mark.parametrize("name, hparams", CASES)
@pytest.mark.parametrize("grid", [20, 8])
def test_same_values_and_gradients_as_the_frozen_engine_with_ties_float64(name, hparams, grid):
    scores, targets, mask = tied_problem(23, 41, seed=grid, dtype=torch.float64, grid=grid)
    got, g_got = values_and_grads(getattr(LF, name), scores, targets, mask=mask, **hparams)
    want, g_want = values_and_grads(getattr(R, name), scores, targets, mask=mask, **hparams)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(g_got, g_want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name, hparams", CASES)
def test_same_values_and_gradients_as_the_frozen_engine_float32(name, hparams):
    """B = 384 cosine scores with 4 samples per class, plus ties: values to 1e-6, gradients to float32 rounding."""
    g = torch.Generator().manual_seed(3)
    e = torch.nn.functional.normalize(torch.randn(384, 64, generator=g), dim=1)
    scores = ((e @ e.T) * 4096).round().div(4096).requires_grad_()
    labels = torch.arange(384) // 4
    targets, mask = labels[:, None] == labels[None, :], ~torch.eye(384, dtype=torch.bool)
    got, g_got = values_and_grads(getattr(LF, name), scores, targets, mask=mask, **hparams)
    want, g_want = values_and_grads(getattr(R, name), scores, targets, mask=mask, **hparams)
    assert (got - want).abs().max() <= 1e-6
    assert (g_got - g_want).abs().max() <= 1e-5 * g_want.abs().max()


@pytest.mark.parametrize("name", GRADED)
@pytest.mark.parametrize("grid", [None, 6])
def test_graded_losses_same_as_the_frozen_engine(name, grid):
    g = torch.Generator().manual_seed(11)
    scores = torch.rand(9, 30, generator=g, dtype=torch.float64)
    if grid:
        scores = (scores * grid).round() / grid
    levels = torch.randint(0, 3, (9, 30), generator=g)
    mask = torch.rand(9, 30, generator=g) > 0.1
    relevance = (hap_relevance(levels, 2, mask) if name == "sup_hap" else ndcg_relevance(levels, mask)).double()
    scores.requires_grad_()
    got, g_got = values_and_grads(getattr(LF, name), scores, relevance, mask=mask)
    want, g_want = values_and_grads(getattr(R, name), scores, relevance, mask=mask)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(g_got, g_want, rtol=0, atol=1e-10)


def frozen_module(name: str, **kwargs) -> torch.nn.Module:
    """The embedding-level loss ``name`` with the frozen engine's score-level functions in every part."""
    module = L.build_loss(name, **kwargs)
    for part in module.modules():
        fn = getattr(part, "functional", None)
        if fn is not None and hasattr(R, fn.__name__):
            part.functional = getattr(R, fn.__name__)
    return module


ENGINE_LOSSES = [n for n in L.LOSSES if n not in ("blackbox_ap", "proxy_dg")]  # those never used the engine


@pytest.mark.parametrize("name", ENGINE_LOSSES)
@pytest.mark.parametrize("classes", [1, 2])
def test_one_and_two_class_batches_same_as_the_frozen_engine(name, classes):
    g = torch.Generator().manual_seed(classes)
    emb = torch.randn(48, 16, generator=g, dtype=torch.float64, requires_grad=True)
    fine = torch.arange(48) % classes
    labels = torch.stack([fine, torch.arange(48) % 3], 1)  # a second level: graded relevance varies
    kwargs = dict(num_classes=2, embed_dim=16)
    torch.manual_seed(0)
    new = L.build_loss(name, **kwargs).double()
    torch.manual_seed(0)
    old = frozen_module(name, **kwargs).double()
    got, want = new(emb, labels), old(emb, labels)
    g_got, = torch.autograd.grad(got, emb)
    g_want, = torch.autograd.grad(want, emb)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(g_got, g_want, rtol=0, atol=1e-12)


class PeakLiveBytes(TorchDispatchMode):
    """Peak bytes of the storages created inside the mode and still alive (freed storages are
    subtracted when Python releases them), and the largest tensor produced."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = self.largest = 0

    def _freed(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
                storage = t.untyped_storage()
                if not hasattr(storage, "_probe_counted"):
                    storage._probe_counted = True
                    self.live += storage.nbytes()
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._freed, storage.nbytes())
        return out


def probe(module: torch.nn.Module, batch: int, per_class: int) -> PeakLiveBytes:
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(batch, 32, generator=g, requires_grad=True)
    labels = torch.arange(batch) // per_class
    labels = torch.stack([labels, labels // 2], 1)
    with PeakLiveBytes() as p:
        module(emb, labels).backward()
    return p


FEW_CLASS_LOSSES = ["smooth_ap", "sup_ap", "roadmap", "smooth_recall", "sup_recall", "sup_hap", "sup_ndcg", "fast_ap",
                    "soft_bin_ap"]


@pytest.mark.parametrize("name", FEW_CLASS_LOSSES)
def test_one_or_two_classes_need_no_more_memory_than_four_per_class(name):
    """B = 160: a query of a 2-class batch has 79 positives, of a 1-class batch 159, against 3 with
    4 samples per class. Today's engine makes (query, positive, item) blocks of 4M entries for them
    (50x the 4-per-class ones); the engine's chunks and tiles keep to the 4-per-class budget."""
    batch = 160
    budget = plan.plan_for(batch, batch, "cpu").block_entries
    assert budget == 3 * batch * batch  # 4 per class: P = 3
    kwargs = dict(num_classes=batch, embed_dim=32)
    frozen = probe(frozen_module(name, **kwargs), batch, 4)
    for per_class in (batch // 2, batch):
        few = probe(L.build_loss(name, **kwargs), batch, per_class)
        assert few.largest <= budget
        assert few.peak <= frozen.peak
    if name not in ("fast_ap", "soft_bin_ap"):  # the probes can fail: the frozen engine does not pass them
        assert probe(frozen_module(name, **kwargs), batch, batch).largest > 10 * budget


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smooth_ap", "sup_ap", "smooth_recall"])
def test_score_level_block_stays_within_budget_with_thousands_of_positives(name):
    """4 queries against 6,000 items of which 3,000 are positives: P N = 1.8e7 entries for one query,
    but no tensor beyond the budget (here the 2**16 floor: 3 Q N = 72,000)."""
    g = torch.Generator().manual_seed(1)
    scores = torch.rand(4, 6000, generator=g, requires_grad=True)
    targets = torch.zeros(4, 6000, dtype=torch.bool)
    targets[:, ::2] = True
    budget = plan.plan_for(4, 6000, "cpu").block_entries
    with LargestTensor() as p:
        getattr(LF, name)(scores, targets).backward()
    assert p.largest <= max(budget, 6000 * 3)  # a (c, 3, N) or (c, N) row tensor at most
    assert torch.isfinite(scores.grad).all() and scores.grad.abs().sum() > 0


def brute_force_sums(items, anchors, tau, rho=None, delta=None):
    t = items[:, None, :] - anchors[:, :, None]
    step = torch.sigmoid(t / tau) if rho is None else h_minus(t, tau, rho, delta)
    return torch.where(torch.isfinite(items)[:, None, :], step, torch.zeros_like(step)).sum(-1)


@pytest.mark.parametrize("kind", [dict(), dict(rho=10.0, delta=0.1), dict(rho=0.0, delta=0.0)])
@pytest.mark.parametrize("tiny", [False, True])
def test_pair_sums_match_brute_force_and_gradcheck(kind, tiny):
    """Dense definition (with ties at 0 and at delta, and items left out as -inf); with ``tiny``,
    tiles of 7 entries cut rows into several anchor tiles and nothing is kept for the backward."""
    budget = 7 if tiny else 2**16
    g = torch.Generator().manual_seed(2)
    items = (torch.randint(-4, 5, (3, 6), generator=g) / 10).double()
    items[0, 1] = float("-inf")
    anchors = items[:, [0, 2, 3, 4]].clone()
    anchors[0, 0] = 0.3
    tau = 0.1
    with torch.no_grad():
        got = pair_sums.PairSums(items, anchors, tau, need_grad=False, block_entries=budget, tile_entries=budget,
                                 **kind).sums
    torch.testing.assert_close(got, brute_force_sums(items, anchors, tau, **kind))

    def fn(i, a):
        return _Sums.apply(i, a, dict(tau=tau, block_entries=budget, tile_entries=budget, **kind))

    # Off the ties (the kinks) for the finite differences: anchors are not items here.
    smooth_items = items + torch.rand(3, 6, generator=g, dtype=torch.float64) * 0.01
    smooth_anchors = anchors + torch.rand(3, 4, generator=g, dtype=torch.float64) * 0.01 + 0.003
    assert torch.autograd.gradcheck(fn, (smooth_items.requires_grad_(), smooth_anchors.requires_grad_()))


class _Sums(torch.autograd.Function):
    """PairSums as an autograd function, for gradcheck (whose backward runs once per output: a
    PairSums is built for each, as the engine builds one per backward)."""

    @staticmethod
    def forward(ctx, items, anchors, kwargs):
        ctx.save_for_backward(items, anchors)
        ctx.kwargs = kwargs
        return pair_sums.PairSums(items, anchors, need_grad=False, **kwargs).sums

    @staticmethod
    def backward(ctx, grad):
        items, anchors = ctx.saved_tensors
        grad_items = torch.zeros_like(items)
        grad_anchors = pair_sums.PairSums(items, anchors, need_grad=True, **ctx.kwargs).backward(grad, grad_items)
        return grad_items, grad_anchors, None


def test_count_at_least_is_the_exact_step_with_ties():
    items = torch.tensor([[0.1, 0.3, 0.3, float("-inf"), -0.2]])
    anchors = torch.tensor([[0.3, -0.2, 0.5]])
    torch.testing.assert_close(pair_sums.count_at_least(items, anchors), torch.tensor([[2.0, 4.0, 0.0]]))


@pytest.mark.parametrize("centres", [torch.linspace(0.0, 4.0, 11), torch.linspace(1.0, -1.0, 20)])
def test_kernel_bins_give_soft_histogram(centres):
    """Values on the centres, between them, at and beyond both ends: same counts and gradients."""
    width = float((centres[1] - centres[0]).abs())
    lo, hi = float(centres.min()), float(centres.max())
    values = torch.cat([centres, (centres[1:] + centres[:-1]) / 2, torch.tensor([lo - 0.3 * width, hi + width]),
                        torch.linspace(lo - width, hi + width, 37)]).double()[None].requires_grad_()
    weights = (torch.arange(values.shape[1]) % 3 != 0).double()[None]
    index, weight = kernel_bins(values, centres.double(), width)
    got = torch.zeros(1, len(centres), dtype=torch.float64)
    got = got.scatter_add(1, index.flatten(1), (weight * weights[:, None]).flatten(1))
    want = soft_histogram(values, centres.double(), width, weights)
    torch.testing.assert_close(got, want)
    g_got, = torch.autograd.grad((got * torch.arange(len(centres))).sum(), values)
    g_want, = torch.autograd.grad((want * torch.arange(len(centres))).sum(), values)
    torch.testing.assert_close(g_got, g_want)


@pytest.mark.parametrize("name", ["smooth_ap", "sup_ap", "fast_ap", "calibration", "sup_recall"])
def test_tiny_budgets_and_no_grad_change_nothing(name, monkeypatch):
    scores, targets, mask = tied_problem(17, 29, seed=5, dtype=torch.float64)
    want, g_want = values_and_grads(getattr(LF, name), scores, targets, mask=mask)
    with torch.no_grad():
        torch.testing.assert_close(getattr(LF, name)(scores, targets, mask=mask, reduction="none"), want)
    monkeypatch.setattr(plan, "MIN_BLOCK_ENTRIES", 1)
    monkeypatch.setattr(budget, "MIN_BUDGET", 1)
    # 40 entries: chunks of 1 query, anchors cut in tiles, recomputed; histogram chunks of 1 query.
    with budget.memory_budget(40 * plan.PAIR_BLOCK_BYTES_PER_ENTRY):
        assert plan.plan_for(17, 29, "cpu").block_entries == 40
        got, g_got = values_and_grads(getattr(LF, name), scores, targets, mask=mask)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(g_got, g_want)


def test_backward_twice_with_retain_graph_gives_the_same_gradient():
    scores, targets, mask = tied_problem(6, 9, seed=1, dtype=torch.float64)
    loss = LF.sup_ap(scores, targets, mask=mask)
    first, = torch.autograd.grad(loss, scores, retain_graph=True)
    second, = torch.autograd.grad(loss, scores)
    torch.testing.assert_close(first, second)


def test_every_loss_names_its_loop_reference_and_it_exists():
    """Each registered loss's docstring (class or function form) says "Reference: ``tests/<file>.py::<loop>``";
    every loop it names is a function of that file (a renamed loop would leave a stale pointer)."""
    for name, cls in L.LOSSES.items():
        docs = (cls.__doc__ or "") + (getattr(getattr(cls, "functional", None), "__doc__", None) or "")
        line = next((ln for ln in docs.splitlines() if "Reference:" in ln), None)
        assert line is not None, f"{name}: no 'Reference:' line in its docstrings"
        module = None
        for path, loop in re.findall(r"``(?:tests/(\w+)\.py::)?(\w+)``", line.split("Reference:", 1)[1]):
            module = importlib.import_module(f"tests.{path}") if path else module
            assert module is not None and callable(getattr(module, loop, None)), f"{name}: {loop} not found"
