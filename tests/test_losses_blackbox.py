"""BlackBox AP: its hand-written backward against the formula and the chain rule."""
import torch

from lab.losses import functional as LF
from lab.losses.blackbox_ap import BlackBoxRank, descending_ranks
from lab.metrics import average_precision


def test_descending_ranks_by_brute_force():
    scores = torch.tensor([[0.3, -0.1, 0.9, 0.5], [1.0, 2.0, 0.0, -1.0]])
    for row, ranks in zip(scores, descending_ranks(scores)):
        for i in range(len(row)):
            assert ranks[i] == 1 + sum(1 for j in range(len(row)) if row[j] > row[i])


def test_forward_is_the_exact_ap_without_margin():
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(8, 15, generator=g, dtype=torch.float64)
    targets = torch.rand(8, 15, generator=g) < 0.4
    targets[:, 0] = True
    got = LF.blackbox_ap(scores, targets, margin=0.0, reduction="none")
    torch.testing.assert_close(got, 1 - average_precision(scores, targets))


def test_margin_lowers_the_positives_before_ranking():
    scores = torch.tensor([[0.50, 0.49]])  # positive first, negative 0.01 below
    targets = torch.tensor([[True, False]])
    assert LF.blackbox_ap(scores, targets, margin=0.0) == 0
    assert LF.blackbox_ap(scores, targets, margin=0.02) > 0  # within the margin: counted as an error


def test_backward_matches_the_formula_by_loops():
    """With normalised ranks r / N: grad = (r(s + lambda * g) - r(s)) / (N * lambda), element by element."""
    g = torch.Generator().manual_seed(1)
    scores = torch.rand(3, 6, generator=g, dtype=torch.float64, requires_grad=True)
    incoming = torch.randn(3, 6, generator=g, dtype=torch.float64) * 6  # d/d(r / N) is N times d/dr
    lam = 0.7
    grad, = torch.autograd.grad(BlackBoxRank.apply(scores, lam), scores, incoming)
    s = scores.detach()
    for q in range(3):
        pert = s[q] + lam * incoming[q]
        for i in range(6):
            r = 1 + sum(1 for j in range(6) if s[q, j] > s[q, i])
            r_pert = 1 + sum(1 for j in range(6) if pert[j] > pert[i])
            assert abs(grad[q, i] - (r_pert - r) / (6 * lam)) < 1e-12


def test_backward_uses_the_incoming_gradient():
    """Scaling the loss by c and lambda by 1/c scales the gradient by exactly c; a zero
    incoming gradient gives a zero gradient (the FastAP port's backward ignored both)."""
    g = torch.Generator().manual_seed(2)
    scores = torch.rand(5, 12, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.rand(5, 12, generator=g) < 0.4
    targets[:, 0] = True
    g1, = torch.autograd.grad(LF.blackbox_ap(scores, targets, lambda_val=4.0), scores)
    g3, = torch.autograd.grad(3.0 * LF.blackbox_ap(scores, targets, lambda_val=4.0 / 3.0), scores)
    g0, = torch.autograd.grad(0.0 * LF.blackbox_ap(scores, targets), scores)
    assert g1.abs().sum() > 0
    torch.testing.assert_close(g3, 3.0 * g1)
    assert g0.abs().sum() == 0


def test_gradient_pushes_a_positive_ranked_below_a_negative_up():
    scores = torch.tensor([[0.50, 0.60, 0.10]], requires_grad=True)  # positive, negative, positive
    targets = torch.tensor([[True, False, True]])
    grad, = torch.autograd.grad(LF.blackbox_ap(scores, targets, lambda_val=10.0, margin=0.0), scores)
    assert grad[0, 1] > 0  # the offending negative goes down
    assert grad[0, 0] < 0  # the positive just below it goes up
