"""The live panel: two fragments that redraw the progress with the latest numbers, and the open view.

Training runs in a training process (``lab.dashboard.pool``; or the session's background thread); a tick of
these fragments only reads the session's published view and draws it, so it lasts a fraction of a second
however busy the machine is. Only the fragments rerun on a tick; the sidebar stays put. The progress and the
latest numbers tick every second; the view's charts, in a fragment of their own, every ``CHART_SECONDS``
(a figure is rebuilt only when its data changed: ``widgets.paced_figure``). ``run_every`` is set only while
training, so a paused page costs nothing. Elements keep their keys: updated in place. Streamlit's fade of
stale elements is off inside the panel (``NO_FADE``).

The browser redraws a chart each time it is sent, and it shares the CPU with training on a laptop (and, in
``bench/class_load.py``, with the server and every other page). The training curves and the comparison are SVGs
that the server draws (:mod:`lab.viz.svg_curves`, :mod:`lab.viz.svg_comparison`): as plotly charts they cost each
page's browser about 3 CPU seconds at the first Start and 0.5 a redraw; in the 10 s after six pages' Starts on 2
cores (single runs), chromium took 15.7 CPU seconds and the trainings 4.4 (with the SVG curves: 9.2 and 13.1;
docs/benchmarks.md).
The Streamlit option ``runner.postScriptGC`` is off (``.streamlit/config.toml``): its full garbage collection
after every fragment run held the GIL while the training thread waited. Measured in chromium by
``bench/dashboard.py`` (compare mode, full mode, 4 busy loops beside it, load 6-11 on 2 cores):
no chart faded in 20 s of training in any view (before: 6-14 fades, up to 3 s each).
"""
from __future__ import annotations

import functools
from typing import Optional

import streamlit as st

from lab.dashboard import TrainingSession
from lab.dashboard.view import View, before_curves, status_text
from lab.experiments.cached import seed_spread
from lab.viz.dashboard_figures import comparison_note, spread_note
from lab.viz.svg_comparison import run_comparison_svg
from lab.viz.svg_curves import training_curves_svg
from lab.viz.training_curves import CURVES_TITLE, LATEST_STYLE, latest_numbers_html

from . import analysis, reattach
from .fragments import fragment_in_container
from .widgets import CHART_SECONDS, paced_figure

TICK_SECONDS = 1.0  # every fragment run costs Streamlit machinery too: numbers each second, charts less often
# Heights (px) that keep the curves, and in compare mode the comparison too, above the fold at 1280 x 720
# (tests/test_app_browser.py measures it): 2 x 2 panels for one run; for two, a row of 4 over the comparison.
CURVES = dict(rows=2, height=470)
COMPARE_CURVES = dict(rows=1, height=255)
COMPARE_HEIGHT = 215


# Streamlit fades an element to 33 % opacity once a rerun has not re-sent it for 0.5 s. The timed
# fragment reruns every second and re-sends the same charts: on a loaded machine its run outlasts
# 0.5 s now and then and the charts blinked grey (3-7 times per 20 s). Nothing in the panel is
# stale while it ticks, so its elements never fade; the status widget still shows a rerun.
NO_FADE = ('<style>.st-key-live [data-testid="stElementContainer"][data-stale="true"] '
           "{opacity: 1 !important; transition: none !important;}</style>")


def _ticking(v: View) -> bool:
    """The panel redraws on its own while the run trains or a worker process prepares what it shows."""
    return v.running or v.busy is not None


def live_panel(view: str) -> None:
    session: Optional[TrainingSession] = st.session_state.get("session")
    ticking = session is not None and _ticking(session.view)
    st.html(NO_FADE)  # only a style: Streamlit puts it where it takes no space
    with st.container(key="live"):
        # Two fragments: the progress and the latest numbers every TICK_SECONDS, the view's charts every
        # CHART_SECONDS. A chart re-sent is a chart the browser redraws, new data or not: with the curves in
        # the one-second fragment, a training page cost chromium 0.27-0.32 of a core against 0.07 without
        # them (bench/class_load.py's pages share the server's 2 cores: six pages took the machine).
        # Each in a container of its own: Streamlit can drop a fragment's elements of a full run, and two
        # fragments side by side then blank the page (app_pages/fragments.py).
        fragment_in_container("live_progress", _progress, ticking, run_every=TICK_SECONDS if ticking else None)
        fragment_in_container("live_view", _content, view, ticking, run_every=CHART_SECONDS if ticking else None)


def _progress(page_ticking: bool) -> None:
    session: Optional[TrainingSession] = st.session_state.get("session")
    if session is None:
        return
    session.touch()
    reattach.seen()
    v = session.view
    if page_ticking and not _ticking(v):
        st.rerun()  # finished, failed, paused or ready: redraw the whole page (buttons, timer off)
    _status(v)


def _content(view: str, page_ticking: bool) -> None:
    session: Optional[TrainingSession] = st.session_state.get("session")
    if session is None:
        return
    if view == "Training":
        _training(session.view)
    elif view in analysis.VIEWS:
        if session.built or session.build():
            analysis.VIEWS[view](session)
        elif not session.view.error:
            st.info("Building the model in a training process…")
        else:
            _status(session.view, only_error=True)
    if not page_ticking and _ticking(session.view):
        st.rerun()  # this run asked a training process for something (a model, embeddings): tick until it is here


def _status(v: View, only_error: bool = False) -> None:
    if v.error:
        st.error(f"{v.error}\n\nChange the settings (e.g. a lower learning rate) or press Reset.", icon="⚠️")
    if only_error:
        return
    text = status_text(v)
    # The latest held-out numbers, large, beside the progress: read from the back of a room (issue 46).
    progress, latest = st.columns([3, 2], vertical_alignment="center")
    progress.progress(v.progress, text=text)
    numbers = latest_numbers_html({r.label: r.last_eval for r in v.runs})
    if numbers:
        with latest.container(key="latest"):
            st.html(LATEST_STYLE + numbers)
    if v.notice:
        st.info(v.notice)


def _training(v: View) -> None:
    """The curves, and in compare mode the latest evaluation side by side: one screen at 1280 x 720
    (issue 36, D-8). The latest numbers are in the panel titles (the metrics row they replace took
    the height of the held-out panels); the step is in the progress text above."""
    # A worker builds the model before any Start; the untrained model's evaluation comes with the first step.
    message = before_curves(v, where=" in the sidebar")
    if message is not None:
        if message:
            st.info(message)
        return
    compare = len(v.runs) > 1
    version = tuple((r.label, len(r.history), r.step_count) for r in v.runs)
    curves = paced_figure("curves", version, v.running, lambda: training_curves_svg(
        {run.label: run.history for run in v.runs}, title=CURVES_TITLE, **(COMPARE_CURVES if compare else CURVES)))
    _svg("curves", curves)
    if compare and not all(run.last_eval for run in v.runs):  # e.g. step 1, its step-0 evaluations coming
        st.caption("The comparison of the latest evaluations appears once both runs have one.")
    elif compare:
        spread = _seed_spread()
        chart = paced_figure("compare", evaluated(v), v.running, lambda: run_comparison_svg(
            {run.label: run.last_eval for run in v.runs}, spread=spread, height=COMPARE_HEIGHT))
        _svg("compare", chart)
        st.caption(comparison_note(spread) + (" " + spread_note(spread) if spread else ""))


def _svg(key: str, svg: str) -> None:
    """A chart drawn by the server (lab.viz.svg_*) in a keyed container; st.html would drop its SVG (Streamlit's
    sanitiser), st.markdown keeps it (its only inputs are numbers and escaped run labels)."""
    with st.container(key=key):
        st.markdown(svg, unsafe_allow_html=True)


def evaluated(v: View) -> tuple:
    """What the comparison chart draws of ``v``: each run's latest evaluation. It changes every ``eval_every``
    steps, not at every step as the curves do: a chart rebuilt is a chart the browser redraws (as a plotly chart,
    about 0.5 CPU seconds), and until then the comparison was rebuilt every ``CHART_SECONDS`` with the same
    numbers."""
    return tuple((r.label, tuple(sorted(r.last_eval.items()))) for r in v.runs)


@functools.lru_cache(maxsize=1)
def _seed_spread() -> dict:
    return seed_spread("methods")  # read once per server: results/ does not change while it runs
