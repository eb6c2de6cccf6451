"""Reproduction: what ``python -m lab study`` measured of the papers' claims, as docs/results.md says
it — the same verdicts, tables and figures, computed by :mod:`lab.studies.reporting.verdicts` from
``results/`` (protocol v2 for a study it has completed, v1 until then; the text says which).

A screen to present (issue 36, D-11): one table with a verdict badge per study, the chosen study's
figure under it, the paragraphs in expanders. A study that tests the papers' claims (study 1) shows
its claims table instead, one row and badge per claim (:func:`lab.studies.reporting.verdicts.claims_rows`, the
rows of docs/results.md's primary table), under a line with the study's own verdict. What the
verdicts derive from ``results/`` is computed once per state of its files
(:class:`lab.dashboard.reproduction.StudyCache`) by ``make app`` before the server starts
(:mod:`app_pages.studies_page`), else by a thread started with the server, so opening the view and
switching studies only draws kept text and PNGs.
"""
from __future__ import annotations

import streamlit as st

from lab.dashboard.reproduction import StudyCache, claims_table, study_heading, verdict_table
from lab.dashboard.settings import escape_markdown
from .studies_page import server_cache
from lab.experiments.plain_verdicts import extra_seeds_title, plain_verdict, seeds_in_progress
from lab.studies.reporting.study_sections import PAGE, TITLES

# While a rerun is under way Streamlit greys the elements it has not re-sent yet: the previous
# study's figure must never show under the new study's table, even greyed, so it is hidden instead.
# The table in a smaller font with tighter cells: six studies above the fold at 1280 x 720.
STYLE = ("<style>.st-key-repro_figure [data-stale='true'] {visibility: hidden !important;} "
         ".st-key-repro_table table {font-size: 0.74rem;} "
         ".st-key-repro_table th, .st-key-repro_table td {padding: 0.05rem 0.35rem; line-height: 1.15;} "
         # The claims' table (8 columns, a row per test: 16 since issue 43) on one screen at 1280x720: its short
         # cells on one line, the claim's wrapping.
         ".st-key-repro_table table:has(th:nth-child(8)) td:not(:nth-child(3)) {white-space: nowrap;} "
         ".st-key-repro_table p {margin-bottom: 0.3rem;}</style>")


def cache() -> StudyCache:
    """The server's one cache of the studies, read from what ``make app`` stored (app_pages.studies_page)."""
    return server_cache()


def warm() -> None:
    """Start computing every study in the background (a no-op once they are kept)."""
    if not cache().ready(PAGE):
        cache().warm(PAGE)


def results_view() -> None:
    """A fragment: app.py runs it in a container of its own (app_pages/fragments.py)."""
    st.html(STYLE)
    name = st.selectbox("Study", PAGE, key="study", format_func=TITLES.get, label_visibility="collapsed")
    if not cache().ready(PAGE):
        with st.spinner("Reading the studies' results (once per server)…"):
            studies = cache().all(PAGE)
    else:
        studies = cache().all(PAGE)  # everything is ready before anything is drawn: no stale pairing
    shown = next(s for s in studies if s.name == name)
    with st.container(key="repro_table"):
        if shown.claims:  # the papers' claims, one row each; the other studies are one pick away
            # One element, like the studies' table: a switch replaces it, no stale element left below it.
            st.markdown(study_heading(shown) + "\n\n" + claims_table(shown.claims))
        else:
            st.markdown(verdict_table(studies, selected=name))
    with st.container(key="repro_figure"):
        for i, png in enumerate(shown.figures):
            st.image(png, caption=f"{shown.title}: figure {i + 1} of {len(shown.figures)}")
    progress = seeds_in_progress(shown.verdict)
    if progress:  # a study adding seeds, or done adding them: said in the details, in words a class reads
        with st.expander(f"{shown.title}: {extra_seeds_title(shown.verdict)}"):
            st.markdown(escape_markdown(progress))
    with st.expander(f"{shown.title}: the paper's claim, the measurement and the reasons"):
        st.markdown(plain_verdict(shown.verdict))
    if shown.body:
        with st.expander(f"{shown.title}: tables"):
            st.markdown(shown.body)
    st.caption("Every number is read from `results/` (`python -m lab study --render` writes the same into "
               "docs/results.md); the dashboard trains nothing for this view.")
