"""The AP losses against the papers' definitions, their properties, and the reference repos' defects."""
from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lab.losses as L
from lab.losses import functional as LF
from lab.metrics import average_precision

from . import reference as ref

HPARAMS = {
    "smooth_ap": dict(tau=0.05),
    "sup_ap": dict(tau=0.05, rho=10.0, delta=0.1),
    "calibration": dict(alpha=0.5, beta=0.1),
    "roadmap": dict(lam=0.3, tau=0.05, rho=10.0, delta=0.1, alpha=0.5, beta=0.1),
    "fast_ap": dict(num_bins=8),
    "soft_bin_ap": dict(num_bins=12),
}


def loop_loss(name, s, t, v, hp):
    if name == "smooth_ap":
        return ref.smooth_ap_loop(s, t, v, hp["tau"])
    if name == "sup_ap":
        return ref.sup_ap_loop(s, t, v, hp["tau"], hp["rho"], hp["delta"])
    if name == "calibration":
        return ref.calibration_loop(s, t, v, hp["alpha"], hp["beta"])
    if name == "roadmap":
        sup = ref.sup_ap_loop(s, t, v, hp["tau"], hp["rho"], hp["delta"])
        return (1 - hp["lam"]) * sup + hp["lam"] * ref.calibration_loop(s, t, v, hp["alpha"], hp["beta"])
    if name == "fast_ap":
        return ref.fast_ap_loop(s, t, v, hp["num_bins"])
    return ref.soft_bin_ap_loop(s, t, v, hp["num_bins"])


def random_problem(q=6, n=11, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    scores = (torch.rand(q, n, generator=g, dtype=dtype) * 2 - 1).requires_grad_()
    targets = torch.rand(q, n, generator=g) < 0.35
    mask = torch.rand(q, n, generator=g) > 0.15
    targets[0] = False  # a query without positive
    targets[1, :] = False
    targets[1, 2] = mask[1, 2] = True  # exactly one positive
    targets[2] = mask[2]  # no negatives
    return scores, targets, mask


@pytest.mark.parametrize("name", list(HPARAMS))
def test_vectorised_equals_plain_loops_values_and_gradients(name):
    scores, targets, mask = random_problem()
    hp = HPARAMS[name]
    got = getattr(LF, name)(scores, targets, mask=mask, reduction="none", **hp)
    want = torch.stack([
        torch.as_tensor(loop_loss(name, scores[i], targets[i].tolist(), mask[i].tolist(), hp), dtype=scores.dtype)
        for i in range(len(scores))
    ])
    torch.testing.assert_close(got, want)
    g_got, = torch.autograd.grad(got.sum(), scores)
    g_want, = torch.autograd.grad(want.sum(), scores)
    torch.testing.assert_close(g_got, g_want)
    assert got[0] == 0  # the query without positive


@pytest.mark.parametrize("name", list(HPARAMS))
def test_mean_reduction_averages_queries_with_a_positive(name):
    scores, targets, mask = random_problem()
    fn = getattr(LF, name)
    per_query = fn(scores, targets, mask=mask, reduction="none", **HPARAMS[name])
    has_pos = (targets & mask).any(1)
    torch.testing.assert_close(fn(scores, targets, mask=mask, **HPARAMS[name]), per_query[has_pos].mean())


PAIRWISE = [name for name in HPARAMS if name != "calibration"]  # calibration is O(Q * N), never chunked


@pytest.mark.parametrize("name", PAIRWISE)
def test_chunked_equals_unchunked(name):
    scores, targets, mask = random_problem(q=9, n=13, seed=3)
    fn = getattr(LF, name)
    full = fn(scores, targets, mask=mask, **HPARAMS[name])
    g_full, = torch.autograd.grad(full, scores)
    for chunk_size in (1, 2, 4):
        part = fn(scores, targets, mask=mask, chunk_size=chunk_size, **HPARAMS[name])
        g_part, = torch.autograd.grad(part, scores)
        torch.testing.assert_close(part, full)
        torch.testing.assert_close(g_part, g_full)


@pytest.mark.parametrize("name", list(HPARAMS))
def test_gradcheck_float64(name):
    scores, targets, mask = random_problem(q=4, n=7, seed=5)
    fn = getattr(LF, name)
    kw = dict(HPARAMS[name], **({"chunk_size": 2} if name in PAIRWISE else {}))
    assert torch.autograd.gradcheck(lambda s: fn(s, targets, mask=mask, **kw), (scores,))


@pytest.mark.parametrize("name", [n for n in L.LOSSES if n != "blackbox_ap"])  # see test_losses_blackbox.py
def test_scaled_loss_scales_gradient(name):
    """The FastAP port's hand-written backward ignored the incoming gradient; ours must not."""
    emb = torch.randn(24, 8, dtype=torch.float64, requires_grad=True)
    labels = torch.arange(6).repeat_interleave(4)
    loss_fn = L.build_loss(name, num_classes=6, embed_dim=8)
    g1, = torch.autograd.grad(loss_fn(emb, labels), emb)
    g3, = torch.autograd.grad(3.0 * loss_fn(emb, labels), emb)
    assert g1.abs().sum() > 0
    torch.testing.assert_close(g3, 3.0 * g1)


@pytest.mark.parametrize("name", list(L.LOSSES))
def test_shuffling_the_batch_changes_nothing(name):
    g = torch.Generator().manual_seed(1)
    # Unequal class sizes: a library SmoothAP was only right when #classes == samples per class.
    labels = torch.tensor([0] * 5 + [1] * 3 + [2] * 4 + [3] * 2 + [4] * 6)
    emb = torch.randn(len(labels), 16, generator=g, dtype=torch.float64)
    perm = torch.randperm(len(labels), generator=g)
    loss_fn = L.build_loss(name, num_classes=5, embed_dim=16)
    torch.testing.assert_close(loss_fn(emb[perm], labels[perm]), loss_fn(emb, labels))


def test_smooth_ap_tends_to_exact_ap_as_tau_vanishes():
    g = torch.Generator().manual_seed(2)
    # Scores on a grid of step 0.01: no two items closer than 0.01, so sigma(d / 1e-4) is saturated.
    scores = torch.randperm(200, generator=g)[:40].double().view(4, 10) / 100
    targets = torch.rand(4, 10, generator=g) < 0.4
    targets[:, 0] = True
    exact = average_precision(scores, targets)
    for tau, tol in ((1e-2, 0.3), (1e-3, 1e-3), (1e-4, 1e-12)):
        smooth = 1 - LF.smooth_ap(scores, targets, tau=tau, reduction="none")
        assert (smooth - exact).abs().max() <= tol


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([-1.0, -0.5, -0.2, 0.0, 0.1, 0.3, 0.31, 0.7, 1.0]), min_size=12, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.floats(1e-3, 0.5), st.floats(0.0, 1e3), st.floats(0.0, 0.5),
)
def test_sup_ap_upper_bounds_the_ap_loss(values, flags, tau, rho, delta):
    """ROADMAP Sec. 3.1: H^- >= H makes L_SupAP >= L_AP = 1 - AP, ties included."""
    scores = torch.tensor(values, dtype=torch.float64).view(3, 4)
    targets = torch.tensor(flags).view(3, 4)
    loss = LF.sup_ap(scores, targets, reduction="none", tau=tau, rho=rho, delta=delta)
    has_pos = targets.any(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ap = average_precision(scores, targets)
    assert torch.all(loss[has_pos] >= 1 - ap[has_pos] - 1e-12)


class TestGradientFlowToy:
    """ROADMAP supp. A.1, Fig. 7-8: positives x1, x2 ranked below the negative x3."""

    scores0 = [0.50, 0.51, 0.64]  # s3 - s2 = 0.13, s3 - s1 = 0.14
    targets = torch.tensor([[True, True, False]])

    def grads(self, fn, **kw):
        s = torch.tensor([self.scores0], dtype=torch.float64, requires_grad=True)
        loss = fn(s, self.targets, tau=0.01, **kw)
        return float(loss.detach()), torch.autograd.grad(loss, s)[0][0]

    def test_smooth_ap_opposite_gradients_on_positives_and_vanishing_on_negative(self):
        _, g = self.grads(LF.smooth_ap)
        assert g[0] < 0 < g[1]  # x1 pushed up, x2 pushed down: contradictory
        torch.testing.assert_close(g[0], -g[1], rtol=1e-3, atol=0)  # equal and opposite (supp. A.1)
        assert abs(g[2]) < 1e-3 * abs(g[0])  # the negative barely moves

    def test_exact_rank_pos_removes_the_contradiction(self):
        _, g = self.grads(LF.smooth_ap, exact_rank_pos=True)
        assert g[1] <= 0 and g[0] <= 0  # no positive is pushed down (Fig. 8a)
        assert abs(g[2]) < 1e-4  # but gradients still vanish

    def test_sup_ap_pushes_positives_up_and_the_negative_down(self):
        _, g = self.grads(LF.sup_ap, rho=100.0, delta=0.05)
        _, g_smooth = self.grads(LF.smooth_ap)
        assert g[0] < 0 and g[1] < 0 and g[2] > 0  # Fig. 8b
        assert g[2] > 1e4 * g_smooth[2]  # the linear part of H^- keeps the gradient alive

    def test_losses_order_sup_ap_ap_smooth_ap(self):
        ap = float(average_precision(torch.tensor([self.scores0]), self.targets)[0])
        sup, _ = self.grads(LF.sup_ap, rho=100.0, delta=0.05)
        smooth, _ = self.grads(LF.smooth_ap)
        assert sup >= 1 - ap > smooth


def test_include_self_reproduces_the_reference_objective():
    """The reference repos rank the query as its own top positive: an inflated AP."""
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(64, 32, generator=g)
    labels = torch.arange(16).repeat_interleave(4)
    e = torch.nn.functional.normalize(emb, dim=1)
    scores, targets = e @ e.T, labels[:, None] == labels[None, :]
    ap_with_self = average_precision(scores, targets).mean()
    ap_without = average_precision(scores, targets, ~torch.eye(64, dtype=torch.bool)).mean()
    tiny = dict(tau=1e-5)
    torch.testing.assert_close(1 - L.SmoothAP(include_self=True, **tiny)(emb, labels), ap_with_self, atol=1e-4, rtol=0)
    torch.testing.assert_close(1 - L.SmoothAP(**tiny)(emb, labels), ap_without, atol=1e-4, rtol=0)
    assert ap_with_self > ap_without + 0.15  # the two objectives really differ


@pytest.mark.parametrize("name", [n for n in L.LOSSES if n != "proxy_dg"])
def test_no_positive_in_batch_gives_zero_rank_loss_and_a_warning(name):
    emb = torch.randn(6, 4, requires_grad=True)
    labels = torch.arange(6)
    loss_fn = L.build_loss(name, num_classes=6, embed_dim=4)
    with pytest.warns(RuntimeWarning, match="no query has a positive"):
        loss = loss_fn(emb, labels)
    if not loss_fn.needs_num_classes:
        assert loss == 0
    else:  # the proxy term is a classification loss: it still has something to say
        assert loss > 0
    loss.backward()
    assert torch.isfinite(emb.grad).all()


def test_losses_are_float32_under_autocast():
    emb = torch.randn(32, 16)
    labels = torch.arange(8).repeat_interleave(4)
    want = L.ROADMAP()(emb, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = L.ROADMAP()(emb.bfloat16(), labels)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=0.02, rtol=0)


def test_score_level_half_precision_is_promoted():
    scores, targets, mask = random_problem(dtype=torch.float32)
    assert LF.smooth_ap(scores.detach().half(), targets, mask=mask).dtype == torch.float32


@pytest.mark.parametrize("name", ["fast_ap", "soft_bin_ap"])
def test_histogram_losses_approach_ap_with_many_bins(name):
    g = torch.Generator().manual_seed(4)
    scores = torch.rand(20, 30, generator=g, dtype=torch.float64) * 2 - 1
    targets = torch.rand(20, 30, generator=g) < 0.3
    targets[:, 0] = True
    ap = average_precision(scores, targets)
    fine = 1 - getattr(LF, name)(scores, targets, num_bins=2000, reduction="none")
    coarse = 1 - getattr(LF, name)(scores, targets, num_bins=4, reduction="none")
    assert (fine - ap).abs().max() < 0.02
    assert (coarse - ap).abs().mean() > (fine - ap).abs().mean()


def test_fast_ap_bin_width_trade_off():
    """FastAP Fig. 4c: perfectly ranked with a small margin -> FastAP = 1 and no gradient with
    fine bins, but a learning signal with coarse bins."""
    # Off the bin centres: a value exactly on a centre sits on the kernel's kink.
    scores = torch.tensor([[0.903, 0.883, 0.867, 0.803, 0.787, 0.768]], dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[True, True, True, False, False, False]])
    fine = LF.fast_ap(scores, targets, num_bins=400)  # bin width 0.01 in squared distance
    g_fine, = torch.autograd.grad(fine, scores)
    coarse = LF.fast_ap(scores, targets, num_bins=4)
    g_coarse, = torch.autograd.grad(coarse, scores)
    assert fine.abs() < 1e-12 and g_fine.abs().max() < 1e-12
    assert coarse > 0.01 and g_coarse[0, :3].max() < 0 and g_coarse[0, 3:].min() > 0


def test_soft_bin_ap_query_without_positive_is_not_nan():
    scores = torch.tensor([[0.3, 0.2], [0.1, 0.5]], requires_grad=True)
    targets = torch.tensor([[False, False], [True, False]])
    losses = LF.soft_bin_ap(scores, targets, reduction="none")
    assert losses[0] == 0 and torch.isfinite(losses).all()
    losses.sum().backward()
    assert torch.isfinite(scores.grad).all()
