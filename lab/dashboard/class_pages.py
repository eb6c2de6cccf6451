"""The class page's sessions: one per open page, found by a random token that only its page holds.

A page opens its session from its link's settings (the dashboard's converter,
:func:`lab.dashboard.urlstate.from_query`, and checks, :func:`lab.dashboard.settings.validate`), drives it with
Start / Pause / Step / Reset, and polls its view: the progress text (:func:`lab.dashboard.view.status_text`),
the latest held-out numbers and the training curves, all drawn here, by the server, with the dashboard's own
functions. The sessions are the dashboard's (:func:`lab.dashboard.new_session`): trained by the worker pool,
with its memory, its queue and its generators.

A page that is not heard from for ``IDLE_SECONDS`` is closed (hidden tabs poll about once a minute); one that
said it left (closed, reloaded) waits ``LEAVE_SECONDS`` for its reload, which takes the same run back.
"""
from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ..viz.svg_curves import training_curves_svg
from ..viz.training_curves import CURVES_TITLE, latest_numbers_html
from . import new_session
from .pool import Refused
from .settings import run_labels, session_ask, to_configs, validate
from .urlstate import from_query, to_query
from .view import View, before_curves, status_text

IDLE_SECONDS = 150.0  # > the worker's watch (120 s): a page polling at all keeps its run
LEAVE_SECONDS = 10.0  # a page that left: time for its reload to take the run back
MAX_PAGES = 64  # open pages at most, whatever the pool admits (pages in threads have no other bound)
ACTIONS = ("start", "pause", "step", "reset")
CURVES_HEIGHT = 470  # px: 2 x 2 panels, as the dashboard's
# While a run trains, its curves are sent at most this often (the dashboard's pace, app_pages/widgets.py): an SVG
# of two 1000-step runs is about 120 kB, 10 ms to draw here and more to lay out in the browser.
CURVES_SECONDS = 2.0


class Gone(KeyError):
    """A token that names no open page (never opened, or closed)."""


@dataclass
class Page:
    session: Any
    seen: float
    left: Optional[float] = None
    curves_at: float = -float("inf")  # when its page was last sent curves
    lock: threading.Lock = field(default_factory=threading.Lock)


class Pages:
    """The open pages of one class server. Thread-safe: the HTTP server answers each request in a thread."""

    def __init__(self, make: Callable[..., Any] = new_session, clock: Callable[[], float] = time.monotonic) -> None:
        self.make, self.clock = make, clock
        self.pages: dict[str, Page] = {}
        self.lock = threading.Lock()

    def open(self, query: Mapping[str, Any], token: Optional[str] = None) -> dict[str, Any]:
        """A page's session for the settings of ``query`` (its link): the run of ``token`` when its page reloads
        with the same settings, else a new one (``token``'s run is closed). {"token", "query", "notes", "errors"}:
        with errors (settings that cannot train, a server without room), no token and nothing open."""
        settings, notes = from_query(query)
        out: dict[str, Any] = {"query": to_query(settings), "notes": notes, "errors": validate(settings)}
        if out["errors"]:
            return out
        configs, labels = to_configs(settings), run_labels(settings)
        with self.lock:
            page = self.pages.get(token) if token else None
            if page is not None and page.session.matches(configs, labels):
                page.seen, page.left = self.clock(), None
                page.session.set_schedule(settings.steps, settings.steps_per_tick, settings.eval_every)
                return {**out, "token": token}
            if page is not None:
                self._close(token)
            if len(self.pages) >= MAX_PAGES:
                return {**out, "errors": [f"this server has {MAX_PAGES} pages open, its most: try again later"]}
            try:
                session = self.make(configs, labels, settings.steps, settings.steps_per_tick, settings.eval_every,
                                    session_ask(configs))
            except Refused as e:  # its memory, or no worker with room for another page
                return {**out, "errors": [str(e)]}
            token = secrets.token_urlsafe(18)
            self.pages[token] = Page(session, self.clock())
        return {**out, "token": token}

    def _page(self, token: str) -> Page:
        with self.lock:
            page = self.pages.get(token)
        if page is None:
            raise Gone("this page's run was closed (the page was away too long, or the server restarted): "
                       "reload the page")
        page.seen, page.left = self.clock(), None
        return page

    def act(self, token: str, action: str) -> dict[str, Any]:
        """Press ``action`` (Start, Pause, Step or Reset) on ``token``'s session; its view."""
        if action not in ACTIONS:
            raise ValueError(f"action={action!r}: expected one of {', '.join(ACTIONS)}")
        page = self._page(token)
        with page.lock:
            getattr(page.session, action)()
        return self.view(token)

    def view(self, token: str, have: str = "") -> dict[str, Any]:
        """What ``token``'s page shows now; the curves only when they changed since version ``have``."""
        page = self._page(token)
        page.session.touch()  # a page shows it: its run goes on (the worker's watch)
        v, now = page.session.view, self.clock()
        out = view_json(v, have, curves=not v.running or now - page.curves_at >= CURVES_SECONDS)
        if out["curves"] is not None:
            page.curves_at = now
        return out

    def leave(self, token: str) -> None:
        """The page was closed or reloaded: its run waits ``LEAVE_SECONDS`` for a reload."""
        with self.lock:
            page = self.pages.get(token)
            if page is not None:
                page.left = self.clock()

    def sweep(self) -> list[str]:
        """Close the pages gone quiet or left; their tokens."""
        now = self.clock()
        with self.lock:
            gone = [t for t, p in self.pages.items()
                    if now - p.seen > IDLE_SECONDS or (p.left is not None and now - p.left > LEAVE_SECONDS)]
            for token in gone:
                self._close(token)
        return gone

    def close_all(self) -> None:
        with self.lock:
            for token in list(self.pages):
                self._close(token)

    def _close(self, token: str) -> None:
        self.pages.pop(token).session.close()


def view_json(v: View, have: str = "", curves: bool = True) -> dict[str, Any]:
    """A view as the class page draws it: texts (set as text, never as markup), the server's SVG curves and
    latest numbers (numbers and escaped labels), the buttons' states. Its ``curves`` are None when the page's
    version ``have`` is current (the page keeps what it drew) or not asked for (``curves``); its ``version``
    is then the page's own."""
    message = before_curves(v)
    version = "" if message is not None else ";".join(f"{r.label}:{len(r.history)}:{r.step_count}" for r in v.runs)
    if not curves and message is None:
        version = have
    drawn = None
    if message is None and version != have:
        drawn = training_curves_svg({r.label: r.history for r in v.runs}, title=CURVES_TITLE, rows=2,
                                    height=CURVES_HEIGHT)
    ok = v.status != "error"
    return {"text": status_text(v), "progress": v.progress, "status": v.status, "running": v.running,
            "waiting": bool(v.busy or v.queue), "error": v.error, "notice": v.notice,
            "message": None if message is None else message.replace("**", ""),
            "latest": latest_numbers_html({r.label: r.last_eval for r in v.runs}), "version": version,
            "curves": drawn, "enabled": {"start": ok and not v.running, "pause": v.running, "step": ok,
                                          "reset": True}}
