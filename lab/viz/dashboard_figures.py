"""The dashboard's figures: what the training curves plot (drawn by :mod:`lab.viz.svg_curves`), run
comparison, score and AP histograms, the embedding map and a query's retrievals. Pure functions, built from
Python lists (plotly 7 would base64-encode arrays), with the numbers they draw computed by functions the tests
call.

Runs are passed as ``{label: data}`` (one entry, or two in compare mode) and keep one colour
each across figures. Retrieval frames: green = same class, orange = same coarse class only,
red = neither (ROADMAP Fig. 6 / SupRank Fig. 9 colours).
"""
from __future__ import annotations

import base64
import io
from typing import Any, Mapping, Optional, Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .retrieval_views import QUERY
from .style import CATEGORIES, CATEGORY_MARKERS, NEGATIVE, POSITIVE, SERIES, TEMPLATE, floats
from .training_curves import (COMPARED, CURVES, DISPLAY, comparison_note, latest_values,  # noqa: F401
                              run_differences, scale_note, signed, sized_layout, spread_note,
                              training_series)

MAP_HEIGHT = 400  # the embedding map whole on a 1280 x 720 screen under the view's controls (was 520: cut)
SAME_COARSE = "#ff7f0e"  # orange: not the query's class, but its coarse class
LEVEL_COLORS = {"class": POSITIVE, "coarse": SAME_COARSE, "other": NEGATIVE}
# The embedding map's groups: the lab's categorical palette (colour-blind-safe blocks, one marker
# shape per block, far from the relevance green and red) with its vermillion, too close to the
# orange of a "same coarse class" ring (CIELAB ΔE 15), replaced by a blue diamond: 20 (colour,
# marker) pairs, one per script of the glyphs (tests/test_viz_style.py checks them as the palette's).
NEAR_RINGS = ("#D55E00",)
MAP_STYLES = [(c, m) for c, m in zip(CATEGORIES, CATEGORY_MARKERS) if c not in NEAR_RINGS] + [("#1E90FF", "diamond")]



# ------------------------------------------------------------------------- score histograms
def score_histogram(pos: Sequence[float], neg: Sequence[float], alpha: float, beta: float,
                    bins: int = 50) -> dict[str, Any]:
    """Densities of positive and negative cosine similarities and what calibration (ROADMAP Eq. 7)
    looks at: the fractions of positives below ``alpha`` and negatives above ``beta``.

    The bins span the data and both thresholds (within [-1, 1]): an untrained model packs every
    similarity near 1, which [-1, 1]-wide bins would draw as one bar.
    """
    pos_t, neg_t = torch.as_tensor(pos, dtype=torch.float64), torch.as_tensor(neg, dtype=torch.float64)
    both = torch.cat([pos_t, neg_t, torch.tensor([alpha, beta], dtype=torch.float64)]).clamp(-1, 1)
    lo, hi = float(both.min()), float(both.max())
    pad = max(0.02 * (hi - lo), 1e-3)
    lo, hi = max(-1.0, lo - pad), min(1.0, hi + pad)
    edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
    out: dict[str, Any] = {"centres": floats((edges[1:] + edges[:-1]) / 2), "width": (hi - lo) / bins,
                           "range": [lo, hi]}
    for name, values in (("pos", pos_t), ("neg", neg_t)):
        counts = torch.histc(values.clamp(lo, hi), bins=bins, min=lo, max=hi)
        out[name] = floats(counts / max(1, len(values)) / out["width"])  # density: integrates to 1
        out[f"mean_{name}"] = float(values.mean()) if len(values) else float("nan")
    out["pos_below_alpha"] = float((pos_t < alpha).double().mean()) if len(pos_t) else 0.0
    out["neg_above_beta"] = float((neg_t > beta).double().mean()) if len(neg_t) else 0.0
    return out


HEADROOM = 1.3  # y axes reach 1.3 x the tallest bar: the threshold labels never cross a bar


def plot_score_histograms(samples: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                          thresholds: Mapping[str, tuple[float, float, bool]], bins: int = 50) -> go.Figure:
    """One panel per run, side by side (one screen at 1280 x 720 in compare mode too): positive (green)
    and negative (red) similarity densities of held-out pairs, with its alpha and beta (dashed when
    the loss has no calibration term: reference values)."""
    labels = list(samples)
    stats = {label: score_histogram(*samples[label], *thresholds[label][:2], bins=bins) for label in labels}
    titles = [f"{label}: {100 * stats[label]['pos_below_alpha']:.0f}% of positives < α, "
              f"{100 * stats[label]['neg_above_beta']:.0f}% of negatives > β" for label in labels]
    fig = make_subplots(rows=1, cols=len(labels), subplot_titles=titles, horizontal_spacing=0.08, shared_yaxes=False)
    for col, label in enumerate(labels, start=1):
        s, (alpha, beta, own) = stats[label], thresholds[label]
        for kind, color, name in (("pos", POSITIVE, "positive pairs"), ("neg", NEGATIVE, "negative pairs")):
            fig.add_trace(go.Bar(x=s["centres"], y=s[kind], width=s["width"], name=name, legendgroup=kind,
                                 showlegend=col == 1, marker=dict(color=color), opacity=0.55), row=1, col=col)
        # The labels sit in the headroom above the bars (HEADROOM), inside the band between the two
        # lines (never cut at the panel's edge), β's a line lower (never on α's when the lines are close).
        for x, name, side, shift in ((alpha, "α", "top left", 0), (beta, "β", "top right", -16)):
            fig.add_vline(x=x, line=dict(color="black", dash="solid" if own else "dash", width=1.5), row=1, col=col,
                          annotation_text=f"{name} = {x:.2f}" + ("" if own else " (reference)"),
                          annotation_position=side, annotation_yshift=shift, annotation_bgcolor="rgba(255,255,255,0.8)")
        fig.update_yaxes(range=[0, HEADROOM * max(s["pos"] + s["neg"] + [1e-9])], row=1, col=col)
    fig.update_layout(barmode="overlay", meta={"stats": stats})
    lo = min(s["range"][0] for s in stats.values())
    hi = max(s["range"][1] for s in stats.values())
    fig.update_xaxes(range=[lo, hi], title_text="cosine similarity to the query")
    fig.update_yaxes(title_text="density", col=1)
    fig.update_annotations(font_size=13)
    return sized_layout(fig, "Held-out similarities: what calibration separates", 330)


def score_caption(thresholds: Mapping[str, tuple[float, float, bool]]) -> str:
    """What the Scores view's lines are, for the losses shown (``thresholds``: {run label: (α, β, own)}):
    solid, the loss's own calibration thresholds; dashed, ROADMAP's defaults drawn for a loss without them."""
    own = [label for label, (_, _, mine) in thresholds.items() if mine]
    other = [label for label in thresholds if label not in own]
    text = ["Cosine similarity of every held-out query to every other held-out image. ROADMAP's calibration term "
            "pushes positives above α and negatives below β in every batch, so that scores compare across batches."]
    if own:
        text.append(f"{' and '.join(own)}: solid lines, the α and β its calibration term uses.")
    if other:
        verb = "has" if len(other) == 1 else "have"
        text.append(f"{' and '.join(other)} {verb} no calibration term: dashed lines, ROADMAP's defaults for "
                    "reference.")
    return " ".join(text)


def ap_histogram(aps: Sequence[float], bins: int = 20) -> dict[str, Any]:
    """Counts of per-query AP in ``bins`` equal bins of [0, 1], and the mean (= the held-out mAP)."""
    values = torch.as_tensor(list(aps), dtype=torch.float64)
    counts = torch.histc(values, bins=bins, min=0, max=1) if len(values) else torch.zeros(bins, dtype=torch.float64)
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    return {"centres": floats((edges[1:] + edges[:-1]) / 2), "counts": floats(counts), "width": 1.0 / bins,
            "mean": float(values.mean()) if len(values) else float("nan"), "num_queries": len(values)}


def plot_ap_histograms(aps: Mapping[str, Sequence[float]], bins: int = 20) -> go.Figure:
    """Per-query AP distribution of each run (overlaid), the mean drawn as a dotted line."""
    fig = go.Figure()
    stats = {label: ap_histogram(values, bins) for label, values in aps.items()}
    for i, (label, s) in enumerate(stats.items()):
        color = SERIES[i % len(SERIES)]
        fig.add_trace(go.Bar(x=s["centres"], y=s["counts"], width=s["width"], name=f"{label} (mAP {s['mean']:.3f})",
                             legendgroup=label, marker=dict(color=color), opacity=0.6))
        # The mean as a dotted line with its own legend entry (a shape has none): a vertical line trace.
        fig.add_trace(go.Scatter(x=[s["mean"], s["mean"]], y=[0, max(s["counts"] + [1.0])], mode="lines",
                                 name=f"{label}: mean AP (dotted line)", legendgroup=label,
                                 line=dict(color=color, dash="dot", width=2), hoverinfo="skip"))
    fig.update_layout(barmode="overlay", meta={"stats": stats}, xaxis=dict(title="AP of one query", range=[0, 1]),
                      yaxis=dict(title="queries"))
    return sized_layout(fig, "Per-query AP on the held-out images", 340)


# ------------------------------------------------------------------------- embedding map
def plot_embedding_map(points: Sequence[Sequence[float]], groups: Sequence[int], group_names: Mapping[int, str],
                       hover: Sequence[str], title: str, selected: Optional[int] = None,
                       neighbours: Optional[Mapping[str, Sequence]] = None) -> go.Figure:
    """2-D points coloured by group; every point's ``customdata`` is its row, so a click tells which
    item it is. ``selected`` (a row) is drawn as a purple star, its ``neighbours`` (``rows`` and
    ``levels``) ringed in their relevance colours."""
    fig = go.Figure()
    members: dict[int, list[int]] = {}
    for row, g in enumerate(groups):
        members.setdefault(int(g), []).append(row)
    for i, (g, rows) in enumerate(sorted(members.items())):
        colour, symbol = MAP_STYLES[i % len(MAP_STYLES)]
        fig.add_trace(go.Scatter(x=[float(points[r][0]) for r in rows], y=[float(points[r][1]) for r in rows],
                                 mode="markers", name=group_names.get(g, str(g)), customdata=rows,
                                 text=[hover[r] for r in rows],
                                 hovertemplate="%{text}<br>row %{customdata}<extra></extra>",
                                 marker=dict(size=7, color=colour, symbol=symbol, opacity=0.8)))
    if neighbours:
        rows = list(neighbours["rows"])
        fig.add_trace(go.Scatter(x=[float(points[r][0]) for r in rows], y=[float(points[r][1]) for r in rows],
                                 mode="markers", name="neighbours", customdata=rows, hoverinfo="skip",
                                 marker=dict(size=13, color="rgba(0,0,0,0)",
                                             line=dict(width=2.5,
                                                       color=[LEVEL_COLORS[v] for v in neighbours["levels"]]))))
    if selected is not None:
        fig.add_trace(go.Scatter(x=[float(points[selected][0])], y=[float(points[selected][1])], mode="markers",
                                 name="query", customdata=[selected], hoverinfo="skip",
                                 marker=dict(size=18, symbol="star", color=QUERY, line=dict(color="white", width=1))))
    fig.update_layout(showlegend=len(members) <= 20, clickmode="event+select", dragmode="pan",
                      xaxis=dict(showticklabels=False), yaxis=dict(showticklabels=False))
    return sized_layout(fig, title, MAP_HEIGHT)


# ------------------------------------------------------------------------- retrievals
def png_data_uri(img) -> str:
    """A PIL image as a PNG data URI: small, and no pixel arrays in the figure's spec."""
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def plot_retrieval_strip(query_image, images: Sequence, scores: Sequence[float], levels: Sequence[str],
                         title: str = "") -> go.Figure:
    """The query (purple frame) then its neighbours, best first, framed by relevance level
    (``LEVEL_COLORS``) and captioned with their cosine similarity. Frame colours, scores and
    levels are in ``layout.meta`` too."""
    cells = [(query_image, QUERY, "query")] + [(img, LEVEL_COLORS[lv], f"#{i + 1} · {s:.3f}")
                                               for i, (img, s, lv) in enumerate(zip(images, scores, levels))]
    fig = make_subplots(rows=1, cols=len(cells), subplot_titles=[c[2] for c in cells], horizontal_spacing=0.01)
    for col, (img, color, _) in enumerate(cells, start=1):
        fig.add_trace(go.Image(source=png_data_uri(img), hoverinfo="skip"), row=1, col=col)
        w, h = img.size
        suffix = "" if col == 1 else str(col)
        fig.add_shape(type="rect", x0=-0.5, y0=-0.5, x1=w - 0.5, y1=h - 0.5, xref=f"x{suffix}", yref=f"y{suffix}",
                      line=dict(color=color, width=5))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_annotations(font_size=11)
    fig.update_layout(meta={"scores": floats(scores), "levels": list(levels), "frames": [c[1] for c in cells]},
                      margin=dict(l=5, r=5, t=60, b=5), height=170, template=TEMPLATE,
                      title=dict(text=title
                                 or "Top neighbours (green: same class, orange: same coarse class, red: other)",
                                 font_size=13))
    return fig


__all__ = ["training_series", "run_differences", "spread_note",
           "score_histogram", "plot_score_histograms", "ap_histogram", "plot_ap_histograms", "plot_embedding_map",
           "png_data_uri", "plot_retrieval_strip", "LEVEL_COLORS"]
