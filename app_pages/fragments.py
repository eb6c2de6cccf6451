"""A fragment in a container of its own, whose timer a lost message cannot stop: the dashboard's fragments
against two ways Streamlit 1.67 drops a run's messages.

**Blank pages.** Streamlit loses a fragment's elements when a queued run of that fragment starts right after a
full run, before the server has sent the full run's messages: the start of the fragment run clears the send
queue of that fragment's deltas (``ForwardMsgQueue.clear``), the full run's own among them, while the full
run's end (``script_finished``) still reaches the browser, which then removes every element the full run did
not send. A container that holds the fragments side by side is left with no child, and the fragment's next
delta addresses its old place in it: the front end throws ``Bad delta path index 1 (should be between [0,
0])`` and the page goes blank. A timed fragment makes this common (its timer queues runs while a full run
works): ``python -m bench.fragment_crash --layout shared`` blanks about one page in six within 40 s on an idle
machine. In a container of its own, written by the full run, the fragment's first element is always child
0: after a drop the fragment's elements are missing until its next run, and the page goes on (``--layout
own``: no page blank; tests/test_fragment_layout.py). A fragment that reruns on a widget (the Toy explorer,
the Reproduction view) gets the same container: beside other elements, its old place would be taken by the
next one's.

**Pages that stop ticking.** The browser keeps one timer per timed fragment, clears them all when a full run
starts (its ``new_session``) and sets them again from the ``auto_rerun`` messages that the full run sends as it
reaches each fragment. When a rerun request finds the full run's script runner stopped but its messages not yet
handed to the event loop, Streamlit starts a new runner and ignores the old one's remaining events
(``AppSession._handle_scriptrunner_event_on_event_loop``): the full run's ``auto_rerun`` messages never
leave, and the page stops ticking, without an error, until its next click (``bench.fragment_crash --load
4``: 1 page of 6 in about 1 run of 5, its last messages a full run's ``new_session`` and first elements,
then the fragment runs already asked for, then nothing). So every run of a timed fragment announces again
the timers of the page's timed fragments (``_announce_timers``): the browser ignores a timer it already has
(same fragment, same period), and the first fragment run after such a loss sets the lost ones again.

This module imports only Streamlit, so that the bench's minimal page can use the dashboard's own layout. The
timers' announcement uses Streamlit's run context (not public API); where a Streamlit version lacks it, it is
skipped and the pages behave as Streamlit's own.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import streamlit as st

TIMERS = "_fragment_timers"  # session state: {container key: (fragment id, period in s)} of the timed fragments


def fragment_in_container(key: str, body: Callable[..., Any], *args: Any, run_every: Optional[float] = None) -> None:
    """Run ``body(*args)`` as a fragment (rerun every ``run_every`` seconds; on its widgets only when None),
    inside a keyed container of its own (``st-key-KEY`` in the page) that the calling run writes."""
    with st.container(key=key):
        if run_every is None:
            st.session_state.get(TIMERS, {}).pop(key, None)
            st.fragment(body)(*args)
        else:
            st.fragment(run_every=run_every)(_timed(key, body, run_every))(*args)


def _timed(key: str, body: Callable[..., Any], period: float) -> Callable[..., Any]:
    @functools.wraps(body)
    def run(*args: Any) -> Any:
        _announce_timers(key, period)
        return body(*args)
    return run


def _announce_timers(key: str, period: float) -> list[str]:
    """Remember this fragment's id and period; in a fragment run, send the browser an ``auto_rerun`` message for
    every timed fragment of the page that still exists. Returns the ids announced (none in a full run, which
    sends its own)."""
    ctx, fragment_id = _run_context()
    if ctx is None or fragment_id is None:
        return []
    timers = st.session_state.setdefault(TIMERS, {})
    timers[key] = (fragment_id, float(period))
    if not ctx.fragment_ids_this_run:
        return []
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    announced = []
    for known_id, known_period in list(timers.values()):
        if not ctx.fragment_storage.contains(known_id):
            continue  # a full run since removed it: a timer for it would ask for runs that never come
        msg = ForwardMsg()
        msg.auto_rerun.interval = known_period
        msg.auto_rerun.fragment_id = known_id
        ctx.enqueue(msg)
        announced.append(known_id)
    return announced


def _run_context() -> tuple[Any, Optional[str]]:
    """(Streamlit's script run context, the id of the fragment running now), or (None, None) where this
    Streamlit version does not say."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx
    except ImportError:
        return None, None
    ctx = get_script_run_ctx(suppress_warning=True)
    needed = ("fragment_ids_this_run", "fragment_storage", "enqueue")
    if ctx is None or not all(hasattr(ctx, name) for name in needed):
        return None, None
    return ctx, getattr(ThreadState.get(), "fragment_id", None)
