"""Recall@k figures (SupRank Eq. 13-16) and the recall surrogates' toy gradient flow."""
import math

import pytest
import torch

from lab.losses.functional import smooth_recall, sup_recall
from lab.viz.gradient_flow import (RECALL_KS, TOY_SCORES, TOY_TARGETS, plot_recall_gradient_flow, recall_loss,
                                   toy_gradients)
from lab.viz.recall_at_k import (RECALL_LIST, plot_recall_at_k, plot_recall_surrogate, recall_curves,
                                 surrogate_step)


def test_curves_follow_the_definitions():
    c = recall_curves(RECALL_LIST)
    pos_ranks = [r for r, p in enumerate(RECALL_LIST, start=1) if p]
    for k, r_at_k, tr_at_k in zip(c["k"], c["R@k"], c["TR@k"]):
        hits = sum(r <= k for r in pos_ranks)
        assert r_at_k == float(hits > 0)  # Eq. 13
        assert tr_at_k == pytest.approx(hits / min(k, len(pos_ranks)))  # Eq. 14
    fig = plot_recall_at_k(RECALL_LIST)
    assert list(fig.data[1].y) == c["R@k"] and list(fig.data[2].y) == c["TR@k"]


@pytest.mark.parametrize("k, tau_star", [(4, 1.0), (1, 0.05), (12, 5.0)])
def test_outer_sigmoid_and_its_slope(k, tau_star):
    s = surrogate_step(k, tau_star)
    for r, step, soft, slope in zip(s["rank"], s["step"], s["sigmoid"], s["slope"]):
        assert step == float(r <= k)
        assert soft == pytest.approx(1 / (1 + math.exp(-(k - r) / tau_star)))
        assert slope == pytest.approx(soft * (1 - soft) / tau_star, abs=1e-12)
    fig = plot_recall_surrogate(k, tau_star)
    assert list(fig.data[1].y) == s["sigmoid"] and fig.layout.shapes[0].x0 == k


def test_recall_toy_gradients_are_autograds():
    flows = toy_gradients(family="recall")
    targets = torch.tensor([list(TOY_TARGETS)])
    for name, fn, kw in (("Smooth-R@k", smooth_recall, {}), ("Sup-R@k", sup_recall, {"rho": 100.0, "delta": 0.05})):
        s = torch.tensor([list(TOY_SCORES)], dtype=torch.float64, requires_grad=True)
        loss = fn(s, targets, tau=0.01, ks=RECALL_KS, **kw)
        (g,) = torch.autograd.grad(loss, s)
        assert flows[name].grads == pytest.approx(g[0].tolist())
        assert flows[name].loss == pytest.approx(float(loss.detach()))
    fig = plot_recall_gradient_flow()
    assert [t.name for t in fig.data] == list(flows)


def test_recall_toy_claims():
    flows = toy_gradients(family="recall")
    g = flows["Smooth-R@k"].grads
    assert g[0] > 0 > g[1] and abs(g[2]) < 1e-3 * abs(g[0])  # sigmoid rank: contradiction and vanishing
    g = flows["Sup-R@k"].grads
    assert g[0] < 0 and g[1] < 0 and g[2] > 0
    assert recall_loss() == pytest.approx(1 - (0 + 1 / 2) / 2)  # no positive at rank 1, one in the top 2


def test_bad_family_is_refused():
    with pytest.raises(ValueError, match="family"):
        toy_gradients(family="ndcg")
