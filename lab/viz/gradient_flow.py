"""The toy gradient flow of ROADMAP Fig. 1a and supplementary A.1 (Fig. 7-8).

One query, three items: positives x1, x2 ranked below a negative x3 with s3 - s2 = 0.13 and
s3 - s1 = 0.14, tau = 0.01. For each loss, autograd gives dL/ds_i; the figure draws each item
at its score with an arrow along the gradient-descent step -dL/ds_i.

* SmoothAP (Fig. 7): the positives get equal and opposite gradients (x2 is pushed *down*),
  the negative gets almost none (the sigmoid is saturated at 0.13 = 13 tau), and
  L_SmoothAP < L_AP: not an upper bound.
* SmoothAP with the exact step on rank^+ (Fig. 8a): no more contradiction, but every
  gradient vanishes.
* SupAP (Fig. 8b): both positives go up, the negative goes down, and L_SupAP >= L_AP.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..losses.functional import smooth_ap, smooth_recall, sup_ap, sup_recall
from ..metrics import average_precision, true_recall_at_k
from .controls import Slider
from .style import NEGATIVE, POSITIVE, TEMPLATE, floats, responsive

TOY_SCORES = (0.50, 0.51, 0.64)  # x1, x2 (positives), x3 (negative): s3 - s2 = 0.13, s3 - s1 = 0.14
TOY_TARGETS = (True, True, False)
TOY_NAMES = ("x1 (+)", "x2 (+)", "x3 (−)")
ARROW_LENGTH = 0.06  # score units drawn for the largest gradient of the figure
VANISHING = 1e-3  # a gradient below this fraction of the largest one is drawn as "≈ 0"

# name -> loss(scores (1, N), targets (1, N), tau, rho, delta): the three panels of Fig. 7-8.
FLOW_LOSSES: dict[str, Callable] = {
    "SmoothAP": lambda s, t, tau, rho, delta: smooth_ap(s, t, tau=tau),
    "SmoothAP, exact rank⁺": lambda s, t, tau, rho, delta: smooth_ap(s, t, tau=tau, exact_rank_pos=True),
    "SupAP": lambda s, t, tau, rho, delta: sup_ap(s, t, tau=tau, rho=rho, delta=delta),
}


# The same toy for the recall surrogates of SupRank Sec. IV-B (Eq. 16), averaged over ks = (1, 2):
# Smooth-R@k (Patel et al.; sigmoids everywhere) and Sup-R@k (exact rank^+, H^- on negatives).
RECALL_KS = (1, 2)
RECALL_FLOW_LOSSES: dict[str, Callable] = {
    "Smooth-R@k": lambda s, t, tau, rho, delta: smooth_recall(s, t, tau=tau, ks=RECALL_KS),
    "Sup-R@k": lambda s, t, tau, rho, delta: sup_recall(s, t, tau=tau, rho=rho, delta=delta, ks=RECALL_KS),
}


class LossGradient(NamedTuple):
    loss: float
    grads: list[float]  # dL/ds_i for each item, in item order


def toy_gradients(scores: Sequence[float] = TOY_SCORES, targets: Sequence[bool] = TOY_TARGETS,
                  tau: float = 0.01, rho: float = 100.0, delta: float = 0.05,
                  family: str = "ap") -> dict[str, LossGradient]:
    """Loss value and autograd gradient dL/ds (N,) of each loss of the family (float64):
    ``"ap"``: ``FLOW_LOSSES``; ``"recall"``: ``RECALL_FLOW_LOSSES``."""
    t = torch.tensor([list(targets)])
    out = {}
    for name, fn in _family(family).items():
        s = torch.tensor([list(scores)], dtype=torch.float64, requires_grad=True)
        loss = fn(s, t, tau, rho, delta)
        (g,) = torch.autograd.grad(loss, s)
        out[name] = LossGradient(float(loss.detach()), floats(g))
    return out


def _family(family: str) -> dict[str, Callable]:
    if family not in ("ap", "recall"):
        raise ValueError(f"family must be 'ap' or 'recall', got {family!r}")
    return FLOW_LOSSES if family == "ap" else RECALL_FLOW_LOSSES


def ap_loss(scores: Sequence[float] = TOY_SCORES, targets: Sequence[bool] = TOY_TARGETS) -> float:
    """The exact L_AP = 1 - AP of the list (ROADMAP Eq. 1)."""
    ap = average_precision(torch.tensor([list(scores)], dtype=torch.float64), torch.tensor([list(targets)]))
    return 1.0 - float(ap[0])


def recall_loss(scores: Sequence[float] = TOY_SCORES, targets: Sequence[bool] = TOY_TARGETS,
                ks: Sequence[int] = RECALL_KS) -> float:
    """The exact 1 - TR@k (SupRank Eq. 14-15) averaged over ``ks``, what the recall surrogates estimate."""
    tr = true_recall_at_k(torch.tensor([list(scores)], dtype=torch.float64), torch.tensor([list(targets)]), k=list(ks))
    return 1.0 - float(tr.mean())


def arrow_scale(flows: dict[str, LossGradient]) -> float:
    """Score units per unit of gradient, common to all panels so magnitudes compare."""
    largest = max(abs(g) for f in flows.values() for g in f.grads)
    return ARROW_LENGTH / largest if largest > 0 else 0.0


def arrow_scales(flows: dict[str, LossGradient], arrows: str = "shared") -> list[float]:
    """Score units per unit of gradient of each panel: ``"shared"``: one scale for all (magnitudes
    compare across losses); ``"panel"``: each panel's largest gradient drawn ``ARROW_LENGTH`` long
    (directions stay readable when one loss's gradients are ~50x smaller, as Sup-R@k's on the toy)."""
    if arrows not in ("shared", "panel"):
        raise ValueError(f"arrows must be 'shared' or 'panel', got {arrows!r}")
    if arrows == "shared":
        return [arrow_scale(flows)] * len(flows)
    return [arrow_scale({name: f}) for name, f in flows.items()]


FLOW_SLIDERS = {
    "s1": Slider(0.3, 0.9, 0.005, TOY_SCORES[0], description="s1 (positive x1)"),
    "s2": Slider(0.3, 0.9, 0.005, TOY_SCORES[1], description="s2 (positive x2)"),
    "s3": Slider(0.3, 0.9, 0.005, TOY_SCORES[2], description="s3 (negative x3)"),
    "tau": Slider(0.001, 0.1, 0.05, 0.01, log=True, description="τ"),
}


def _axis(prefix: str, row: int) -> str:
    return prefix if row == 1 else f"{prefix}{row}"


def plot_gradient_flow(s1: float = TOY_SCORES[0], s2: float = TOY_SCORES[1], s3: float = TOY_SCORES[2],
                       tau: float = 0.01, rho: float = 100.0, delta: float = 0.05, family: str = "ap",
                       arrows: str = "") -> go.Figure:
    """ROADMAP Fig. 1a / 7 / 8a / 8b: one panel per loss, each arrow the gradient-descent step −∂L/∂s of a score.

    ``family="recall"`` draws the recall surrogates instead, against the exact 1 - TR@k.

    Each panel's arrows have one scale (``layout.meta["arrow_scales"]``, score units per unit of
    gradient, one per panel): an arrow from s_i to s_i - scale * dL/ds_i. ``arrows`` (see
    :func:`arrow_scales`; default "shared" for AP, whose lesson includes vanishing gradients, and
    "panel" for recall): a magnified panel says by how much in its title. The raw gradients are
    the ``customdata`` of each panel's marker trace and are printed next to each item.
    """
    scores = (s1, s2, s3)
    flows = toy_gradients(scores, TOY_TARGETS, tau, rho, delta, family)
    scales = arrow_scales(flows, arrows or ("shared" if family == "ap" else "panel"))
    exact, label = (ap_loss(scores), "L_AP") if family == "ap" else (recall_loss(scores), f"1 − TR@k, k ∈ {RECALL_KS}")
    base = min((s for s in scales if s > 0), default=0.0)
    titles = [f"{name}: L = {f.loss:.3f}  ({label} = {exact:.3f})" +
              (f", arrows ×{s / base:.0f}" if base and s / base >= 1.5 else "")
              for (name, f), s in zip(flows.items(), scales)]
    fig = make_subplots(rows=len(flows), cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=titles)
    colors = [POSITIVE if t else NEGATIVE for t in TOY_TARGETS]
    rows = [0.0, 1.0, 2.0]
    for row, ((name, flow), scale) in enumerate(zip(flows.items(), scales), start=1):
        # "≈ 0" next to the panel's largest gradient (or, with a shared scale, the figure's).
        largest = ARROW_LENGTH / scale if scale > 0 else 0.0
        labels = [f"∂L/∂s = {g:+.3g}" if abs(g) >= VANISHING * largest else f"∂L/∂s ≈ 0 ({g:+.0e})" for g in flow.grads]
        fig.add_trace(go.Scatter(x=list(scores), y=rows, mode="markers+text", name=name, showlegend=False,
                                 marker=dict(size=14, color=colors, line=dict(color="black", width=1)),
                                 text=labels, textposition="top center",
                                 customdata=flow.grads), row=row, col=1)
        xa, ya = _axis("x", row), _axis("y", row)
        for i, g in enumerate(flow.grads):
            if scale == 0 or abs(g) < VANISHING * largest:
                continue  # an arrow this short would be invisible: the label says ≈ 0
            fig.add_annotation(x=scores[i] - scale * g, y=rows[i], ax=scores[i], ay=rows[i], xref=xa, yref=ya,
                               axref=xa, ayref=ya, showarrow=True, arrowhead=3, arrowsize=1.3, arrowwidth=2.5,
                               arrowcolor=colors[i], text="")
        fig.update_yaxes(tickvals=rows, ticktext=list(TOY_NAMES), range=[-0.7, 2.9], row=row, col=1)
    lo, hi = min(scores) - 1.5 * ARROW_LENGTH, max(scores) + 1.5 * ARROW_LENGTH
    fig.update_xaxes(range=[lo, hi])
    fig.update_xaxes(title_text="score s (arrows: gradient-descent step −∂L/∂s)", row=len(flows), col=1)
    responsive(fig, 760, template=TEMPLATE, height=220 * len(flows) + 80, margin=dict(l=70, r=20, t=90, b=60),
                      meta={"arrow_scales": scales},
                      title=f"Gradient flow on the toy list (τ = {tau:.3g}): "
                            f"s3−s2 = {s3 - s2:.2f}, s3−s1 = {s3 - s1:.2f}")
    return fig


def plot_recall_gradient_flow(s1: float = TOY_SCORES[0], s2: float = TOY_SCORES[1], s3: float = TOY_SCORES[2],
                              tau: float = 0.01, rho: float = 100.0, delta: float = 0.05) -> go.Figure:
    """The toy gradient flow of the recall surrogates (SupRank Eq. 16), averaged over k = 1 and k = 2."""
    return plot_gradient_flow(s1, s2, s3, tau, rho, delta, family="recall")
