"""H-AP on the worked "Lada #2" example of SupRank (Fig. 3-4, Appendix B Fig. 13-14).

A "Lada #2" query; items are another "Lada #2" (level 3), another Lada model (level 2), another
car (level 1) or another vehicle (level 0, negative). Appendix B-A sets rel = l / L: 1, 2/3,
1/3, 0 (Eq. 20 with alpha = 1, without the division by |Omega^(l)|). The two rankings of
Fig. 14 are not in the text; the ones below are the unique pair, differing only at rank 1,
that reproduces its numbers: AP = 0.45 for both, H-AP = 0.78 (a Lada first) vs 0.67 (a car
first), and H-rank^+(2) = 5/3 vs 4/3 as in Fig. 4. The numbers come from
:func:`lab.metrics.graded_ranks` and :func:`lab.metrics.h_ap`.
"""
from __future__ import annotations

from fractions import Fraction

import plotly.graph_objects as go
import torch

from ..metrics import average_precision, graded_ranks, h_ap
from .controls import Slider
from .style import NEGATIVE, POSITIVE, TEMPLATE, floats, responsive

LEVEL_NAMES = {3: "Lada #2", 2: "Lada", 1: "Car", 0: "Bus"}  # what each semantic level looks like
LEVEL_COLORS = {3: POSITIVE, 2: "#74c476", 1: "#fdae6b", 0: NEGATIVE}
NUM_LEVELS = 3
# Levels of the items in ranked order (rank 1 first); the rows of SupRank Fig. 14.
LADA_RANKINGS = {"top row": [2, 3, 0, 1, 3], "bottom row": [1, 3, 0, 1, 3]}


def lada_relevance(levels: list[int], alpha: float = 1.0) -> list[float]:
    """rel = (l / L)^alpha per item (Appendix B-A for alpha = 1); level 0 (negatives) gets 0."""
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0, got {alpha!r}")
    return [0.0 if level == 0 else (level / NUM_LEVELS) ** alpha for level in levels]


def lada_example(alpha: float = 1.0) -> dict[str, dict]:
    """Per ranking: levels, relevance, H-rank^+ (Eq. 18/28), rank, H-AP (Eq. 19/29) and AP."""
    out = {}
    for name, levels in LADA_RANKINGS.items():
        rel = torch.tensor([lada_relevance(levels, alpha)], dtype=torch.float64)
        scores = torch.linspace(1.0, 0.0, len(levels), dtype=torch.float64)[None]  # ranked order, no ties
        r = graded_ranks(scores, rel)
        out[name] = {"levels": list(levels), "relevance": floats(rel), "h_rank_plus": floats(r.h_rank_plus),
                     "rank": floats(r.rank), "h_ap": float(h_ap(scores, rel)[0]),
                     "ap": float(average_precision(scores, torch.tensor([[lv == NUM_LEVELS for lv in levels]]))[0])}
    return out


def _fraction(x: float) -> str:
    f = Fraction(x).limit_denominator(36)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


LADA_SLIDERS = {"alpha": Slider(0.0, 6.0, 0.25, 1.0, description="α in rel = (l/L)^α")}


def plot_lada(alpha: float = 1.0) -> go.Figure:
    """SupRank Fig. 13-14: the two rankings, each item with its H-rank⁺ / rank, H-AP and AP.

    alpha -> infinity leaves only the fine level relevant: H-AP -> AP. alpha = 0 makes every
    car as relevant as a "Lada #2": H-AP becomes the AP of the coarse "Cars" label.
    """
    ex = lada_example(alpha)
    fig = go.Figure()
    for row, (name, r) in enumerate(ex.items()):
        y = float(1 - row)
        fig.add_trace(go.Scatter(
            x=[float(k) for k in range(1, len(r["levels"]) + 1)], y=[y] * len(r["levels"]), mode="markers+text",
            name=name, showlegend=False, text=[LEVEL_NAMES[lv] for lv in r["levels"]], textposition="top center",
            marker=dict(size=34, symbol="square", color=[LEVEL_COLORS[lv] for lv in r["levels"]]),
            customdata=r["h_rank_plus"]))
        for k, (rel, hr, rank) in enumerate(zip(r["relevance"], r["h_rank_plus"], r["rank"]), start=1):
            label = f"H-rank⁺ = {_fraction(hr)}<br>rank = {int(rank)}" if rel > 0 else "negative"
            fig.add_annotation(x=float(k), y=y - 0.3, text=label, showarrow=False, font=dict(size=11))
        fig.add_annotation(x=5.6, y=y, xanchor="left", showarrow=False, font=dict(size=12),
                           text=f"{name}<br>H-AP = {r['h_ap']:.2f}<br>AP = {r['ap']:.2f}")
    responsive(fig, 820, template=TEMPLATE, height=400, margin=dict(l=30, r=20, t=70, b=40),
                      title=f"“Lada #2” query, rel = (l/3)^{alpha:g}: same AP, different H-AP (SupRank Fig. 13-14)",
                      xaxis=dict(title="rank", range=[0.5, 7.0], tickvals=[1, 2, 3, 4, 5]),
                      yaxis=dict(visible=False, showticklabels=False, range=[-0.7, 1.5]))
    return fig


def hierarchical_pr(levels: list[int], alpha: float = 1.0) -> dict[str, list[float]]:
    """H-R@k and H-P@k at every rank k of a ranked list (SupRank Appendix B Eq. 30-31).

    H-R@k = sum_{j<=k} rel(j) / sum_j rel(j); H-P@k = sum_{j<=k} min(rel(j), rel(k)) / (k rel(k)),
    defined where rel(k) > 0 (0 elsewhere; it is weighted by a zero recall step there). Then
    H-AP = sum_k (H-R@k - H-R@k-1) H-P@k (Eq. 32).
    """
    rel = lada_relevance(levels, alpha)
    total = sum(rel)
    recall, precision, seen = [], [], 0.0
    for k, r in enumerate(rel, start=1):
        seen += r
        recall.append(seen / total)
        precision.append(sum(min(a, r) for a in rel[:k]) / (k * r) if r > 0 else 0.0)
    return {"h_recall": recall, "h_precision": precision}
