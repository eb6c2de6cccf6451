"""The background thread that trains a running :class:`~lab.dashboard.session.TrainingSession`.

Training used to run inside the page's timed fragment: a fragment rerun lasted a whole tick
(seconds on a loaded machine), and Streamlit dims a fragment's elements as stale while it
reruns, so the charts were grey most of the time. Now the worker calls ``session.tick()`` in a
loop and the fragment only draws the published view.

At exit (the end of a script, Ctrl-C, SIGTERM to the server: Streamlit stops its server, then
the interpreter exits) every worker is paused and joined (:func:`stop_all`, registered with
``atexit``): a daemon thread still inside torch when the interpreter finalises aborts the process
("terminate called without an active exception", exit status 134). The step in flight and an
evaluation in progress finish first, so nothing that had finished is lost.

A run trains only while someone watches it: a page showed it in the last ``WATCH_SECONDS``
(every fragment rerun calls ``session.touch()``) or the page that owns it is still connected
(``page_open``, set by the app from Streamlit's runtime). A closed tab therefore stops costing
CPU after a while; the run waits, says so, and goes on when a page shows it again (a reload).
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Callable, Protocol

from ..core.env import dashboard_threads


class TrainingSession(Protocol):
    """What the worker needs of :class:`lab.dashboard.session.TrainingSession` (a protocol, so
    that the worker does not import the session that imports it)."""

    lock: threading.RLock
    running: bool
    notice: str | None
    step_count: int

    def tick(self) -> None: ...
    def pause(self) -> None: ...
    def _publish(self) -> None: ...
    def _fail(self, what: str, error: BaseException) -> None: ...

WATCH_SECONDS = 120.0  # hidden browser tabs still tick about once a minute
YIELD_SECONDS = 0.005  # between ticks: a click waiting for the lock gets it
STOP_SECONDS = 120.0  # at most, for a step and an evaluation to finish on a loaded machine
_WORKERS: "weakref.WeakSet[Worker]" = weakref.WeakSet()  # every worker of the process, for stop_all


class Worker:
    """Starts, keeps and ends the training thread of one session. ``active`` is read and
    written under the session's lock only, so a thread that is deciding to end and a Start
    that wants one never miss each other."""

    def __init__(self, session: TrainingSession) -> None:
        self.session = session
        self.active = False
        self.thread: threading.Thread | None = None
        self.last_seen = time.monotonic()
        self.page_open: Callable[[], bool] = lambda: False
        self.waiting_at: int | None = None  # the step where training waited for a viewer
        _WORKERS.add(self)

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        """Pause the session and wait for its thread to end (the step in flight, then an evaluation
        in progress, finish first). True when no thread is left."""
        self.session.pause()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def watched(self) -> bool:
        return time.monotonic() - self.last_seen < WATCH_SECONDS or self.page_open()

    def seen(self) -> None:
        """A page shows the session now; restart the thread if training waited for one."""
        self.last_seen = time.monotonic()
        if self.session.running and not self.active:
            with self.session.lock:
                self.ensure()
                self.session._publish()

    def ensure(self) -> None:
        """A thread trains while the session runs (call holding the session's lock)."""
        if self.active or not self.session.running:
            return
        if self.waiting_at is not None:
            self.session.notice = (f"training waited at step {self.waiting_at} while no page showed this run, "
                                   "and went on when one did")
            self.waiting_at = None
        self.active = True
        self.thread = threading.Thread(target=self._loop, name="ranklab-training", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        import torch

        # This thread's torch thread count, set for its whole life, the same for every training thread of the
        # process (app.py and the worker processes set it too): a save-and-restore around a step or an evaluation
        # (lab.core.env.torch_threads) would reset the process-wide part of the count (MKL's) under another
        # page's step, which then summed in another order and lost its solo run's bits.
        threads = dashboard_threads()
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        s = self.session
        while True:
            with s.lock:
                if not s.running or not self.watched():
                    if s.running:
                        self.waiting_at = s.step_count
                        s.notice = (f"training waits at step {s.step_count}: no page has shown this run for "
                                    f"{WATCH_SECONDS:.0f} s; it goes on when one does")
                        s._publish()
                    self.active = False
                    return
                try:
                    s.tick()
                except Exception as e:  # noqa: BLE001 - tick reports training errors itself; anything else too
                    s.running = False
                    s._fail("training stopped", e)
                    s._publish()
                    self.active = False
                    return
            time.sleep(YIELD_SECONDS)


def stop_all(timeout: float = STOP_SECONDS) -> None:
    """Pause every session of the process and join its training thread (at exit: see above)."""
    for worker in list(_WORKERS):
        worker.stop(timeout)


atexit.register(stop_all)
