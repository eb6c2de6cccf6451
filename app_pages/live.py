"""The live panel: a fragment that trains a few steps per tick while running and redraws the
progress, the latest numbers and the open view. Only this fragment reruns on a tick; the
sidebar stays put. ``run_every`` is set only while training, so a paused page costs nothing."""
from __future__ import annotations

from typing import Optional

import streamlit as st

from lab.dashboard import TrainingSession
from lab.viz.dashboard import plot_run_comparison, plot_training_curves

from . import analysis

TICK_SECONDS = 0.5  # ticks never overlap: Streamlit coalesces timer reruns while one is running
STATUS = {"new": "press Start or Step to build the model and train", "running": "training",
          "paused": "paused", "done": "finished", "error": "stopped by an error"}
METRICS = (("loss", "loss", "train"), ("batch_ap", "batch AP", "train"), ("R@1", "R@1", "eval"),
           ("mAP@R", "mAP@R", "eval"), ("decomposability_gap", "decomp. gap", "eval"))


def live_panel(view: str) -> None:
    session: Optional[TrainingSession] = st.session_state.get("session")
    running = session is not None and session.running
    st.fragment(run_every=TICK_SECONDS if running else None)(_panel)(view)


def _panel(view: str) -> None:
    session: Optional[TrainingSession] = st.session_state.get("session")
    if session is None:
        return
    was_running = session.running
    session.tick()
    if was_running and not session.running:
        st.rerun()  # finished or failed: redraw the whole page (buttons, timer off)
    _status(session)
    if view == "Training":
        _training(session)
    elif view in analysis.VIEWS:
        if session.build():
            analysis.VIEWS[view](session)
        else:
            _status(session, only_error=True)


def _status(session: TrainingSession, only_error: bool = False) -> None:
    if session.error:
        st.error(f"{session.error}\n\nChange the settings (e.g. a lower learning rate) or press Reset.", icon="⚠️")
    if only_error:
        return
    status = session.status
    st.progress(session.progress, text=f"Step {session.step_count} / {session.target_steps} · {STATUS[status]}")
    if session.notice:
        st.info(session.notice)


def _latest(run, key: str, kind: str) -> Optional[float]:
    record = next((r for r in reversed(run.history) if r.get("kind") == kind and key in r), None)
    return None if record is None else float(record[key])


def _training(session: TrainingSession) -> None:
    cols = st.columns(len(METRICS) + 1)
    cols[0].metric("Step", session.step_count)
    for run in session.runs:
        for col, (key, label, kind) in zip(cols[1:], METRICS):
            value = _latest(run, key, kind)
            prefix = f"{run.label[0]} · " if len(session.runs) > 1 else ""
            col.metric(prefix + label, "–" if value is None else f"{value:.3f}")
    if not session.built:
        st.info("Nothing trained yet: press **Start** (continuous) or **Step** (one tick) in the sidebar.")
        return
    histories = {run.label: run.history for run in session.runs}
    st.plotly_chart(plot_training_curves(histories, title="Training curves (held-out: a fixed subset of test "
                                                           "classes)"), key="curves")
    if len(session.runs) > 1:
        st.plotly_chart(plot_run_comparison({run.label: run.last_eval() for run in session.runs}), key="compare")
