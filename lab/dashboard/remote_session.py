"""A page's training session whose runs live and train in a worker process (:mod:`lab.dashboard.pool`).

:class:`RemoteSession` has the page-facing surface of :class:`~lab.dashboard.session.TrainingSession`
(Start / Pause / Step / Reset, ``view``, ``snapshots``, ``reconfigure``, ...), and no model: every
button sends a command to the session's worker and returns at once; what the worker publishes comes
back on the pool's listener thread (:meth:`RemoteSession.receive`) and becomes the page's
:attr:`view`. Pause closes the session's gate (:mod:`lab.dashboard.gate`) and reads there the
step the run keeps: the page shows it at once, whatever the worker is computing.

Commands are numbered; the worker tags what it publishes with the number of the last command it
has carried out, so that a view published before a Reset or a new setting reached the worker is
never taken for the new runs'.
"""
from __future__ import annotations

import collections
import dataclasses
import secrets
import threading
import time
from typing import Any, Callable, Optional, Sequence

from ..train import TrainConfig, config_diff
from .datasets import shared_datasets
from .heldout import HeldOut
from .view import RunView, View
from .worker import WATCH_SECONDS

ASK_SNAPSHOTS_SECONDS = 10.0  # while training, a view open asks the worker this often (it refreshes them)
RATE_SECONDS = 20.0  # the training rate a queue's estimate uses: steps over the last this many seconds


class RemoteRun:
    """What the page knows of one run: its configuration, history, step count and latest snapshot."""

    def __init__(self, label: str, config: TrainConfig) -> None:
        self.label, self.config = label, config
        self.history: list[dict[str, Any]] = []
        self.step_count, self.built = 0, False
        self.trained = 0  # the last step whose record the page has (the worker publishes it after the step)
        self.snapshot: Optional[HeldOut] = None
        self.projections: dict[tuple[str, int], list[list[float]]] = {}  # (method, step) -> points

    def same(self, label: str, config: TrainConfig) -> bool:
        return label == self.label and not config_diff(self.config.to_dict(), config.to_dict())

    def last_eval(self) -> dict[str, Any]:
        return next((r for r in reversed(self.history) if r.get("kind") == "eval"), {})

    def fresh_snapshot(self, max_lag: int) -> Optional[HeldOut]:
        h = self.snapshot
        return h if h is not None and 0 <= self.step_count - h.step <= max_lag else None


class Watch:
    """Whether a page shows the session: one did recently (``touch``) or its owner page is connected."""

    def __init__(self) -> None:
        self.last_seen = time.monotonic()
        self.page_open: Callable[[], bool] = lambda: False

    def watched(self) -> bool:
        return time.monotonic() - self.last_seen < WATCH_SECONDS or self.page_open()


class RemoteSession:
    """Start / Pause / Step / Reset over one or two runs trained by a worker process of ``pool``."""

    def __init__(self, pool: Any, configs: Sequence[TrainConfig], labels: Sequence[str], target_steps: int,
                 steps_per_tick: int, eval_every: int, ask: int = 0) -> None:
        """``ask``: the bytes its runs will hold, reserved in the pool before anything else (``pool.NoMemory``
        when the pool cannot hold them now: no worker then hears of it; ``pool.Refused`` when no worker has
        room for another page)."""
        self.sid = secrets.token_hex(8)
        self.pool = pool
        pool.reserve(self.sid, ask)
        self.runs = [RemoteRun(label, c) for label, c in zip(labels, configs)]
        self.target_steps, self.steps_per_tick, self.eval_every = target_steps, steps_per_tick, eval_every
        self.running = False
        # Start or Step was pressed since the runs were new: a Pause before the worker has built the model
        # is "paused" on the page, not "new" (which asks the student to press Start again), and a model the
        # worker built before any Start (host.PREPARE) is still "new".
        self.started = False
        self.error: Optional[str] = None
        self.busy: Optional[str] = None
        self._notice: Optional[str] = None  # the page's own (the worker's comes with its views)
        self._remote_notice: Optional[str] = None
        self._final: Optional[int] = None  # the step a Pause kept (the worker's view may not show it yet)
        self._asked = self._restarted_at = self._busy_until = 0
        self._snapshots_asked: tuple[float, int] = (-float("inf"), 0)
        self._rate: collections.deque = collections.deque()
        self.waiting_at: Optional[int] = None
        self.watch = self.worker = Watch()  # the registry sets worker.page_open, as for a local session
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        try:
            self.host, self.gate = pool.attach(self)
        except BaseException:
            pool.unreserve(self.sid)  # never hosted: it holds nothing
            raise
        self._send("create", list(configs), list(labels), target_steps, steps_per_tick, eval_every, self.slot,
                   self.eager)
        self._publish()

    # ------------------------------------------------------------------ state
    @property
    def built(self) -> bool:
        return all(r.built for r in self.runs)

    @property
    def has_model(self) -> bool:
        return any(r.built for r in self.runs)

    @property
    def step_count(self) -> int:
        count = min(r.step_count for r in self.runs)
        return max(count, self._final) if self._final is not None and not self.running else count

    @property
    def notice(self) -> Optional[str]:
        return self._notice or self._remote_notice

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if not self.started:  # the worker builds the models before a Start: "new" is about the student
            return "new"
        if self.step_count >= self.target_steps:
            return "done"
        return "running" if self.running else "paused"

    @property
    def view(self) -> View:
        """The latest published view, with the session's place in its worker's queue as of now."""
        place = self.pool.place(self) if self.running else None
        if place is None:
            return self._view
        n, seconds = place
        eta = "no estimate yet" if seconds is None else f"about {max(1, round(seconds))} s"
        text = f"waiting for a free trainer: {_ordinal(n)} in the queue, {eta} (Pause leaves the queue)"
        return dataclasses.replace(self._view, queue=text)

    def _publish(self) -> None:
        with self._changed:
            runs = tuple(RunView(r.label, r.step_count, list(r.history), r.last_eval()) for r in self.runs)
            busy = self.busy
            if busy is None and not self.running and not self.error and any(
                    r.built and r.trained < self.step_count for r in self.runs):
                busy = "finishing its last step"  # paused: the page ticks until the worker's records are here
            self._view = View(self.status, self.running, self.has_model, self.step_count, self.target_steps,
                              self.error, self.notice, runs, busy=busy)
            self._changed.notify_all()

    def wait(self, predicate: Callable[[View], bool], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.view), timeout)

    def _send(self, op: str, *args: Any) -> int:
        self._asked += 1
        self.host.send(op, self.sid, self._asked, *args)
        return self._asked

    def test_set(self):
        return shared_datasets(self.runs[0].config)[1]

    def matches(self, configs: Sequence[TrainConfig], labels: Sequence[str]) -> bool:
        return len(configs) == len(self.runs) and all(r.same(n, c) for r, n, c in zip(self.runs, labels, configs))

    def seconds_left(self) -> Optional[float]:
        """Seconds until this session's run ends at its recent rate (None before a rate is known)."""
        if len(self._rate) < 2:
            return None
        (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
        return None if s1 <= s0 else (self.target_steps - self.step_count) * (t1 - t0) / (s1 - s0)

    # ------------------------------------------------------------------ buttons
    def start(self) -> None:
        with self.lock:
            self._notice = self.waiting_at = None
            if self.error:
                return
            if self.step_count >= self.target_steps:
                self._notice = f"the run has reached its {self.target_steps} steps: raise 'steps' to train further"
                self._publish()
                return
            self.gate.allow()
            self.running, self.started, self._final = True, True, None
            self._rate.clear()
            self._publish()
        if self.pool.admit(self):
            self.admitted()

    def admitted(self) -> None:
        """A place in the worker is this session's (now, or it left the queue): the worker trains it."""
        self._send("start")

    def pause(self) -> None:
        with self.lock:
            self.running = False
            self._final = self.gate.stop()  # final: the worker cancels a step it had not committed yet
            self._send("pause")
            self._publish()
        self.pool.release(self)

    def wait_for_viewer(self) -> None:
        """No page has shown this session for a while: it stops until one does (``touch``)."""
        with self.lock:
            if not self.running:
                return
            self.pause()
            self.waiting_at = self.step_count
            self._notice = (f"training waits at step {self.waiting_at}: no page has shown this run for "
                            f"{WATCH_SECONDS:.0f} s; it goes on when one does")
            self._publish()

    def touch(self) -> None:
        self.watch.last_seen = time.monotonic()
        if self.waiting_at is not None:
            waited = self.waiting_at
            self.start()
            with self.lock:
                self._notice = (f"training waited at step {waited} while no page showed this run, and went on "
                                "when one did")
                self._publish()

    def step(self) -> None:
        with self.lock:
            if self.error:
                return
            self.running, self.started, self._notice, self._final = False, True, None, None
            self.busy, self._busy_until = "training one tick", self._send("step", self.gate.bump())
            self._publish()
        self.pool.release(self)

    def reset(self) -> None:
        with self.lock:
            self.running = self.started = False
            if self.host.dead is not None:  # its worker stopped: a new one hosts it from step 0
                try:
                    self.host, self.gate = self.pool.attach(self)
                except ValueError as e:  # pool.Refused: no worker has room for another page now
                    self.error = f"{e}: press Reset to try again"
                    self._publish()
                    return
                self._asked = 0
                self._send("create", [r.config for r in self.runs], [r.label for r in self.runs], self.target_steps,
                           self.steps_per_tick, self.eval_every, self.slot, self.eager)
            self.gate.clear()
            self._restarted_at = self._send("reset")
            self.runs = [RemoteRun(r.label, r.config) for r in self.runs]
            self.error = self._notice = self._remote_notice = self.busy = self._final = self.waiting_at = None
            self._publish()
        self.pool.release(self)

    def build(self) -> bool:
        """Ask the worker to build the models (a view needs them); True once they are built."""
        with self.lock:
            if self.built or self.error or self.busy:
                return self.built
            self.busy, self._busy_until = "building the model", self._send("build")
            self._publish()
            return False

    def reserve(self, ask: int) -> None:
        """Hold ``ask`` bytes of the pool's memory instead of what it held (before :meth:`reconfigure` to new
        settings), or raise ``pool.NoMemory`` and keep what it held."""
        self.pool.reserve(self.sid, ask)

    def reconfigure(self, configs: Sequence[TrainConfig], labels: Sequence[str]) -> list[str]:
        with self.lock:
            old = list(self.runs)
            runs = [next((r for r in old if r.same(n, c)), None) or RemoteRun(n, c) for n, c in zip(labels, configs)]
            restarted = [r.label for r in runs if r not in old]
            if not restarted and len(runs) == len(old):
                return []
            self.runs, kept = runs, [r for r in runs if r in old]
            if not kept:
                self.running = self.started = False
                self.error = self._notice = self._final = self.busy = None
            self._restarted_at = self._send("reconfigure", list(configs), list(labels))
            self._publish()
        if not kept:
            self.pool.release(self)
        return restarted

    def set_schedule(self, target_steps: int, steps_per_tick: int, eval_every: int) -> None:
        if (target_steps, steps_per_tick, eval_every) != (self.target_steps, self.steps_per_tick, self.eval_every):
            with self.lock:
                self.target_steps, self.steps_per_tick, self.eval_every = target_steps, steps_per_tick, eval_every
                self._send("schedule", target_steps, steps_per_tick, eval_every)
                self._publish()

    def snapshots(self, max_lag: int = 0) -> list[tuple[RemoteRun, HeldOut]]:
        """Each run with its latest held-out snapshot from the worker (asking for a newer one when it is
        more than ``max_lag`` steps old); [] until the worker has sent one for every run."""
        with self.lock:
            runs = list(self.runs)
            if not all(r.fresh_snapshot(max_lag) for r in runs):
                when, number = self._snapshots_asked
                answered = self._view_done >= number
                if (not self.running and answered) or time.monotonic() - when > ASK_SNAPSHOTS_SECONDS:
                    number = self._send("snapshots", max_lag)
                    self._snapshots_asked = (time.monotonic(), number)
                    if not self.running:
                        self.busy, self._busy_until = "computing the held-out embeddings", number
                        self._publish()
            latest = [r.snapshot for r in runs]
        return list(zip(runs, latest)) if all(h is not None for h in latest) else []

    def close(self) -> None:
        with self.lock:
            self.running = False
        self.pool.detach(self)

    # ------------------------------------------------------------------ from the worker
    _view_done = 0

    def receive(self, kind: str, payload: Any) -> None:
        """What the worker published (the pool's listener thread)."""
        release = False
        with self.lock:
            if kind == "snapshot":
                done, label, h = payload
                run = next((r for r in self.runs if r.label == label), None)
                if done >= self._restarted_at and run is not None:
                    run.snapshot = h
                return
            p = payload
            if p.done < self._restarted_at:
                return  # published before the worker had the page's Reset or new runs
            self._view_done = p.done
            for label, step, again, records, built in p.runs:
                run = next((r for r in self.runs if r.label == label), None)
                if run is None:
                    continue
                run.history = list(records) if again else run.history + list(records)
                run.step_count, run.built = step, built
                run.trained = next((r["step"] for r in reversed(run.history) if r.get("kind") == "train"), 0)
            self.error, self._remote_notice = p.error, p.notice
            if self.running and (p.error or p.status == "done"):
                self.running, release = False, True
            if self.busy and p.done >= self._busy_until:
                self.busy = None
            if self.running:
                now = time.monotonic()
                self._rate.append((now, self.step_count))
                while len(self._rate) > 2 and now - self._rate[0][0] > RATE_SECONDS:
                    self._rate.popleft()
            self._publish()
        if release:
            self.pool.release(self)

    def worker_lost(self, reason: str) -> None:
        with self.lock:
            self.running, self.busy = False, None
            self.error = f"{reason}: press Reset to start this run again from step 0"
            self._publish()
        self.pool.release(self)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
