"""The server's training sessions by page id (``sid`` in the URL), so a browser reload finds its run.

Streamlit starts a new session, with an empty ``st.session_state``, on every browser reload.
The page's URL keeps a short random ``sid``; this process-wide registry maps it to the page's
:class:`~lab.dashboard.session.TrainingSession` and to the Streamlit session that shows it
(its ``owner``). A page opening with a ``sid``:

* finds it, and its owner page is gone (a reload, or the tab was closed and reopened): the page
  takes the run over, at the step it has reached, still training if it was;
* finds it, and its owner page is still connected (a second tab with the same link, or a link
  copied from a page that is open): a new ``sid`` and a new run, with a note. A link shares
  settings, never a run;
* does not find it (the server restarted, or the run was dropped, below): a new ``sid`` and a
  new run, with a note saying so.

Memory: sessions of connected pages live anyway (their ``st.session_state`` holds them); of the
others, the registry keeps the ``max_closed`` most recently seen, none idle for longer than
``idle_seconds``; a dropped session is closed (paused, its thread joined), outside the registry's
lock so that no page load waits for it. When the server's memory cannot hold a connected page's session,
the sessions of the pages that are not connected are dropped first (:meth:`Registry.drop_closed`).
"""
from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from .session import TrainingSession

MAX_CLOSED = 4  # sessions kept for pages that are not connected (a small CNN ~ MBs, a timm model ~ 150 MB)
IDLE_SECONDS = 3600.0


@dataclass
class Entry:
    session: TrainingSession
    owner: str
    seen: float = field(default_factory=time.monotonic)


def new_sid() -> str:
    return secrets.token_urlsafe(6)


class Registry:
    """sid -> (session, owner). ``page_open(owner)`` says whether a Streamlit session is still
    connected (the app passes Streamlit's runtime; tests a set)."""

    def __init__(self, page_open: Callable[[str], bool] = lambda owner: False, max_closed: int = MAX_CLOSED,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        self.page_open, self.max_closed, self.idle_seconds = page_open, max_closed, idle_seconds
        self.entries: dict[str, Entry] = {}
        self.lock = threading.Lock()

    def claim(self, sid: Optional[str], owner: str) -> tuple[str, Optional[TrainingSession], Optional[str]]:
        """(sid, session, note) for page ``owner`` opening with ``sid`` from its URL: the session to
        reattach (None: start one and ``put`` it under the returned sid) and a sentence for the page."""
        with self.lock:
            dropped = self._prune()
            entry = self.entries.get(sid) if sid else None
            found = entry is not None and (entry.owner == owner or not self._open(entry))
            if found:
                entry.owner, entry.seen = owner, time.monotonic()
        _close(dropped)
        if found:
            entry.session.touch()
            return sid, entry.session, None  # type: ignore[return-value]
        if entry is not None:
            note = ("the run of this link is open in another tab or browser: this page trains its own run "
                    "(a link shares settings, not a run)")
        elif sid:
            note = ("the run of this link is not on this server any more (the server restarted, or the run "
                    "was idle for long): this page starts fresh from step 0")
        else:
            note = None
        return new_sid(), None, note

    def put(self, sid: str, session: TrainingSession, owner: str) -> None:
        """Keep ``session`` as the run of page ``owner`` under ``sid``."""
        with self.lock:
            old = self.entries.get(sid)
            dropped = [old.session] if old is not None and old.session is not session else []
            self.entries[sid] = Entry(session, owner)
            if session.worker is not None:
                session.worker.page_open = lambda: self.owner_open(sid)
            dropped += self._prune()
        _close(dropped)

    def seen(self, sid: str) -> None:
        entry = self.entries.get(sid)
        if entry is not None:
            entry.seen = time.monotonic()

    def owner_open(self, sid: str) -> bool:
        entry = self.entries.get(sid)
        return entry is not None and self._open(entry)

    def drop_closed(self) -> int:
        """Close and drop the sessions of every page that is not connected (kept for a reload): what a page
        that the server's memory cannot hold now does before it gives up. How many were dropped."""
        with self.lock:
            dropped = [self.entries.pop(sid).session for sid, e in list(self.entries.items()) if not self._open(e)]
        _close(dropped)
        return len(dropped)

    def clear(self) -> None:
        """Close and drop every session (tests; a server shutting down)."""
        with self.lock:
            dropped = [entry.session for entry in self.entries.values()]
            self.entries.clear()
        _close(dropped)

    def _open(self, entry: Entry) -> bool:
        try:
            return bool(self.page_open(entry.owner))
        except Exception:  # noqa: BLE001 - no runtime (scripts, tests): nobody is connected
            return False

    def _prune(self) -> list[TrainingSession]:
        """Drop the entries beyond the limits (call holding the lock); their sessions, to close."""
        now = time.monotonic()
        closed = sorted((e.seen, sid) for sid, e in self.entries.items() if not self._open(e))
        dropped = []
        for rank, (seen, sid) in enumerate(reversed(closed)):  # most recently seen first
            if rank >= self.max_closed or now - seen > self.idle_seconds:
                dropped.append(self.entries.pop(sid).session)
        return dropped


def _close(sessions: list[TrainingSession]) -> None:
    for session in sessions:
        session.close()
