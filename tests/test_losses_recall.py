"""Smooth-R@k (Patel et al.), Sup-R@k (SupRank Eq. 16) and ROD-R@k (Eq. 17)."""
from __future__ import annotations

import pytest
import torch

import lab.losses as L
import lab.losses.functional as LF
from tests.reference_graded import assert_same_values_and_grads, smooth_recall_loop, sup_recall_loop

KS = (1, 2, 4)


def uneven_problem(seed=0, q=5, n=14):
    """Queries with 1, 2, ... positives (the reference code needs equal counts), some items masked."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(q, n, generator=g, dtype=torch.float64) * 2 - 1
    targets = torch.zeros(q, n, dtype=torch.bool)
    for i in range(q):
        targets[i, torch.randperm(n, generator=g)[: i + 1]] = True
    mask = torch.rand(q, n, generator=g) > 0.15
    mask[:, :1] |= targets[:, :1] | True
    return scores.requires_grad_(True), targets, mask


@pytest.mark.parametrize("tau_star", [1.0, 3.0])
def test_recall_losses_match_loops_values_and_gradients(tau_star):
    scores, targets, mask = uneven_problem()
    cases = ((LF.smooth_recall, dict(tau=0.05), lambda s, t, m: smooth_recall_loop(s, t, m, 0.05, tau_star, KS)),
             (LF.sup_recall, dict(tau=0.05, rho=10.0, delta=0.05),
              lambda s, t, m: sup_recall_loop(s, t, m, 0.05, 10.0, 0.05, tau_star, KS)))
    for fn, kw, loop in cases:
        got = fn(scores, targets, mask=mask, reduction="none", ks=KS, tau_star=tau_star, **kw)
        want = torch.stack([loop(list(s), t.tolist(), m.tolist()) for s, t, m in zip(scores, targets, mask)])
        assert_same_values_and_grads(got, want, scores)


@pytest.mark.parametrize("name", ["smooth_recall", "sup_recall"])
def test_pushing_a_negative_below_a_positive_lowers_the_loss(name):
    fn = getattr(LF, name)
    positives = torch.tensor([[False, True, False, True, False]])
    before = torch.tensor([[0.9, 0.5, 0.45, 0.3, 0.1]])  # a negative ranked first
    losses = [float(fn(before, positives))]
    for new_score in (0.7, 0.52, 0.4, 0.2, 0.0):  # the negative moves down, step by step
        after = before.clone()
        after[0, 0] = new_score
        losses.append(float(fn(after, positives)))
    assert losses[-1] < losses[0]
    if name == "sup_recall":  # H^- is strictly increasing: every step helps
        assert all(a > b for a, b in zip(losses, losses[1:]))
    else:  # the sigmoid saturates: far above (0.9 -> 0.7) changes nothing
        assert all(a >= b for a, b in zip(losses, losses[1:]))


def test_sup_recall_keeps_a_gradient_where_the_rank_sigmoid_has_saturated():
    """H^-'s linear part: a negative 0.3 above a positive still gets pushed down (Fig. 2b vs 2c).
    (Far enough above, the outer sigmoid of Eq. 16 saturates in turn, for both losses.)"""
    scores = torch.tensor([[0.6, 0.3, 0.2]], requires_grad=True)
    targets = torch.tensor([[False, True, True]])
    g_sup, = torch.autograd.grad(LF.sup_recall(scores, targets, rho=10.0), scores)
    g_smooth, = torch.autograd.grad(LF.smooth_recall(scores, targets), scores)
    assert g_sup[0, 0] > 1e-3 and abs(g_smooth[0, 0]) < 1e-8


@pytest.mark.parametrize("name", ["smooth_recall", "sup_recall", "rod_recall"])
def test_chunked_equals_unchunked_and_gradcheck(name):
    scores, targets, mask = uneven_problem(seed=1, q=4, n=8)
    fn = getattr(LF, name)
    whole = fn(scores, targets, mask=mask, reduction="none", tau=0.1)
    chunked = fn(scores, targets, mask=mask, reduction="none", tau=0.1, chunk_size=1)
    assert_same_values_and_grads(chunked, whole, scores)
    assert torch.autograd.gradcheck(lambda s: fn(s, targets, mask=mask, tau=0.1, chunk_size=3), (scores,))


def test_rod_recall_is_the_convex_combination_of_eq17():
    scores, targets, mask = uneven_problem(seed=2)
    kw = dict(mask=mask, reduction="none")
    rank = LF.sup_recall(scores, targets, **kw)
    calib = LF.calibration(scores, targets, **kw)
    torch.testing.assert_close(LF.rod_recall(scores, targets, lam=0.3, **kw), 0.7 * rank + 0.3 * calib)


def test_recall_estimate_never_exceeds_one():
    """Tied positives have smooth ranks below k; the soft count is capped at k (Patel et al.)."""
    scores = torch.zeros(1, 12)
    targets = torch.ones(1, 12, dtype=torch.bool)
    targets[0, -1] = False
    loss = LF.smooth_recall(scores, targets, ks=(8,))
    assert 0 <= float(loss) < 0.1


def test_embedding_level_defaults_follow_the_papers():
    assert L.SupRecall().hparams["ks"] == (1, 2, 4, 8, 16) and L.SupRecall().hparams["tau_star"] == 1.0
    assert L.SmoothRecall(ks=[1, 10]).hparams["ks"] == (1, 10)
    emb, labels = torch.randn(20, 8), torch.arange(5).repeat_interleave(4)
    assert float(L.RODRecall(lam=0.0)(emb, labels)) == pytest.approx(float(L.SupRecall()(emb, labels)))


@pytest.mark.parametrize("ks", [(), [0, 1], (2, -1), [1.5], (True,), "1"])
def test_bad_ks_raise(ks):
    with pytest.raises(ValueError, match="ks must be a non-empty list of positive integers"):
        L.SupRecall(ks=ks)
    with pytest.raises(ValueError, match="ks must be"):
        LF.smooth_recall(torch.rand(2, 3), torch.ones(2, 3, dtype=torch.bool), ks=ks)


def test_bad_temperatures_raise():
    with pytest.raises(ValueError, match=r"tau_star must be a number in \[0.001, 100\]"):
        L.SmoothRecall(tau_star=0.0)
    with pytest.raises(ValueError, match="rho must be"):
        L.SupRecall(rho=-1.0)
