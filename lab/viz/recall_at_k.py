"""Recall@k and its surrogates (SupRank Sec. IV-B, Eq. 13-16).

R@k (Eq. 13, the image-retrieval convention) is 1 if any positive is in the top k; TR@k
(Eq. 14-15) is the fraction of the min(k, |P|) best possible hits. Both count positives with
H(k - rank(p)); the surrogates replace that outer step by sigma((k - rank(p)) / tau_star)
and the rank by a smooth rank (sigmoids: Smooth-R@k; SupRank: Sup-R@k). Numbers come from
:mod:`lab.metrics` and :mod:`lab.ranking`.
"""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..metrics import recall_at_k, true_recall_at_k
from ..ranking import heaviside, sigmoid
from .controls import Slider
from .style import NEGATIVE, NEUTRAL, POSITIVE, SERIES, TEMPLATE, floats, responsive

# A query's ranked list (rank 1 first): positives at ranks 3, 5 and 9 among 12 items.
RECALL_LIST = (False, False, True, False, True, False, False, False, True, False, False, False)


def recall_curves(ranked: Sequence[bool] = RECALL_LIST) -> dict[str, list[float]]:
    """R@k and TR@k for k = 1..N of a list given in ranked order (exact, lab.metrics)."""
    n = len(ranked)
    scores = torch.linspace(1.0, 0.0, n, dtype=torch.float64)[None]  # ranked order, no ties
    targets = torch.tensor([list(ranked)])
    ks = list(range(1, n + 1))
    return {"k": [float(k) for k in ks], "R@k": floats(recall_at_k(scores, targets, k=ks)[0]),
            "TR@k": floats(true_recall_at_k(scores, targets, k=ks)[0])}


def surrogate_step(k: int = 4, tau_star: float = 1.0, max_rank: float = 16.0,
                   num_points: int = 601) -> dict[str, list[float]]:
    """H(k - r) and sigma((k - r) / tau_star) against a continuous rank r, with the sigmoid's slope -d/dr."""
    r = torch.linspace(1.0, max_rank, num_points, dtype=torch.float64, requires_grad=True)
    soft = sigmoid(k - r, tau_star)
    (slope,) = torch.autograd.grad(soft.sum(), r)
    return {"rank": floats(r), "step": floats(heaviside(k - r.detach())), "sigmoid": floats(soft),
            "slope": floats(-slope)}


def plot_recall_at_k(ranked: Sequence[bool] = RECALL_LIST) -> go.Figure:
    """The ranked list and its R@k / TR@k for every k (SupRank Eq. 13-14)."""
    c = recall_curves(ranked)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.25, 0.75], vertical_spacing=0.2,
                        subplot_titles=("ranked list", "R@k (Eq. 13) and TR@k (Eq. 14)"))
    ranks = [float(k) for k in range(1, len(ranked) + 1)]
    fig.add_trace(go.Scatter(x=ranks, y=[0.0] * len(ranks), mode="markers", name="items", showlegend=False,
                             marker=dict(size=14, symbol="square",
                                         color=[POSITIVE if p else NEGATIVE for p in ranked])),
                  row=1, col=1)
    for i, name in enumerate(("R@k", "TR@k")):
        fig.add_trace(go.Scatter(x=c["k"], y=c[name], mode="lines+markers", name=name, line=dict(color=SERIES[i],
                                 shape="hv")), row=2, col=1)
    fig.update_yaxes(visible=False, showticklabels=False, row=1, col=1)
    fig.update_xaxes(range=[0.5, len(ranked) + 0.5])
    fig.update_xaxes(title_text="k", row=2, col=1)
    fig.update_yaxes(range=[-0.05, 1.05], row=2, col=1)
    responsive(fig, 700, template=TEMPLATE, height=470, margin=dict(l=60, r=20, t=70, b=90),
                      legend=dict(orientation="h", y=-0.2), title="Recall at k on one ranked list")
    return fig


SURROGATE_STEP_SLIDERS = {
    "k": Slider(1, 12, 1, 4, integer=True, description="k"),
    "tau_star": Slider(0.05, 5.0, 0.05, 1.0, log=True, description="τ* (outer temperature)"),
}


def plot_recall_surrogate(k: int = 4, tau_star: float = 1.0) -> go.Figure:
    """The outer step of Eq. 15 and its sigmoid of Eq. 16 against rank(p), with the sigmoid's slope.

    A positive far below k (rank >> k) or safely inside (rank << k) gets almost no gradient;
    tau_star sets how many ranks around k still receive some.
    """
    c = surrogate_step(k, tau_star)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=c["rank"], y=c["step"], name="H(k − rank)", line=dict(color="black")))
    fig.add_trace(go.Scatter(x=c["rank"], y=c["sigmoid"], name="σ((k − rank)/τ*)",
                             line=dict(color=SERIES[0], dash="dash")))
    fig.add_trace(go.Scatter(x=c["rank"], y=c["slope"], name="−d/d rank σ (gradient)", line=dict(color=SERIES[1])))
    fig.add_vline(x=k, line=dict(color=NEUTRAL, dash="dot"))
    responsive(fig, 700, template=TEMPLATE, height=380, margin=dict(l=60, r=20, t=70, b=90),
                      title=f"Counting a positive in the top {k}: exact step vs sigmoid (τ* = {tau_star:.3g})",
                      xaxis=dict(title="rank(p)"), yaxis=dict(title="value", range=[-0.05, 1.1]),
                      legend=dict(orientation="h", y=-0.25))
    return fig
