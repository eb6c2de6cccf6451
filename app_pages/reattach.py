"""A browser reload finds its training run again: the page's ``sid`` (in the URL) names its
session in the server's :class:`~lab.dashboard.session_registry.Registry` (see there for the rules:
a reload takes the run over, a second tab with the same link gets its own run)."""
from __future__ import annotations

from typing import Optional

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lab.dashboard import TrainingSession
from lab.dashboard.session_registry import Registry
from lab.dashboard.urlstate import SID


def page_open(owner: str) -> bool:
    """True while the Streamlit session ``owner`` is connected (a reloaded or closed tab is not)."""
    return runtime.exists() and runtime.get_instance().is_active_session(owner)


REGISTRY = Registry(page_open)  # one per server process: pages come and go, runs stay


def _owner() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-context"


def attach() -> Optional[str]:
    """On a page's first run: take over the run of the URL's ``sid`` if it may (into
    ``st.session_state["session"]``) and remember the page's sid. A note for the page, or None."""
    if "sid" in st.session_state:
        return None
    sid, session, note = REGISTRY.claim(st.query_params.get(SID), _owner())
    st.session_state["sid"] = sid
    if session is not None:
        st.session_state["session"] = session
        st.toast(f"Reattached to this page's run at step {session.step_count}"
                 + (": it kept training" if session.running else ""), icon=":material/sync:")
    return note


def keep(session: TrainingSession) -> None:
    """Register the page's (new) session under its sid."""
    REGISTRY.put(st.session_state["sid"], session, _owner())


def drop_closed() -> int:
    """Drop the runs kept for the reload of pages that are closed (the server's memory is wanted by an open page)."""
    return REGISTRY.drop_closed()


def seen() -> None:
    """The page shows its session now (idle sessions of closed pages are dropped first)."""
    REGISTRY.seen(st.session_state.get("sid", ""))
