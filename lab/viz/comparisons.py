"""Figures of trained runs, drawn from their result rows (dicts with a ``loss`` key and metric keys
as :func:`lab.metrics.retrieval_metrics` names them); the runs are made by :mod:`lab.experiments`.

* ROADMAP Table 2 as bars (:func:`plot_loss_comparison`), SupRank Tab. II's recall losses
  (:func:`plot_recall_study`), any grouped bars (:func:`plot_metric_bars`) and a Markdown table
  (:func:`metrics_table`);
* ROADMAP Fig. 5: the decomposability gap and the relative gain of ROADMAP over SupAP across
  batch sizes (:func:`plot_batch_size_study`);
* FastAP Fig. 4b: test retrieval against the number of bins (:func:`plot_bins_study`);
* SupRank Tab. IX: metrics at each label level (:func:`plot_level_metrics`).
"""
from __future__ import annotations

from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..metrics import RETRIEVAL_KEYS as RETRIEVAL
from .style import SERIES, TEMPLATE


def metrics_table(rows: list[dict[str, Any]], columns: Sequence[str] = RETRIEVAL, key: str = "loss") -> str:
    """A Markdown table, one line per row: ``key`` then ``columns`` in percent, one decimal (as
    the papers print them); the best value of each column in bold."""
    best = {c: max(float(r[c]) for r in rows) for c in columns} if rows else {}
    lines = ["| " + " | ".join([key, *columns]) + " |", "|" + "---|" * (len(columns) + 1)]
    for r in rows:
        cells = [f"**{100 * float(r[c]):.1f}**" if float(r[c]) == best[c] else f"{100 * float(r[c]):.1f}" for c in columns]
        lines.append("| " + " | ".join([str(r[key]), *cells]) + " |")
    return "\n".join(lines)


def plot_metric_bars(rows: list[dict[str, Any]], metrics: Sequence[str], title: str, key: str = "loss",
                     width: int = 620) -> go.Figure:
    """Grouped bars: x = the metrics, one colour per row (named by ``row[key]``), y in [0, 1]."""
    fig = go.Figure()
    for i, row in enumerate(rows):
        fig.add_trace(go.Bar(x=list(metrics), y=[float(row[m]) for m in metrics], name=str(row[key]),
                             marker=dict(color=SERIES[i % len(SERIES)])))
    fig.update_layout(template=TEMPLATE, barmode="group", height=380, width=width, margin=dict(l=60, r=20, t=70, b=90),
                      title=title, yaxis=dict(title="metric", range=[0, 1]), legend=dict(orientation="h", y=-0.2))
    return fig


def plot_loss_comparison(rows: list[dict[str, Any]]) -> go.Figure:
    """Test R@1/2/4/8 and mAP@R of each trained model, grouped by metric (ROADMAP Table 2 as bars)."""
    steps, seed = (rows[0]["steps"], rows[0].get("seed", 0)) if rows else (0, 0)
    return plot_metric_bars(rows, RETRIEVAL, f"Same seed, {steps} steps per loss: test retrieval (seed {seed})")


def relative_gain(rows: list[dict[str, Any]], metric: str = "mAP@R", base: str = "sup_ap",
                  new: str = "roadmap") -> dict[int, float]:
    """{batch size: 100 * (metric(new) - metric(base)) / metric(base)}: ROADMAP Fig. 5's y axis."""
    by = {(r["loss"], r["batch_size"]): r[metric] for r in rows}
    sizes = sorted({r["batch_size"] for r in rows})
    return {b: 100.0 * (by[(new, b)] - by[(base, b)]) / by[(base, b)] for b in sizes
            if (new, b) in by and (base, b) in by and by[(base, b)] > 0}


def plot_batch_size_study(rows: list[dict[str, Any]]) -> go.Figure:
    """Left: decomposability gap of each trained model vs batch size. Right: relative mAP@R
    gain of ROADMAP over SupAP (ROADMAP Fig. 5)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("decomposability gap of the trained model", "mAP@R gain of ROADMAP over SupAP (%)"))
    for i, loss in enumerate(sorted({r["loss"] for r in rows})):
        mine = sorted((r for r in rows if r["loss"] == loss), key=lambda r: r["batch_size"])
        fig.add_trace(go.Scatter(x=[float(r["batch_size"]) for r in mine], y=[float(r["gap"]) for r in mine],
                                 mode="lines+markers", name=loss, line=dict(color=SERIES[i])), row=1, col=1)
    gain = relative_gain(rows)
    fig.add_trace(go.Bar(x=[str(b) for b in gain], y=list(gain.values()), name="relative gain",
                         marker=dict(color=SERIES[2]), showlegend=False), row=1, col=2)
    steps = rows[0]["steps"] if rows else 0
    sizes = sorted({float(r["batch_size"]) for r in rows})
    fig.update_xaxes(title_text="batch size", type="log", tickvals=sizes, ticktext=[f"{b:g}" for b in sizes], row=1, col=1)
    fig.update_xaxes(title_text="batch size", row=1, col=2)
    fig.update_layout(template=TEMPLATE, height=400, width=900, margin=dict(l=60, r=20, t=80, b=100),
                      legend=dict(orientation="h", y=-0.25),
                      title=f"SupAP vs ROADMAP on glyphs, {steps} steps per run")
    return fig


def plot_bins_study(rows: list[dict[str, Any]]) -> go.Figure:
    """R@1 and mAP@R of the trained model against the number of bins (FastAP Fig. 4b)."""
    fig = go.Figure()
    for i, metric in enumerate(("R@1", "mAP@R")):
        fig.add_trace(go.Scatter(x=[float(r["num_bins"]) for r in rows], y=[float(r[metric]) for r in rows],
                                 mode="lines+markers", name=metric, line=dict(color=SERIES[i])))
    loss = rows[0]["loss"] if rows else ""
    fig.update_layout(template=TEMPLATE, height=380, width=620, margin=dict(l=60, r=20, t=70, b=90),
                      title=f"{loss}: test retrieval vs number of bins ({rows[0]['steps'] if rows else 0} steps per run)",
                      xaxis=dict(title="num_bins", type="log", tickvals=[float(r["num_bins"]) for r in rows],
                                 ticktext=[str(r["num_bins"]) for r in rows]), yaxis=dict(title="metric"),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def plot_recall_study(rows: list[dict[str, Any]]) -> go.Figure:
    """Test R@1, R@2, R@4, R@8 of each trained model, grouped by k."""
    return plot_metric_bars(rows, RETRIEVAL[:4], f"Test recall of models trained {rows[0]['steps'] if rows else 0} "
                            "steps per loss")


def plot_level_metrics(rows: list[dict[str, Any]], metrics: Sequence[str] = ()) -> go.Figure:
    """Fine-level (R@1, mAP@R, the AP of each label level) and hierarchical metrics (H-AP, NDCG,
    ASI) of each run, grouped; ``metrics`` default: those of the first row, in that order."""
    if not metrics and rows:
        keys = list(rows[0])
        metrics = [k for k in ("R@1", "mAP@R") if k in keys] + [k for k in keys if k.startswith("AP@")] + \
            [k for k in ("H-AP", "NDCG", "ASI") if k in keys]
    steps = rows[0]["steps"] if rows else 0
    return plot_metric_bars(rows, metrics, f"Two-level labels, {steps} steps per loss: test metrics by level", width=780)
