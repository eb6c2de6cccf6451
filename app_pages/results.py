"""Reproduction: what ``python -m lab study`` measured of the papers' claims, as docs/results.md says
it — the same verdicts, tables and figures, computed by :mod:`lab.studies.verdicts` from
``results/`` (protocol v2 for a study it has completed, v1 until then; the text says which)."""
from __future__ import annotations

import streamlit as st

from lab.studies.results_page import PAGE, TITLES
from lab.studies.verdicts import study_details, study_verdict


@st.fragment
def results_view() -> None:
    name = st.selectbox("Study", PAGE, key="study", format_func=TITLES.get)
    st.markdown(study_verdict(name))
    body, figures = study_details(name)
    for fig in figures:
        st.pyplot(fig)
    if body:
        with st.expander("Tables"):
            st.markdown(body)
    st.caption("Every number is read from `results/` (`python -m lab study --render` writes the same into "
               "docs/results.md); the dashboard trains nothing for this view.")
