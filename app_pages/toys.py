"""Toy explorer: the notebooks' interactive figures (rank surrogates, gradient flow of notebook 01,
...), drawn by the same :mod:`lab.viz` builders with the same slider specs (``INTERACTIVE``).
A fragment: moving a slider redraws this figure only."""
from __future__ import annotations

import streamlit as st

from lab.viz.registry import INTERACTIVE, caption

from .widgets import spec_slider

FEATURED = ("surrogates", "gradient_flow")  # notebook 01: where a lecture starts
NAMES = list(FEATURED) + [n for n in INTERACTIVE if n not in FEATURED]
# A projector's 1280 x 720 shows the figure from ~370 px down: at most this tall, its legend at its top
# (the notebooks' legend under the axes was below the fold, issue 46). Taller figures (two rows) keep theirs.
SCREEN_HEIGHT, ONE_ROW = 340, 480
LEGEND_ON_TOP = dict(orientation="h", yref="container", y=0.88, yanchor="top", x=0.0, xanchor="left")  # under the title


def on_screen(fig):
    """The notebook figure ``fig`` fitted to the screen: the legend above the axes, the height within the fold."""
    height = fig.layout.height or 450
    if height <= ONE_ROW:
        fig.update_layout(height=SCREEN_HEIGHT)
        if fig.layout.legend.y is not None and fig.layout.legend.y < 0:
            # The title at the very top, so that the legend under it never overlaps it (it did: Plotly centres
            # a title in the top margin, where the legend now is).
            fig.update_layout(legend=LEGEND_ON_TOP, margin=dict(t=105, b=45),
                              title=dict(yref="container", y=0.98, yanchor="top"))
    return fig


def toy_explorer() -> None:
    """A fragment: app.py runs it in a container of its own (app_pages/fragments.py)."""
    name = st.selectbox("Figure", NAMES, key="toy", format_func=lambda n: n.replace("_", " "))
    builder, spec = INTERACTIVE[name]
    st.caption(caption(name))
    left, right = st.columns([1, 3])
    with left:
        values = {param: spec_slider(s.description or param, s, f"toy_{name}_{param}") for param, s in spec.items()}
    with right:
        st.plotly_chart(on_screen(builder(**values)), key=f"toy_fig_{name}")
