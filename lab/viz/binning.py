"""Histogram binning: how FastAP and AP_Q see a ranked list.

* Soft assignment (FastAP supp. C.1, Revaud et al. supp. Eq. 7): each value splits a weight
  of 1 between its two nearest bin centres with the triangular kernel max(0, 1 - |v - c| / width).
  FastAP bins squared distances d = 2 - 2s over [0, 4] (num_bins + 1 centres); AP_Q bins
  similarities over [-1, 1] (num_bins centres, best first).
* FastAP Fig. 4c: a perfectly ranked list with a small margin gives FastAP = 1 and zero
  gradient with fine bins, but a learning signal (a margin) with coarse bins.
* Revaud supp. Fig. 1: AP_Q against the exact AP over many queries (synthetic lists here).
"""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ..losses.functional import fast_ap, soft_bin_ap
from ..metrics import average_precision
from ..ranking import soft_histogram
from .controls import Slider
from .style import NEGATIVE, NEUTRAL, POSITIVE, SERIES, TEMPLATE, floats, responsive

SPACES = ("fast_ap", "ap_q")
# A query's list for the binning picture: 5 positives among 10 negatives, one positive late.
BINNING_SCORES = (0.91, 0.84, 0.77, 0.62, 0.31, 0.80, 0.69, 0.58, 0.52, 0.44, 0.37, 0.26, 0.12, -0.05, -0.21)
BINNING_TARGETS = (True,) * 5 + (False,) * 10


def bins(num_bins: int, space: str = "fast_ap") -> tuple[Tensor, float]:
    """(centres (L,), kernel width) exactly as :func:`lab.losses.functional.fast_ap` / ``soft_bin_ap`` build them."""
    if space not in SPACES:
        raise ValueError(f"space must be one of {SPACES}, got {space!r}")
    if space == "fast_ap":
        return torch.linspace(0.0, 4.0, num_bins + 1, dtype=torch.float64), 4.0 / num_bins
    return torch.linspace(1.0, -1.0, num_bins, dtype=torch.float64), 2.0 / (num_bins - 1)


def binned_values(scores: Tensor, space: str) -> Tensor:
    """What is binned: squared distance 2 - 2s of unit vectors (FastAP) or the similarity (AP_Q)."""
    return 2.0 - 2.0 * scores if space == "fast_ap" else scores


def soft_assignment(values: Tensor, centres: Tensor, width: float) -> Tensor:
    """(N,) values -> (N, L) kernel weights of each value on each bin (rows sum to 1 in range)."""
    # Each item as its own one-item "query": lab.ranking.soft_histogram then returns its kernel row.
    return soft_histogram(values[:, None], centres, width, torch.ones(len(values), 1, dtype=values.dtype))


def histogram_summary(scores: Sequence[float] = BINNING_SCORES, targets: Sequence[bool] = BINNING_TARGETS,
                      num_bins: int = 10, space: str = "fast_ap") -> dict:
    """Soft counts h+ / h- per bin, the binned AP (FastAP or AP_Q, from the losses) and the exact AP."""
    s = torch.tensor([list(scores)], dtype=torch.float64)
    t = torch.tensor([list(targets)])
    centres, width = bins(num_bins, space)
    weights = soft_assignment(binned_values(s[0], space), centres, width)  # (N, L)
    loss = (fast_ap if space == "fast_ap" else soft_bin_ap)(s, t, num_bins=num_bins)
    return {"centres": floats(centres), "width": width, "weights": weights.tolist(),
            "h_pos": floats(weights[t[0]].sum(0)), "h_neg": floats(weights[~t[0]].sum(0)),
            "binned_ap": 1.0 - float(loss), "ap": float(average_precision(s, t)[0])}


BINNING_SLIDERS = {
    "num_bins": Slider(2, 40, 1, 10, integer=True, description="number of bins"),
    "item": Slider(0, len(BINNING_SCORES) - 1, 1, 3, integer=True, description="item whose kernel is drawn"),
}


def plot_soft_binning(num_bins: int = 10, item: int = 3, space: str = "fast_ap") -> go.Figure:
    """Soft histogram of one query's list: stacked h⁺ (green) and h⁻ (red) per bin, the items
    as a rug below, and the triangular kernel of one item, which splits it between two bins."""
    r = histogram_summary(BINNING_SCORES, BINNING_TARGETS, num_bins, space)
    values = floats(binned_values(torch.tensor(BINNING_SCORES, dtype=torch.float64), space))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=r["centres"], y=r["h_pos"], name="h⁺ (positives)", marker=dict(color=POSITIVE, opacity=0.8),
                         width=0.8 * r["width"]))
    fig.add_trace(go.Bar(x=r["centres"], y=r["h_neg"], name="h⁻ (negatives)", marker=dict(color=NEGATIVE, opacity=0.6),
                         width=0.8 * r["width"], base=r["h_pos"]))
    colors = [POSITIVE if t else NEGATIVE for t in BINNING_TARGETS]
    fig.add_trace(go.Scatter(x=values, y=[-0.25] * len(values), mode="markers", name="items",
                             marker=dict(color=colors, size=10, symbol="line-ns-open",
                                         line=dict(width=2, color=colors))))
    v, w = values[item], r["width"]
    # The kernels of the bins this item touches: triangles of height 1 at their centres; where
    # the dotted line at the item's value crosses them are its weights (they sum to 1).
    for k, c in enumerate(c for c in r["centres"] if abs(v - c) < w):
        fig.add_trace(go.Scatter(x=[c - w, c, c + w], y=[0.0, 1.0, 0.0], mode="lines", showlegend=k == 0,
                                 name=f"kernels of the bins item {item} falls in", line=dict(color=SERIES[0], width=2)))
    weights = r["weights"][item]
    fig.add_trace(go.Scatter(x=[v] * sum(x > 0 for x in weights), y=[x for x in weights if x > 0], mode="markers",
                             name=f"weights of item {item}", marker=dict(color=SERIES[0], size=9)))
    fig.add_vline(x=v, line=dict(color=SERIES[0], dash="dot", width=1))
    what = "FastAP (squared distance d = 2 − 2s)" if space == "fast_ap" else "AP_Q (similarity s)"
    name = "FastAP" if space == "fast_ap" else "AP_Q"
    lo, hi = (0.0, 4.0) if space == "fast_ap" else (-1.0, 1.0)
    responsive(fig, 820, template=TEMPLATE, height=420, barmode="overlay", margin=dict(l=60, r=20, t=70, b=100),
                      title=f"{what}, {num_bins} bins of width {r['width']:.3g}: {name} = {r['binned_ap']:.3f}, "
                            f"exact AP = {r['ap']:.3f}",
                      xaxis=dict(title="binned value", range=[lo - r["width"], hi + r["width"]]),
                      yaxis=dict(title="soft count"), legend=dict(orientation="h", y=-0.2))
    return fig


# ------------------------------------------------------------------------ FastAP Fig. 4c
def margin_list(margin: float = 0.064) -> tuple[Tensor, Tensor]:
    """A perfectly ranked list, 3 positives then 3 negatives, ``margin`` apart in similarity.

    (scores (1, 6) float64, targets (1, 6)). The odd offsets keep squared distances off the bin
    centres, where the triangular kernel has a kink. margin = 0.064 is the list of the tests.
    """
    pos = [0.903, 0.883, 0.867]
    neg = [pos[-1] - margin - d for d in (0.0, 0.016, 0.035)]
    return torch.tensor([pos + neg], dtype=torch.float64), torch.tensor([[True] * 3 + [False] * 3])


TRADEOFF_BINS = (2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256, 320, 400)


def bin_tradeoff(margin: float = 0.064, num_bins: Sequence[int] = TRADEOFF_BINS) -> dict[str, list[float]]:
    """FastAP and the norm of its gradient on :func:`margin_list` for each bin count."""
    out = {"num_bins": [int(n) for n in num_bins], "fast_ap": [], "grad_norm": []}
    targets = margin_list(margin)[1]
    for n in out["num_bins"]:
        scores = margin_list(margin)[0].requires_grad_(True)
        loss = fast_ap(scores, targets, num_bins=n)
        (g,) = torch.autograd.grad(loss, scores)
        out["fast_ap"].append(1.0 - float(loss.detach()))
        out["grad_norm"].append(float(g.norm()))
    return out


TRADEOFF_SLIDERS = {"margin": Slider(0.005, 0.2, 0.005, 0.064, description="margin (similarity)")}


def plot_bin_tradeoff(margin: float = 0.064) -> go.Figure:
    """FastAP Fig. 4c: with bins narrow enough FastAP = 1 and the gradient is exactly 0.

    A value spreads over +-width around itself, so once the kernel support 2 * width = 8 / num_bins
    fits in the margin in squared distance (2 * margin), i.e. num_bins >= 4 / margin (dotted
    line), no bin mixes positives and negatives: FastAP = 1, no gradient.
    """
    r = bin_tradeoff(margin)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("FastAP of a perfectly ranked list", "‖∂L/∂s‖: the learning signal"))
    fig.add_trace(go.Scatter(x=r["num_bins"], y=r["fast_ap"], mode="lines+markers", name="FastAP",
                             line=dict(color=SERIES[0])), row=1, col=1)
    fig.add_trace(go.Scatter(x=r["num_bins"], y=r["grad_norm"], mode="lines+markers", name="gradient norm",
                             line=dict(color=SERIES[1])), row=1, col=2)
    crossover = 4.0 / margin  # num_bins from which 2 * (4 / num_bins) <= 2 * margin
    for col in (1, 2):
        fig.add_vline(x=crossover, line=dict(color=NEUTRAL, dash="dot"), row=1, col=col)
    ticks = [2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 400.0]
    fig.update_xaxes(type="log", title_text="number of bins (log)", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    fig.update_yaxes(title_text="FastAP", row=1, col=1)
    responsive(fig, 900, template=TEMPLATE, height=380, showlegend=False, margin=dict(l=60, r=20, t=80, b=60),
                      title=f"Bin width vs margin {margin:.3f} (dotted: kernel support = margin, at 4 / margin bins)")
    return fig


# ------------------------------------------------------------------- Revaud supp. Fig. 1
def synthetic_lists(num_queries: int = 300, num_items: int = 100, seed: int = 0) -> tuple[Tensor, Tensor]:
    """(scores (Q, N) in [-1, 1], targets (Q, N)): 5-30 % positives, query-dependent difficulty.

    Negatives ~ N(0, 0.25), positives ~ N(mu, 0.25) with mu ~ U[0, 0.8] per query, so the
    exact AP spans most of [0, 1]. Every query has at least one positive.
    """
    g = torch.Generator().manual_seed(seed)
    frac = 0.05 + 0.25 * torch.rand(num_queries, 1, generator=g)
    targets = torch.rand(num_queries, num_items, generator=g) < frac
    targets[:, 0] = True
    mu = 0.8 * torch.rand(num_queries, 1, generator=g, dtype=torch.float64)
    scores = torch.randn(num_queries, num_items, generator=g, dtype=torch.float64) * 0.25 + mu * targets
    return scores.clamp(-1.0, 1.0), targets


def apq_vs_ap(num_bins: int = 20, num_queries: int = 300, num_items: int = 100, seed: int = 0) -> dict:
    """Exact AP and AP_Q per query of :func:`synthetic_lists`, their Pearson correlation and mean |gap|."""
    scores, targets = synthetic_lists(num_queries, num_items, seed)
    ap = average_precision(scores, targets)
    apq = 1.0 - soft_bin_ap(scores, targets, num_bins=num_bins, reduction="none")
    corr = float(torch.corrcoef(torch.stack([ap, apq]))[0, 1])
    return {"ap": floats(ap), "apq": floats(apq), "correlation": corr, "mean_abs_error": float((apq - ap).abs().mean())}


APQ_SLIDERS = {"num_bins": Slider(3, 100, 0.05, 20, log=True, integer=True, description="number of bins")}


def plot_apq_scatter(num_bins: int = 20, num_queries: int = 300) -> go.Figure:
    """Revaud et al. supp. Fig. 1 on synthetic lists: AP_Q vs AP, one point per query."""
    r = apq_vs_ap(num_bins, num_queries)
    fig = go.Figure(go.Scatter(x=r["ap"], y=r["apq"], mode="markers", name="queries",
                               marker=dict(size=6, color=SERIES[0], opacity=0.6)))
    fig.add_trace(go.Scatter(x=[0.0, 1.0], y=[0.0, 1.0], mode="lines", name="AP_Q = AP",
                             line=dict(color=NEUTRAL, dash="dash")))
    responsive(fig, 520, template=TEMPLATE, height=480, showlegend=False, margin=dict(l=60, r=20, t=70, b=60),
                      title=f"{num_bins} bins: correlation {r['correlation']:.3f}, "
                            f"mean |AP_Q − AP| {r['mean_abs_error']:.3f}",
                      xaxis=dict(title="exact AP", range=[0, 1.02]), yaxis=dict(title="AP_Q", range=[0, 1.02]))
    return fig
