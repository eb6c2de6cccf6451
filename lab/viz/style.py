"""Colours and small helpers shared by the figure builders.

Figures are built from Python lists, never numpy arrays or tensors: plotly 7 base64-encodes
arrays in the JSON spec, and the tests and the dashboard read the spec.
"""
from __future__ import annotations

from typing import Iterable

import plotly.graph_objects as go

POSITIVE = "#2ca02c"  # green, as in ROADMAP Fig. 1 / 7-8
NEGATIVE = "#d62728"  # red
NEUTRAL = "#7f7f7f"
SERIES = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#e377c2"]
# Up to 20 categories at once (t-SNE maps coloured by class): strong hues first, then their
# light variants; no pure green / red, which mean relevant / not relevant elsewhere.
CATEGORIES = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#393b79",
              "#e6550d", "#637939", "#7b4173", "#3182bd", "#843c39", "#6b6ecf", "#aec7e8", "#ffbb78",
              "#c5b0d5", "#c49c94", "#9edae5", "#f7b6d2"]
RELEVANCE = {0.0: NEGATIVE, 1 / 3: "#ff9896", 2 / 3: "#aec7e8", 1.0: POSITIVE}  # SupRank Fig. 3 colours
TEMPLATE = "plotly_white"


def floats(values: Iterable) -> list[float]:
    """A plain list of Python floats from a tensor, an array or any iterable of numbers."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().reshape(-1).tolist()
    elif hasattr(values, "tolist"):
        values = values.reshape(-1).tolist()
    return [float(v) for v in values]


def base_figure(title: str, height: int = 420, width: int = 760) -> go.Figure:
    """An empty figure with the lab's template, size and title."""
    fig = go.Figure()
    fig.update_layout(template=TEMPLATE, title=title, height=height, width=width,
                      margin=dict(l=60, r=20, t=70, b=50))
    return fig
