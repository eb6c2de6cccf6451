"""Figures of trained runs, drawn from their result rows (dicts with a ``loss`` key and metric keys
as :func:`lab.metrics.retrieval_metrics` names them); the runs are made by :mod:`lab.experiments`.
Rows of the reproduction study (:mod:`lab.experiments.cached`) also carry ``std`` and ``values``
(per seed): the figures then draw the mean, an error bar of one std and each seed as a dot.

* ROADMAP Table 2 (:func:`plot_loss_comparison`), SupRank Tab. II's recall losses
  (:func:`plot_recall_study`), any metrics of several runs (:func:`plot_metric_points`) and a
  Markdown table (:func:`metrics_table`). The losses differ by a point or two: each metric gets its
  own panel with a y axis zoomed to the data (not starting at 0), which the title says;
* ROADMAP Fig. 5 / supp. Table 9: mAP@R, the relative gain of ROADMAP over SupAP and the
  decomposability gap across batch sizes (:func:`plot_batch_size_study`);
* FastAP Fig. 4b: test R@1 against the number of bins (:func:`plot_bins_study`);
* SupRank Tab. IX: metrics at each label level (:func:`plot_level_metrics`).
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..metrics import RETRIEVAL_KEYS as RETRIEVAL
from .style import CATEGORIES, NEUTRAL, TEMPLATE, responsive

ZOOM_NOTE = "each panel's y axis is zoomed to the data (it does not start at 0)"


def _std(row: dict[str, Any], metric: str) -> float:
    """One std over seeds (rows of the reproduction study), 0 for a single run."""
    return float(row.get("std", {}).get(metric, 0.0))


def _how(rows: Sequence[dict[str, Any]]) -> str:
    """'300 steps per run, mean ± std over 3 seeds' or '300 steps per run, seed 0, one run each'."""
    if not rows:
        return ""
    steps = sorted({r["steps"] for r in rows})
    runs = f"{'/'.join(map(str, steps))} steps per run"
    if all("std" in r for r in rows):
        n = len(rows[0]["seeds"])
        return f"{runs}, mean ± std over {n} seed{'s' if n != 1 else ''}"
    return f"{runs}, seed {rows[0].get('seed', 0)}, one run each"


def zoomed_range(lows: Sequence[float], highs: Sequence[float], margin: float = 0.25,
                 min_span: float = 0.02) -> list[float]:
    """A y range around [min(lows), max(highs)] with ``margin`` of the span on each side (at least
    ``min_span`` wide), clipped to [0, 1] when the data lie inside (a metric; a decomposability gap
    may be negative): a difference of one point fills part of the panel."""
    lo, hi = min(lows), max(highs)
    pad = max(margin * (hi - lo), (min_span - (hi - lo)) / 2, 0.0)
    return [max(0.0, lo - pad) if lo >= 0.0 else lo - pad, min(1.0, hi + pad) if hi <= 1.0 else hi + pad]


SAME_SPAN_NOTE = "every panel's y axis spans the same {span:.1f} points: differences compare across panels"


def same_span_ranges(ranges: Sequence[Sequence[float]], bounds: Sequence[float] = (0.0, 1.0)) -> list[list[float]]:
    """The y ranges of panels drawn at one scale: each as wide as the widest of ``ranges``, centred
    on its own, moved (not shrunk) to stay inside ``bounds`` where it can. Zoomed separately, a
    0.1-point difference of single runs would fill its panel as a 4-point one does (issue 36, C-1)."""
    width = max(hi - lo for lo, hi in ranges)
    out = []
    for lo, hi in ranges:
        low = (lo + hi - width) / 2
        if width <= bounds[1] - bounds[0]:
            low = min(max(low, bounds[0]), bounds[1] - width) if bounds[0] <= lo and hi <= bounds[1] else low
        out.append([low, low + width])
    return out


def metrics_table(rows: list[dict[str, Any]], columns: Sequence[str] = RETRIEVAL, key: str = "loss") -> str:
    """A Markdown table, one line per row: ``key`` then ``columns`` in percent, one decimal (as
    the papers print them), "± std" over seeds when the rows have it; the best mean of each column
    in bold."""
    best = {c: max(float(r[c]) for r in rows) for c in columns} if rows else {}

    def cell(r: dict[str, Any], c: str) -> str:
        text = f"{100 * float(r[c]):.1f}" + (f" ± {100 * _std(r, c):.1f}" if "std" in r else "")
        return f"**{text}**" if float(r[c]) == best[c] else text

    lines = ["| " + " | ".join([key, *columns]) + " |", "|" + "---|" * (len(columns) + 1)]
    lines += ["| " + " | ".join([str(r[key]), *(cell(r, c) for c in columns)]) + " |" for r in rows]
    return "\n".join(lines)


def plot_metric_points(rows: list[dict[str, Any]], metrics: Sequence[str], title: str, key: str = "loss",
                       columns: int = 5, same_span: bool = False) -> go.Figure:
    """One panel per metric; in each, one marker per row at x = its index (the same colour in every
    panel, named by ``row[key]`` in the legend), an error bar of one std over seeds and each seed
    as a grey dot when the row has them. Each y axis is zoomed to its panel's data; with
    ``same_span`` all of them span the same height (:func:`same_span_ranges`), so that a difference
    looks as large as it is in every panel (for single runs, which have no error bar to read it by)."""
    cols = max(1, min(columns, len(metrics)))
    nrows = math.ceil(len(metrics) / cols)
    specs = [[{} if r * cols + c < len(metrics) else None for c in range(cols)] for r in range(nrows)]  # no empty panel
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=list(metrics), horizontal_spacing=0.08,
                        vertical_spacing=0.16, specs=specs)
    ranges = []
    for m, metric in enumerate(metrics):
        r, c = m // cols + 1, m % cols + 1
        lows, highs = [], []
        for i, row in enumerate(rows):
            mean, std = float(row[metric]), _std(row, metric)
            seeds = [float(v) for v in row.get("values", {}).get(metric, [])]
            lows += [mean - std, *seeds]
            highs += [mean + std, *seeds]
            fig.add_trace(go.Scatter(x=[float(i)], y=[mean], mode="markers", name=str(row[key]), showlegend=m == 0,
                                     legendgroup=str(row[key]),
                                     marker=dict(size=10, color=CATEGORIES[i % len(CATEGORIES)]),
                                     error_y=dict(type="data", array=[std], visible="std" in row)), row=r, col=c)
        for i, row in enumerate(rows):  # after the means: "one seed" comes last in the legend
            seeds = [float(v) for v in row.get("values", {}).get(metric, [])]
            if seeds:
                fig.add_trace(go.Scatter(x=[i + 0.25] * len(seeds), y=seeds, mode="markers", name="one seed",
                                         showlegend=m == 0 and i == 0, legendgroup="seeds",
                                         marker=dict(size=4, color=NEUTRAL)), row=r, col=c)
        ranges.append(zoomed_range(lows, highs))
        fig.update_xaxes(range=[-0.6, len(rows) - 0.3], showticklabels=False, row=r, col=c)
    note = ZOOM_NOTE
    if same_span and ranges:
        ranges = same_span_ranges(ranges)
        note = SAME_SPAN_NOTE.format(span=100 * (ranges[0][1] - ranges[0][0]))
    for m, y_range in enumerate(ranges):
        fig.update_yaxes(range=y_range, row=m // cols + 1, col=m % cols + 1)
    responsive(fig, max(560, 190 * cols + 100), template=TEMPLATE, height=300 * nrows + 130,
                      margin=dict(l=62, r=20, t=90, b=70), title=f"{title}<br>{note}",
                      legend=dict(orientation="h", y=-0.05))
    return fig


def plot_loss_comparison(rows: list[dict[str, Any]]) -> go.Figure:
    """Test R@1/2/4/8 and mAP@R of each loss (ROADMAP Table 2), one panel per metric."""
    return plot_metric_points(rows, RETRIEVAL, f"Same seeds, only the loss differs: test retrieval ({_how(rows)})")


def plot_recall_study(rows: list[dict[str, Any]]) -> go.Figure:
    """Test R@1, R@2, R@4, R@8 and mAP@R of each loss (SupRank Tab. II), one panel each: mAP@R is the
    study's primary metric, the one the notebook's test of the claim reads (issue 36, C-1)."""
    return plot_metric_points(rows, RETRIEVAL, f"Recall losses vs ROADMAP: test recall and mAP@R ({_how(rows)})")


def plot_level_metrics(rows: list[dict[str, Any]], metrics: Sequence[str] = ()) -> go.Figure:
    """Fine-level (R@1, mAP@R, the AP of each label level) and hierarchical metrics (H-AP, NDCG,
    ASI) of each run, one panel each; ``metrics`` default: those of the first row, in that order.
    Every panel spans the same height (single runs: no error bar says how large a difference is)."""
    if not metrics and rows:
        keys = list(rows[0])
        metrics = [k for k in ("R@1", "mAP@R") if k in keys] + [k for k in keys if k.startswith("AP@")] + \
            [k for k in ("H-AP", "NDCG", "ASI") if k in keys]
    return plot_metric_points(rows, metrics, f"Two-level labels: test metrics by level ({_how(rows)})", columns=4,
                              same_span=True)


def relative_gains(rows: list[dict[str, Any]], metric: str = "mAP@R", base: str = "sup_ap",
                   new: str = "roadmap") -> dict[int, list[float]]:
    """{batch size: relative gains 100 * (new - base) / base}, ROADMAP Fig. 5's y axis: one per seed
    (paired by seed) when both rows carry per-seed ``values`` of the same seeds, else one of the means."""
    by = {(r["loss"], r["batch_size"]): r for r in rows}
    out: dict[int, list[float]] = {}
    for b in sorted({r["batch_size"] for r in rows}):
        if (new, b) not in by or (base, b) not in by:
            continue
        n, o = by[(new, b)], by[(base, b)]
        if metric in n.get("values", {}) and metric in o.get("values", {}) and n["seeds"] == o["seeds"]:
            pairs = list(zip(n["values"][metric], o["values"][metric]))
        else:
            pairs = [(float(n[metric]), float(o[metric]))]
        if all(y > 0 for _, y in pairs):
            out[b] = [100.0 * (x - y) / y for x, y in pairs]
    return out


def relative_gain(rows: list[dict[str, Any]], metric: str = "mAP@R", base: str = "sup_ap",
                  new: str = "roadmap") -> dict[int, float]:
    """{batch size: mean relative gain (%)} of :func:`relative_gains`."""
    return {b: statistics.fmean(g) for b, g in relative_gains(rows, metric, base, new).items()}


# The two decomposability gaps of a trained model (ROADMAP Eq. 6), with how they cut the data.
GAPS = (("gap_heldout", "solid", "held-out: a fixed N test images in N/B batches"),
        ("gap", "dot", "train probe: a fixed number of training batches of B (8 in full mode)"))


def _went(first: float, last: float, sizes: tuple[str, str] = ("", "")) -> str:
    """'rose from 0.051 (B = 32) to 0.171 (B = 256)', 'fell from ...' or 'stayed at 0.200' (3 decimals, as printed)."""
    if round(first, 3) == round(last, 3):
        return f"stayed at {first:.3f}"
    return f"{'rose' if last > first else 'fell'} from {first:.3f}{sizes[0]} to {last:.3f}{sizes[1]}"


def two_gaps_sentence(rows: Sequence[dict[str, Any]]) -> str:
    """What :func:`lab.experiments.runs.gap_by_batch_size`'s rows (one model cut into batches of
    each size) say from the smallest batch to the largest, with the digits the notebook prints
    (notebook 02, section 5): generated, so the prose says what this run measured."""
    a, b = min(rows, key=lambda r: r["batch_size"]), max(rows, key=lambda r: r["batch_size"])
    sizes = (f" (B = {a['batch_size']})", f" (B = {b['batch_size']})")
    return (f"In this run the probe's gap {_went(a['probe'], b['probe'], sizes)}, while the held-out gap of the "
            f"same model {_went(a['heldout'], b['heldout'])}.")


def plot_batch_size_study(rows: list[dict[str, Any]]) -> go.Figure:
    """ROADMAP Fig. 5 and supp. Table 9 across batch sizes: mAP@R of each loss, the relative mAP@R
    gain of ROADMAP over SupAP (%), and the decomposability gap of each trained model: held-out
    (solid; what grows as batches shrink, N/B batches of a fixed N) and on the trainer's probe of
    training batches (dotted; the same N/B = 8 at every B, see ``GAPS``)."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09,
                        subplot_titles=("test mAP@R", "ROADMAP's mAP@R gain over SupAP (%)",
                                        "decomposability gap (Eq. 6)"))
    sizes = sorted({float(r["batch_size"]) for r in rows})
    for i, loss in enumerate(sorted({r["loss"] for r in rows}, key=lambda name: name != "sup_ap")):
        mine = sorted((r for r in rows if r["loss"] == loss), key=lambda r: r["batch_size"])
        panels = [(1, "mAP@R", "solid")] + [(3, key, dash) for key, dash, _ in GAPS if all(key in r for r in mine)]
        for col, metric, dash in panels:
            fig.add_trace(go.Scatter(x=[float(r["batch_size"]) for r in mine], y=[float(r[metric]) for r in mine],
                                     mode="lines+markers", name=loss, showlegend=col == 1, legendgroup=loss,
                                     line=dict(color=CATEGORIES[i], dash=dash), marker=dict(color=CATEGORIES[i]),
                                     error_y=dict(type="data", array=[_std(r, metric) for r in mine],
                                                  visible=all("std" in r for r in mine))), row=1, col=col)
    for key, dash, text in GAPS:  # legend entries for the two line styles of the gap panel
        if rows and all(key in r for r in rows):
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"gap, {text}",
                                     line=dict(color=NEUTRAL, dash=dash)), row=1, col=3)
    gains = relative_gains(rows)
    spread = [statistics.stdev(g) if len(g) > 1 else 0.0 for g in gains.values()]
    fig.add_trace(go.Bar(x=[str(b) for b in gains], y=[statistics.fmean(g) for g in gains.values()],
                         name="relative gain", marker=dict(color=CATEGORIES[2]), showlegend=False,
                         error_y=dict(type="data", array=spread, visible=any(len(g) > 1 for g in gains.values()))),
                  row=1, col=2)
    for col in (1, 3):
        fig.update_xaxes(title_text="batch size", type="log", tickvals=sizes, ticktext=[f"{b:g}" for b in sizes],
                         row=1, col=col)
    fig.update_xaxes(title_text="batch size", row=1, col=2)
    responsive(fig, 1020, template=TEMPLATE, height=420, margin=dict(l=60, r=20, t=80, b=100),
                      legend=dict(orientation="h", y=-0.25),
                      title=f"SupAP vs ROADMAP across batch sizes ({_how(rows)})")
    return fig


def plot_bins_study(rows: list[dict[str, Any]], metric: str = "R@1") -> go.Figure:
    """``metric`` of each loss against the number of bins (FastAP Fig. 4b), log x axis. Left: every
    bin count; right: the same without the fewest bins, zoomed, where the peak is decided."""
    counts = sorted({int(r["num_bins"]) for r in rows})
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("every bin count",
                                        f"zoom: {counts[1] if len(counts) > 1 else ''} bins and more"))
    lows, highs = [], []
    for i, loss in enumerate(dict.fromkeys(r["loss"] for r in rows)):
        mine = sorted((r for r in rows if r["loss"] == loss), key=lambda r: r["num_bins"])
        for col, shown in ((1, mine), (2, mine[1:] if len(counts) > 1 else mine)):
            fig.add_trace(go.Scatter(x=[float(r["num_bins"]) for r in shown], y=[float(r[metric]) for r in shown],
                                     mode="lines+markers", name=loss, showlegend=col == 1, legendgroup=loss,
                                     line=dict(color=CATEGORIES[i]), marker=dict(color=CATEGORIES[i]),
                                     error_y=dict(type="data", array=[_std(r, metric) for r in shown],
                                                  visible=all("std" in r for r in shown))), row=1, col=col)
        lows += [float(r[metric]) - _std(r, metric) for r in mine[1:]]
        highs += [float(r[metric]) + _std(r, metric) for r in mine[1:]]
    for col in (1, 2):
        fig.update_xaxes(title_text="number of bins", type="log", tickvals=[float(n) for n in counts],
                         ticktext=[str(n) for n in counts], row=1, col=col)
        fig.update_yaxes(title_text=f"test {metric}" if col == 1 else "", row=1, col=col)
    if lows:
        fig.update_yaxes(range=zoomed_range(lows, highs), row=1, col=2)
    responsive(fig, 900, template=TEMPLATE, height=400, margin=dict(l=60, r=20, t=80, b=100),
                      legend=dict(orientation="h", y=-0.25),
                      title=f"Test {metric} against the number of bins ({_how(rows)})")
    return fig
