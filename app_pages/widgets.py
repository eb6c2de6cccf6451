"""Streamlit widgets for :class:`lab.viz.controls.Slider` specs (the notebooks' knobs).

Streamlit has no log slider: a log spec becomes a select slider over the geometric grid of
:func:`lab.dashboard.slider_options`. The value lives in ``st.session_state[key]``, seeded with
the spec's default, so a value from a shared link or a previous run is kept. Every widget is
also given that value as ``value=``: should the browser ever rebuild a widget, it falls back to
the current setting instead of Streamlit's implicit default, the minimum (seen once in CI: every
number of the sidebar at its minimum after a rerun on a loaded 2-core machine).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, TypeVar, Union

import streamlit as st

from lab.dashboard import slider_options
from lab.viz.controls import Slider

Number = Union[int, float]
T = TypeVar("T")
CHART_SECONDS = 2.0  # while training, a figure is rebuilt at most this often; a paused page shows the latest


def spec_value(spec: Slider, key: str) -> Number:
    """The setting of ``key``: seeded with the spec's default, a log spec's value snapped to its grid (e.g.
    0.0100000001 from a link). What the widget shows, drawn or not (``kept``)."""
    if key not in st.session_state:
        st.session_state[key] = int(spec.value) if spec.integer else float(spec.value)
    if spec.log:
        current = st.session_state[key]
        options = _log_options(spec, current)
        if current not in options:
            st.session_state[key] = min(options, key=lambda v: abs(v - current))
    value = st.session_state[key]
    return int(value) if spec.integer else float(value)


def _log_options(spec: Slider, current: Number) -> list:
    options = slider_options(spec, extra=current)
    return sorted({int(v) for v in options}) if spec.integer else options


def spec_slider(label: str, spec: Slider, key: str, help: Optional[str] = None, disabled: bool = False) -> Number:
    """The widget of one spec; returns its value (an int for integer specs)."""
    current = spec_value(spec, key)
    if spec.log:
        return st.select_slider(label, options=_log_options(spec, current), value=current, key=key, help=help,
                                disabled=disabled, format_func=lambda v: f"{v:.3g}")
    if spec.integer:
        return st.slider(label, int(spec.min), int(spec.max), value=current, step=max(1, int(spec.step)),
                         key=key, help=help, disabled=disabled)
    return st.slider(label, float(spec.min), float(spec.max), value=current, step=float(spec.step), key=key,
                     help=help, disabled=disabled)


def kept(key: str, value: Any) -> Any:
    """A setting whose widget this run does not draw (a closed ``lazy_expander``): ``value``, kept in session
    state. Streamlit drops the state of a widget that a run does not draw; a value the script sets is kept."""
    st.session_state[key] = value
    return value


def lazy_expander(label: str, key: str) -> tuple[Any, bool]:
    """An expander and whether it is open; its widgets are drawn only while it is (``on_change="rerun"``).

    Collapsed, Streamlit still sends and the browser still builds every widget of an expander: the sidebar's
    hyper-parameter sliders and schedule fields were 9 of its 20 widgets, each with a label and most with a
    help icon. A first screen costs the browser less without them (``bench/first_screen.py``: issue 46)."""
    box = st.expander(label, key=key, on_change="rerun")
    return box, bool(box.open)


def seed_state(key: str, value) -> None:
    """Give a widget its first value (from the URL or the defaults) without passing ``value=``,
    which Streamlit refuses next to a session-state value."""
    if key not in st.session_state:
        st.session_state[key] = value


def paced_figure(name: str, version: Any, running: bool, build: Callable[[], T]) -> T:
    """The figure ``name`` for data ``version``: built again only when the version changed, and
    while training at most every ``CHART_SECONDS`` (kept in ``st.session_state``, per page). A
    tick that draws the same data again costs nothing but sending it: the live panel's fragment
    reruns every second, on a machine that trains meanwhile."""
    figures = st.session_state.setdefault("live_figures", {})
    cached = figures.get(name)
    now = time.monotonic()
    if cached is None or (cached[0] != version and (not running or now - cached[1] >= CHART_SECONDS)):
        cached = figures[name] = (version, now, build())
    return cached[2]
