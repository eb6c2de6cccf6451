"""The step-surrogate figures draw lab.ranking's functions (ROADMAP Fig. 3, supp. Fig. 11)."""
import json
import math

import pytest
import torch

from lab.ranking import default_delta, h_minus, heaviside, sigmoid
from lab.viz.surrogates import (delta_threshold, plot_delta_choice, plot_surrogates, saturation_ratio,
                                sigmoid_slope_at, surrogate_curves)


def traces(fig):
    """{name: (x, y)} of the left (values) and right (slopes) panels, read from the JSON spec."""
    spec = json.loads(fig.to_json())
    out = {}
    for t in spec["data"]:
        panel = "slope" if t.get("xaxis") == "x2" else "value"
        out[(t["name"], panel)] = (t["x"], t["y"])
    return out


@pytest.mark.parametrize("tau, rho, delta", [(0.01, 100.0, 0.05), (0.003, 20.0, 0.0), (0.05, 400.0, 0.08)])
def test_drawn_curves_are_the_lab_functions(tau, rho, delta):
    drawn = traces(plot_surrogates(tau, rho, delta))
    x, y = drawn[("H⁻ (SupAP, rank⁻)", "value")]
    t = torch.tensor(x, dtype=torch.float64)
    torch.testing.assert_close(torch.tensor(y, dtype=torch.float64), h_minus(t, tau, rho, delta))
    _, y_sig = drawn[("σ(t/τ) (SmoothAP)", "value")]
    torch.testing.assert_close(torch.tensor(y_sig, dtype=torch.float64), sigmoid(t, tau))
    _, y_h = drawn[("H (exact step, rank⁺)", "value")]
    torch.testing.assert_close(torch.tensor(y_h, dtype=torch.float64), heaviside(t))


def test_drawn_slopes_match_closed_forms():
    tau, rho, delta = 0.01, 100.0, 0.05
    drawn = traces(plot_surrogates(tau, rho, delta))
    x, d_sig = drawn[("σ(t/τ) (SmoothAP)", "slope")]
    t = torch.tensor(x, dtype=torch.float64)
    s = torch.sigmoid(t / tau)
    torch.testing.assert_close(torch.tensor(d_sig, dtype=torch.float64), s * (1 - s) / tau)
    _, d_hm = drawn[("H⁻ (SupAP, rank⁻)", "slope")]
    d_hm = torch.tensor(d_hm, dtype=torch.float64)
    beyond = t > delta + 1e-9
    assert torch.all(d_hm[beyond] == rho)  # the linear part: constant slope rho, never vanishing
    torch.testing.assert_close(d_hm[~beyond], (s * (1 - s) / tau)[~beyond])
    _, d_h = drawn[("H (exact step, rank⁺)", "slope")]
    assert max(abs(v) for v in d_h) == 0  # the step gives SGD nothing


def test_h_minus_upper_bounds_the_step_on_the_grid():
    c = surrogate_curves(0.01, 100.0, 0.05)
    assert all(hm >= h for hm, h in zip(c["h_minus"], c["heaviside"]))
    assert any(s < h for s, h in zip(c["sigmoid"], c["heaviside"]))  # the sigmoid is not an upper bound


def test_delta_choice_supplementary_a3():
    delta, level = delta_threshold(0.01, 0.01)
    assert delta == pytest.approx(0.046, abs=5e-4) and delta == default_delta(0.01, 0.01)  # "delta ~ 0.05"
    assert sigmoid_slope_at(delta, 0.01) == pytest.approx(level, rel=1e-9)  # slope is eps(1-eps)/tau there
    assert sigmoid_slope_at(1.5 * delta, 0.01) < level  # and smaller beyond
    fig = plot_delta_choice(0.01, 0.01)
    assert sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1) == pytest.approx([-delta, delta])
    assert [s.y0 for s in fig.layout.shapes if s.y0 == s.y1] == pytest.approx([level])


def test_toy_differences_are_deep_in_saturation():
    # supp. A.1 ii: at s3 - s2 = 0.13 = 13 tau the sigmoid keeps ~1e-5 of its peak slope.
    assert saturation_ratio(0.01, 0.13) == pytest.approx(4 * math.exp(-13) / (1 + math.exp(-13)) ** 2)
    assert saturation_ratio(0.01, 0.13) < 1e-4
