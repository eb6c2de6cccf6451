"""A fragment in a container of its own: a page that survives Streamlit's dropped fragment deltas.

Streamlit 1.67 loses a fragment's elements when a queued run of that fragment starts right after a full run,
before the server has sent the full run's messages: the start of the fragment run clears the send queue of
that fragment's deltas (``ForwardMsgQueue.clear``), the full run's own among them, while the full run's end
(``script_finished``) still reaches the browser, which then removes every element the full run did not send.
A container that holds the fragments side by side is left with no child, and the fragment's next delta
addresses its old place in it: the front end throws ``Bad delta path index 1 (should be between [0, 0])``
and the page goes blank. A timed fragment makes this common (its timer queues runs while a full run works):
``python -m bench.fragment_crash --layout shared`` blanks about one page in six within 40 s on an idle
machine. In a container of its own, written by the full run, the fragment's first element is always child
0: after a drop the fragment's elements are missing until its next run, and the page goes on
(``--layout own``: no page blank; tests/test_fragment_layout.py). A fragment that reruns on a widget (the Toy
explorer, the Reproduction view) gets the same container: beside other elements, its old place would be
taken by the next one's.

This module imports only Streamlit, so that the bench's minimal page can use the dashboard's own layout.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import streamlit as st


def fragment_in_container(key: str, body: Callable[..., Any], *args: Any, run_every: Optional[float] = None) -> None:
    """Run ``body(*args)`` as a fragment (rerun every ``run_every`` seconds; on its widgets only when None),
    inside a keyed container of its own (``st-key-KEY`` in the page) that the calling run writes."""
    with st.container(key=key):
        st.fragment(run_every=run_every)(body)(*args)
