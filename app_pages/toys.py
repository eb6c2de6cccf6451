"""Toy explorer: the notebooks' interactive figures (rank surrogates, gradient flow of notebook 01,
...), drawn by the same :mod:`lab.viz` builders with the same slider specs (``INTERACTIVE``).
A fragment: moving a slider redraws this figure only."""
from __future__ import annotations

import streamlit as st

from lab.viz.registry import INTERACTIVE, caption

from .widgets import spec_slider

FEATURED = ("surrogates", "gradient_flow")  # notebook 01: where a lecture starts
NAMES = list(FEATURED) + [n for n in INTERACTIVE if n not in FEATURED]


@st.fragment
def toy_explorer() -> None:
    name = st.selectbox("Figure", NAMES, key="toy", format_func=lambda n: n.replace("_", " "))
    builder, spec = INTERACTIVE[name]
    st.caption(caption(name))
    left, right = st.columns([1, 3])
    with left:
        values = {param: spec_slider(s.description or param, s, f"toy_{name}_{param}") for param, s in spec.items()}
    with right:
        st.plotly_chart(builder(**values), key=f"toy_fig_{name}")
