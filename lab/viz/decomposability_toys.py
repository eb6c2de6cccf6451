"""The decomposability gap on toys: ROADMAP Fig. 1b, supp. A.2 Fig. 9-10, Eq. 8-9.

One query, K batches. In every batch the positives outrank the negatives (AP_b = 1), yet the
global AP is below 1 because the batches' scores are not comparable: DG (Eq. 6) > 0. The
calibration loss (Eq. 7) asks positives for s >= alpha and negatives for s <= beta in every
batch; the fewer items violate these thresholds, the smaller the bound of Eq. 9.
The numbers come from :mod:`lab.metrics.decomposability_gap`.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ..metrics import average_precision
from ..metrics.decomposability_gap import (calibration_counts, dg_upper_bound, dg_upper_bound_calibrated,
                                       juxtaposed_batches, query_gap)
from .controls import Slider
from .style import NEGATIVE, NEUTRAL, POSITIVE, SERIES, TEMPLATE, floats, responsive

Toy = tuple[Tensor, Tensor, Tensor]  # scores (N,), targets (N,) bool, batch_ids (N,)

# ROADMAP Fig. 1b / supp. Fig. 9: two batches of 2 positives + 2 negatives. Left: batch 2 sits
# entirely below batch 1 (AP = 1 in each, global AP < 1). Right: the same ranking inside each
# batch after calibration (positives >= alpha = 0.9, negatives <= beta = 0.6): global AP = 1.
FIG1B_SCORES = {"uncalibrated": ([0.97, 0.93, 0.82, 0.78], [0.72, 0.68, 0.50, 0.45]),
                "calibrated": ([0.97, 0.93, 0.58, 0.52], [0.95, 0.91, 0.56, 0.40])}


def fig1b_toy(calibrated: bool = False) -> Toy:
    """The two-batch toy of ROADMAP Fig. 1b / supp. Fig. 9 (one query)."""
    batch1, batch2 = FIG1B_SCORES["calibrated" if calibrated else "uncalibrated"]
    scores = torch.tensor(batch1 + batch2, dtype=torch.float64)
    targets = torch.tensor([True, True, False, False] * 2)
    return scores, targets, torch.tensor([0] * 4 + [1] * 4)


def toy_batches(num_batches: int = 4, num_pos: int = 3, num_neg: int = 6, shift: float = 0.3,
                seed: int = 0) -> Toy:
    """K batches of one query with AP_b = 1 each, batch b shifted down by b / (K - 1) * ``shift``.

    Positives draw from [0.80, 0.97], negatives from [0.30, 0.60], so each batch is perfectly
    ranked and, unshifted, meets the calibration thresholds alpha = 0.8, beta = 0.6. The shift
    is the miscalibration between batches that the calibration loss removes (0 <= shift <= 0.5).
    """
    if not (num_batches >= 1 and num_pos >= 1 and num_neg >= 0 and 0 <= shift <= 0.5):
        raise ValueError("need num_batches >= 1, num_pos >= 1, num_neg >= 0 and 0 <= shift <= 0.5")
    g = torch.Generator().manual_seed(seed)
    scores, targets, ids = [], [], []
    for b in range(num_batches):
        offset = -shift * b / (num_batches - 1) if num_batches > 1 else 0.0
        pos = 0.80 + 0.17 * torch.rand(num_pos, generator=g, dtype=torch.float64)
        neg = 0.30 + 0.30 * torch.rand(num_neg, generator=g, dtype=torch.float64)
        scores.append(torch.cat([pos, neg]) + offset)
        targets += [True] * num_pos + [False] * num_neg
        ids += [b] * (num_pos + num_neg)
    return torch.cat(scores), torch.tensor(targets), torch.tensor(ids)


def gap_summary(scores: Tensor, targets: Tensor, batch_ids: Tensor, alpha: float = 0.9, beta: float = 0.6) -> dict:
    """Measured DG (Eq. 6), the bounds of Eq. 8 and Eq. 9 (worst batch order), the batch and
    global APs and the calibration counts of one query's batches."""
    counts = calibration_counts(scores, targets, batch_ids, alpha, beta)
    num_pos = [a + b for a, b in zip(counts["pos_above_alpha"], counts["pos_below_alpha"])]
    num_neg = [a + b for a, b in zip(counts["neg_below_beta"], counts["neg_above_beta"])]
    masks = torch.stack([batch_ids == b for b in torch.unique(batch_ids)])
    batch_ap = average_precision(scores.expand(len(masks), -1), targets.expand(len(masks), -1), masks)
    return {"gap": query_gap(scores, targets, batch_ids), "eq8": dg_upper_bound(num_pos, num_neg),
            "eq9": dg_upper_bound_calibrated(**counts), "batch_ap": floats(batch_ap),
            "global_ap": float(average_precision(scores[None], targets[None])[0]), **counts}


def _draw_batches(fig: go.Figure, col: int, scores: Tensor, targets: Tensor, batch_ids: Tensor,
                  alpha: float, beta: float, showlegend: bool) -> None:
    """Items of each batch as a column of markers (x = batch, y = score); hollow = violates
    its calibration threshold (positive below alpha, negative above beta)."""
    for is_pos, color, name in ((True, POSITIVE, "positive"), (False, NEGATIVE, "negative")):
        keep = targets == is_pos
        s, b = scores[keep], batch_ids[keep]
        ok = (s >= alpha) if is_pos else (s <= beta)
        jitter = [0.12 if is_pos else -0.12] * len(s)
        for flag, symbol, suffix in ((True, "circle", " (calibrated)"), (False, "circle-open", " (violates α/β)")):
            sel = ok == flag
            fig.add_trace(go.Scatter(
                x=[float(v) + j + 1 for v, j, f in zip(b.tolist(), jitter, sel.tolist()) if f], y=floats(s[sel]),
                mode="markers", name=name + suffix, showlegend=showlegend,
                marker=dict(size=11, color=color, symbol=symbol, line=dict(color=color, width=2))), row=1, col=col)
    for value, label in ((alpha, "α"), (beta, "β")):
        fig.add_hline(y=value, line=dict(color=NEUTRAL, dash="dash", width=1), row=1, col=col,
                      annotation_text=f"{label} = {value:.2f}", annotation_position="top right")
    k = int(batch_ids.max()) + 1
    fig.update_xaxes(tickvals=list(range(1, k + 1)), ticktext=[f"batch {b + 1}" for b in range(k)],
                     range=[0.4, k + 0.6], row=1, col=col)


def plot_fig1b(alpha: float = 0.9, beta: float = 0.6) -> go.Figure:
    """ROADMAP Fig. 1b / supp. Fig. 9: AP = 1 in each batch; global AP < 1 unless calibrated."""
    titles = []
    for calibrated in (False, True):
        r = gap_summary(*fig1b_toy(calibrated), alpha, beta)
        name = "calibrated (L_calibr. = 0)" if calibrated else "not calibrated"
        titles.append(f"{name}: global AP = {r['global_ap']:.3f}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, shared_yaxes=True, horizontal_spacing=0.06)
    for col, calibrated in ((1, False), (2, True)):
        _draw_batches(fig, col, *fig1b_toy(calibrated), alpha, beta, showlegend=col == 1)
    fig.update_yaxes(title_text="score s", range=[0.3, 1.02], row=1, col=1)
    responsive(fig, 900, template=TEMPLATE, height=430, margin=dict(l=75, r=20, t=90, b=90),
                      legend=dict(orientation="h", y=-0.15),
                      title="AP = 1 in every batch (both panels), yet the global AP can be < 1")
    return fig


JUXTAPOSED_SLIDERS = {
    "num_batches": Slider(1, 8, 1, 3, integer=True, description="batches K"),
    "num_pos": Slider(1, 6, 1, 2, integer=True, description="positives per batch"),
    "num_neg": Slider(0, 12, 1, 4, integer=True, description="negatives per batch"),
}


def plot_juxtaposed(num_batches: int = 3, num_pos: int = 2, num_neg: int = 4) -> go.Figure:
    """ROADMAP supp. Fig. 10: the worst case of Eq. 8, batches laid end to end in the global ranking.

    Left: the global ranked list (x = rank), one band per batch. Right: the Eq. 8 bound for
    1..12 batches of this composition: the smaller a batch is relative to the dataset
    (B / N = 1 / K), the larger the possible gap.
    """
    pos, neg = [num_pos] * num_batches, [num_neg] * num_batches
    scores, targets, batch_ids = juxtaposed_batches(pos, neg)
    gap, bound = query_gap(scores, targets, batch_ids), dg_upper_bound(pos, neg)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.66, 0.34], horizontal_spacing=0.1,
                        subplot_titles=(f"global ranking: DG = {gap:.3f} = Eq. 8 bound {bound:.3f}",
                                        "Eq. 8 bound vs number of batches"))
    ranks = list(range(1, len(targets) + 1))
    for is_pos, color, name in ((True, POSITIVE, "positive"), (False, NEGATIVE, "negative")):
        fig.add_trace(go.Scatter(x=[r for r, t in zip(ranks, targets.tolist()) if t == is_pos],
                                 y=[1.0] * int((targets == is_pos).sum()), mode="markers", name=name,
                                 marker=dict(size=12, color=color, symbol="square")), row=1, col=1)
    size = num_pos + num_neg
    for b in range(num_batches):  # after the traces: plotly skips shapes on a subplot without data
        fig.add_vrect(x0=b * size + 0.5, x1=(b + 1) * size + 0.5, fillcolor=SERIES[b % len(SERIES)], opacity=0.15,
                      line_width=0, row=1, col=1)
    ks = list(range(1, 13))
    bounds = [dg_upper_bound([num_pos] * k, [num_neg] * k) for k in ks]
    fig.add_trace(go.Scatter(x=ks, y=bounds, mode="lines+markers", name="Eq. 8 bound", showlegend=False,
                             line=dict(color=SERIES[1])), row=1, col=2)
    fig.add_trace(go.Scatter(x=[num_batches], y=[bound], mode="markers", name="this K", showlegend=False,
                             marker=dict(size=13, color=SERIES[1], symbol="circle-open", line=dict(width=2))),
                  row=1, col=2)
    fig.update_yaxes(visible=False, showticklabels=False, range=[0.5, 1.5], row=1, col=1)
    fig.update_xaxes(title_text="rank in the global list (bands: batches)", range=[0.5, len(ranks) + 0.5], row=1, col=1)
    fig.update_xaxes(title_text="number of batches K", row=1, col=2)
    fig.update_yaxes(title_text="bound on DG", range=[0, max(0.05, 1.15 * max(bounds))], row=1, col=2)
    responsive(fig, 900, template=TEMPLATE, height=340, margin=dict(l=50, r=20, t=80, b=90),
                      legend=dict(orientation="h", y=-0.3),
                      title=f"Worst case (supp. Fig. 10): {num_batches} batches of {num_pos}+ / {num_neg}−, "
                            "AP_b = 1 each")
    return fig


CALIBRATION_SLIDERS = {
    "shift": Slider(0.0, 0.5, 0.01, 0.4, description="score shift first → last batch"),
    "alpha": Slider(0.56, 0.95, 0.01, 0.6, description="α (positives above)"),
    "beta": Slider(0.2, 0.55, 0.01, 0.5, description="β (negatives below)"),
}


def plot_calibration_bounds(shift: float = 0.4, alpha: float = 0.6, beta: float = 0.5, num_batches: int = 4,
                            num_pos: int = 3, num_neg: int = 6, seed: int = 0) -> go.Figure:
    """Eq. 8 vs Eq. 9 vs the measured gap DG on batches whose scores are shifted against each
    other: a smaller shift (what the calibration loss achieves) means fewer items violating α or β
    and a tighter Eq. 9.

    The batches are ``toy_batches(num_batches, num_pos, num_neg, shift, seed)``."""
    if not alpha > beta:
        raise ValueError(f"alpha must be larger than beta, got alpha={alpha}, beta={beta}")
    toy = toy_batches(num_batches, num_pos, num_neg, shift, seed)
    r = gap_summary(*toy, alpha, beta)
    violations = sum(r["pos_below_alpha"]) + sum(r["neg_above_beta"])
    fig = make_subplots(rows=1, cols=2, column_widths=[0.66, 0.34], horizontal_spacing=0.1,
                        subplot_titles=(f"{violations} items violate α / β (hollow)", "gap and bounds"))
    _draw_batches(fig, 1, *toy, alpha, beta, showlegend=True)
    names, values = ["DG (Eq. 6)", "Eq. 9", "Eq. 8"], [r["gap"], r["eq9"], r["eq8"]]
    fig.add_trace(go.Bar(x=names, y=values, marker=dict(color=[NEUTRAL, SERIES[0], SERIES[1]]), showlegend=False,
                         text=[f"{v:.3f}" for v in values], textposition="outside"), row=1, col=2)
    fig.update_yaxes(title_text="score s", range=[-0.4, 1.05], row=1, col=1)
    fig.update_yaxes(range=[0, max(0.1, 1.25 * max(values))], row=1, col=2)
    responsive(fig, 900, template=TEMPLATE, height=440, margin=dict(l=75, r=20, t=90, b=100),
                      legend=dict(orientation="h", y=-0.18),
                      title=f"Calibration tightens the bound: shift {shift:.2f}, α = {alpha:.2f}, β = {beta:.2f}")
    return fig


def bound_is_tighter(counts: dict[str, list[int]]) -> bool:
    """The sufficient condition for Eq. 9 <= Eq. 8 (see dg_upper_bound_calibrated):
    max_b E-_b / |N^b| <= min_b G+_b / |P^b| (batches without negatives count as 0)."""
    neg = [e / (g + e) if g + e else 0.0 for g, e in zip(counts["neg_below_beta"], counts["neg_above_beta"])]
    pos = [g / (g + e) if g + e else math.inf for g, e in zip(counts["pos_above_alpha"], counts["pos_below_alpha"])]
    return max(neg) <= min(pos)
