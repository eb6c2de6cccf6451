"""lab.ranking: the step function and its surrogates (ROADMAP Eq. 3-4, supp. A.3)."""
import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.ranking import default_delta, h_minus, heaviside, histogram_ap, sigmoid, soft_histogram


def test_heaviside_counts_ties_as_above():
    assert heaviside(torch.tensor([-1e-9, 0.0, 2.0])).tolist() == [0.0, 1.0, 1.0]


@settings(max_examples=200, deadline=None)
@given(st.floats(-2, 2), st.floats(1e-3, 1.0), st.floats(0, 1e3), st.floats(0, 0.5))
def test_h_minus_is_never_below_the_heaviside(t, tau, rho, delta):
    x = torch.tensor([t], dtype=torch.float64)
    assert h_minus(x, tau, rho, delta) >= heaviside(x)


def test_h_minus_pieces_and_continuity_at_delta():
    tau, rho, delta = 0.01, 100.0, 0.05
    t = torch.tensor([-0.03, 0.0, 0.02, 0.05, 0.15], dtype=torch.float64)

    def sig(x):
        return 1 / (1 + math.exp(-x / tau))

    want = [sig(-0.03), sig(0.0) + 0.5, sig(0.02) + 0.5, sig(0.05) + 0.5, rho * 0.1 + sig(0.05) + 0.5]
    torch.testing.assert_close(h_minus(t, tau, rho, delta), torch.tensor(want, dtype=torch.float64))
    eps = 1e-9
    left, right = h_minus(torch.tensor([delta - eps, delta + eps], dtype=torch.float64), tau, rho, delta)
    assert abs(right - left) < 1e-6


def test_h_minus_slope_is_rho_beyond_delta():
    t = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    grad, = torch.autograd.grad(h_minus(t, 0.01, 37.0, 0.05).sum(), t)
    torch.testing.assert_close(grad, torch.tensor([37.0, 37.0], dtype=torch.float64))


def test_default_delta_matches_the_paper():
    """supp. A.3: eps = 1e-2 and tau = 0.01 give delta ~ 0.05, where sigma's slope drops below eps/tau."""
    delta = default_delta(0.01, 1e-2)
    assert abs(delta - 0.05) < 0.005
    t = torch.tensor([delta], dtype=torch.float64, requires_grad=True)
    slope, = torch.autograd.grad(sigmoid(t, 0.01).sum(), t)
    assert abs(slope.item() * 0.01 - 1e-2 * (1 - 1e-2)) < 1e-9


def test_soft_histogram_conserves_mass_inside_the_range():
    values = torch.rand(3, 50, dtype=torch.float64) * 4
    centres = torch.linspace(0, 4, 11, dtype=torch.float64)
    counts = soft_histogram(values, centres, 0.4, torch.ones(3, 50, dtype=torch.bool))
    torch.testing.assert_close(counts.sum(1), torch.full((3,), 50.0, dtype=torch.float64))


def test_histogram_ap_of_a_separated_list_is_one():
    values = torch.tensor([[0.1, 0.2, 3.5, 3.9]])
    pos = torch.tensor([[True, True, False, False]])
    ap = histogram_ap(values, torch.linspace(0, 4, 5), 1.0, pos, torch.ones_like(pos))
    torch.testing.assert_close(ap, torch.ones(1))


def test_bad_hyper_parameters_are_named():
    import pytest

    for kwargs, name in ((dict(tau=0.0), "tau"), (dict(rho=-1.0), "rho"), (dict(delta=-0.1), "delta")):
        with pytest.raises(ValueError, match=name):
            h_minus(torch.zeros(2), **kwargs)
