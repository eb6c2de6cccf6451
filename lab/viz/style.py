"""Colours and small helpers shared by the figure builders.

Figures are built from Python lists, never numpy arrays or tensors: plotly 7 base64-encodes
arrays in the JSON spec, and the tests and the dashboard read the spec.
"""
from __future__ import annotations

import io
from typing import Any, Iterable

import plotly.graph_objects as go
from matplotlib.figure import Figure

POSITIVE = "#2ca02c"  # green, as in ROADMAP Fig. 1 / 7-8
NEGATIVE = "#d62728"  # red
NEUTRAL = "#7f7f7f"
SERIES = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#e377c2"]
# Up to 20 categories at once (maps coloured by class or by script), in blocks that share a marker
# shape (CATEGORY_MARKERS): block 1 is Okabe & Ito's colour-blind-safe set, blocks 2-3 Paul Tol's
# "muted" and "light"/"dark" colours. Every pair differs by a CIELAB distance >= 18 in normal
# vision; within a block, >= 12 under simulated protan-, deuter- and tritanopia (across blocks the
# shape tells them apart); none is near POSITIVE / NEGATIVE (relevant / not relevant elsewhere),
# NEUTRAL (the grey of "other groups") or white (tests/test_viz_style.py).
CATEGORY_BLOCKS = (
    ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"),
    ("#332288", "#999933", "#882255", "#225522", "#AA4499", "#44AA99", "#DDCC77", "#CC6677"),
    ("#663333", "#EE8866", "#225555", "#FFAABB"),
)
CATEGORIES = [c for block in CATEGORY_BLOCKS for c in block]
BLOCK_SYMBOLS = ("circle", "square", "diamond")
CATEGORY_MARKERS = [symbol for symbol, block in zip(BLOCK_SYMBOLS, CATEGORY_BLOCKS) for _ in block]
RELEVANCE = {0.0: NEGATIVE, 1 / 3: "#ff9896", 2 / 3: "#aec7e8", 1.0: POSITIVE}  # SupRank Fig. 3 colours
TEMPLATE = "plotly_white"


def floats(values: Iterable) -> list[float]:
    """A plain list of Python floats from a tensor, an array or any iterable of numbers."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().reshape(-1).tolist()
    elif hasattr(values, "tolist"):
        values = values.reshape(-1).tolist()
    return [float(v) for v in values]


def responsive(fig: go.Figure, static_width: int, **layout: Any) -> go.Figure:
    """``fig.update_layout(**layout)`` with no fixed width: the figure fills its notebook cell or
    dashboard column (a fixed 900-1,000 px was cut off in a 1,400-px JupyterLab window with the
    file browser open). ``static_width``, the width it was designed at, goes to
    ``layout.meta["static_width"]`` for PNGs drawn without a browser (:mod:`lab.viz.render`)."""
    fig.update_layout(**layout)
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    fig.update_layout(width=None, autosize=True, meta={**meta, "static_width": int(static_width)})
    return fig


def base_figure(title: str, height: int = 420, width: int = 760) -> go.Figure:
    """An empty figure with the lab's template, height and title (``width``: its static width)."""
    return responsive(go.Figure(), width, template=TEMPLATE, title=title, height=height,
                      margin=dict(l=60, r=20, t=70, b=50))


class ShownFigure(Figure):
    """A matplotlib Figure (no pyplot state) that Jupyter shows as a PNG wherever it is a cell's
    value. A bare ``Figure`` is shown so only once pyplot's inline backend is loaded; otherwise
    JupyterLab and nbclient print "<Figure size 850x760 with 42 Axes>" (notebook 04's retrievals)."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", bbox_inches="tight")  # as the inline backend: no clipped title
        return buffer.getvalue()
