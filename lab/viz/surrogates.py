"""The step function H and its surrogates, with their derivatives.

ROADMAP Fig. 3 / SupRank Fig. 2: the Heaviside H (Eq. 3, used for rank^+), the temperature
sigmoid of SmoothAP and SupRank's H^- (Eq. 4, used for rank^-). ROADMAP supp. A.3 Fig. 11
(SupRank Fig. 12): the slope of sigma(t / tau) and the choice delta = tau * ln((1 - eps) / eps).
Every curve is computed by :mod:`lab.ranking` on a grid of t = s_j - s_k (item j above k when
t > 0), and every derivative by autograd.
"""
from __future__ import annotations

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ..ranking import check_h_minus, default_delta, h_minus, heaviside, sigmoid
from .controls import Slider
from .style import SERIES, TEMPLATE, floats, responsive

T_RANGE = (-0.08, 0.08)  # a few temperatures either side of 0 at the paper's tau = 0.01


def _value_and_slope(fn, t: Tensor) -> tuple[Tensor, Tensor]:
    """(f(t), f'(t)) elementwise; f' = 0 where f has no gradient (the Heaviside)."""
    t = t.detach().clone().requires_grad_(True)
    y = fn(t)
    if not y.requires_grad:
        return y.detach(), torch.zeros_like(y)
    (dy,) = torch.autograd.grad(y.sum(), t)  # elementwise f: the gradient of the sum is f'(t)
    return y.detach(), dy


def surrogate_curves(tau: float = 0.01, rho: float = 100.0, delta: float = 0.05,
                     t_min: float = T_RANGE[0], t_max: float = T_RANGE[1],
                     num_points: int = 801) -> dict[str, list[float]]:
    """H, sigma(t/tau), H^- (ROADMAP Eq. 3-4) and their derivatives on a grid of t.

    Returns lists of length ``num_points``: ``t``, ``heaviside``, ``sigmoid``, ``h_minus`` and
    ``d_heaviside`` (0: its derivative is a Dirac at 0, useless to SGD), ``d_sigmoid``, ``d_h_minus``.
    """
    check_h_minus(tau, rho, delta)
    t = torch.linspace(t_min, t_max, num_points, dtype=torch.float64)
    out = {"t": floats(t)}
    for name, fn in (("heaviside", heaviside), ("sigmoid", lambda x: sigmoid(x, tau)),
                     ("h_minus", lambda x: h_minus(x, tau, rho, delta))):
        value, slope = _value_and_slope(fn, t)
        out[name], out[f"d_{name}"] = floats(value), floats(slope)
    return out


SURROGATE_SLIDERS = {
    "tau": Slider(0.001, 0.1, 0.05, 0.01, log=True, description="τ (temperature)"),
    # Log scale, 1 to 10^4: the paper's 100 sits mid-track. rho = 0 (H^- saturating like the
    # sigmoid) is off a log track: the notebook calls the builder with it.
    "rho": Slider(1.0, 1e4, 0.05, 100.0, log=True, description="ρ (slope beyond δ)"),
    "delta": Slider(0.0, 0.1, 0.005, 0.05, description="δ (offset of the linear part)"),
}


def plot_surrogates(tau: float = 0.01, rho: float = 100.0, delta: float = 0.05) -> go.Figure:
    """ROADMAP Fig. 3 / SupRank Fig. 2: left the three step functions, right their derivatives.

    H^- >= H everywhere (so Sup-AP >= 1 - AP), and its slope never falls below rho beyond
    delta, where the sigmoid's vanishes: a negative far above a positive still gets gradient.
    """
    c = surrogate_curves(tau, rho, delta)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("H(t), σ(t/τ), H⁻(t)  (Eq. 3-4)", "derivatives d/dt"))
    styles = {"heaviside": ("H (exact step, rank⁺)", "black", "solid"),
              "sigmoid": ("σ(t/τ) (SmoothAP)", SERIES[0], "dash"),
              "h_minus": ("H⁻ (SupAP, rank⁻)", SERIES[1], "solid")}
    for name, (label, color, dash) in styles.items():
        line = dict(color=color, dash=dash, width=2.5 if name == "h_minus" else 2)
        fig.add_trace(go.Scatter(x=c["t"], y=c[name], name=label, legendgroup=name, line=line), row=1, col=1)
        fig.add_trace(go.Scatter(x=c["t"], y=c[f"d_{name}"], name=label, legendgroup=name, showlegend=False,
                                 line=line), row=1, col=2)
    # Up to 3: the sigmoid part of H^- stays readable; its linear part runs off the top.
    fig.update_yaxes(range=[-0.15, 3.0], title_text="value", row=1, col=1)
    fig.update_yaxes(range=[-0.05 * max(rho, 0.25 / tau), 1.1 * max(rho, 0.25 / tau)], title_text="slope", row=1, col=2)
    fig.update_xaxes(title_text="t = s_j − s_k", range=list(T_RANGE))
    for col in (1, 2):
        fig.add_vline(x=delta, line=dict(color="gray", dash="dot", width=1), row=1, col=col)
    responsive(fig, 900, template=TEMPLATE, height=440, margin=dict(l=60, r=20, t=80, b=100),
                      title=f"Step surrogates: τ = {tau:.3g}, ρ = {rho:.3g}, δ = {delta:.3g} (dotted line)",
                      legend=dict(orientation="h", y=-0.25))
    return fig


# --------------------------------------------------------------------------- choice of delta
def sigmoid_slope_at(t: float, tau: float = 0.01) -> float:
    """d/dt sigma(t / tau) = sigma (1 - sigma) / tau at t, by autograd."""
    x = torch.tensor(float(t), dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(sigmoid(x, tau), x)
    return float(g)


def delta_threshold(tau: float = 0.01, eps: float = 0.01) -> tuple[float, float]:
    """(delta, slope there): delta = tau ln((1-eps)/eps) puts sigma(delta/tau) = 1 - eps, where
    sigma' (in units of t / tau) is eps (1 - eps) ~ eps, i.e. d/dt sigma = eps (1 - eps) / tau.
    ROADMAP supp. A.3: tau = eps = 0.01 gives delta ~ 0.046, rounded up to 0.05."""
    delta = default_delta(tau, eps)
    return delta, eps * (1 - eps) / tau


DELTA_SLIDERS = {
    "tau": Slider(0.001, 0.1, 0.05, 0.01, log=True, description="τ"),
    "eps": Slider(1e-4, 0.2, 0.05, 0.01, log=True, description="ε (slope threshold)"),
}


def plot_delta_choice(tau: float = 0.01, eps: float = 0.01) -> go.Figure:
    """ROADMAP supp. Fig. 11: the slope of σ(t/τ) against t; beyond |t| = δ it is below ε/τ."""
    delta, level = delta_threshold(tau, eps)
    span = max(4 * delta, 6 * tau)
    t = torch.linspace(-span, span, 601, dtype=torch.float64)
    _, slope = _value_and_slope(lambda x: sigmoid(x, tau), t)
    fig = go.Figure(go.Scatter(x=floats(t), y=floats(slope), name="d/dt σ(t/τ)", line=dict(color=SERIES[0], width=2.5)))
    fig.add_hline(y=level, line=dict(color="gray", dash="dash"),
                  annotation_text=f"ε(1−ε)/τ = {level:.3g}", annotation_position="top left")
    for x in (-delta, delta):
        fig.add_vline(x=x, line=dict(color=SERIES[1], dash="dot"))
    responsive(fig, 760, template=TEMPLATE, height=380, margin=dict(l=60, r=20, t=70, b=50),
                      title=f"δ = τ·ln((1−ε)/ε) = {delta:.4f} (τ = {tau:.3g}, ε = {eps:.3g}): the sigmoid saturates",
                      xaxis_title="t = s_j − s_k", yaxis_title="slope", showlegend=False)
    return fig


def saturation_ratio(tau: float = 0.01, t: float = 0.13) -> float:
    """Slope of sigma(t/tau) at t relative to its peak 1/(4 tau): how much gradient survives.

    At the toy's s3 - s2 = 0.13 and tau = 0.01 it is 4 e^-13 / (1 + e^-13)^2 ~ 9e-6.
    """
    return sigmoid_slope_at(t, tau) * 4 * tau
