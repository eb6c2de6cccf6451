"""The dashboard's worker processes: trainings out of the page's process, with explicit admission.

One ``streamlit run app.py`` serves a class. Its pages (script runs in the server's process) only
draw; every session's training runs in one of ``workers`` processes (:mod:`lab.dashboard.host`),
started with the server, each at a lower OS priority than the page (``os.nice``) and with one torch
thread. A worker trains at most ``runs_per_worker`` sessions at once (a compare session counts
once); a session whose worker is full waits in that worker's queue, and its page says where it is
and about how long until a trainer is free (:meth:`Pool.place`). Pausing, finishing or failing frees
the place for the next in the queue.

Sessions are placed on the worker that hosts the fewest when they are created and stay there: their
models live in the worker, and a page reads what the worker publishes (:mod:`lab.dashboard.remote_session`).

Memory: a session holds what its runs ask (the trainer's estimate, :func:`lab.dashboard.settings.session_ask`)
from the moment it is made until it closes, paused or not (a paused run keeps its model and Adam's state in
its worker): a session the pool's memory cannot hold now is refused in one line (:class:`NoMemory`, a
:class:`Refused`, as a session no worker has room for), and the page says why. Places alone bounded only the
sessions that train: thirty students who each trained convnext_base and paused would have held about 61 GB.

Sizes: ``RANKLAB_WORKERS`` (default: the machine's cores; ``make app WORKERS=3``; 0 trains in the
page's process, in threads, as before) and ``RANKLAB_RUNS_PER_WORKER`` (default 3), read by
:func:`lab.core.env.dashboard_workers` and :func:`lab.core.env.runs_per_worker`.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import multiprocessing
import os
import sys
import threading
import time
import types
from typing import Any, Callable, Iterator, Optional

from . import host
from .gate import Gate, Gates

MAX_HOSTED = 256  # sessions one worker may hold (paused ones included; the registry drops closed pages')
WORKER_NICE = 10  # the workers' niceness above the page's: the page answers first
START_SECONDS = 300.0  # for a worker to import torch and draw the default data on a loaded machine
STOP_SECONDS = 120.0
MONITOR_SECONDS = 2.0


class WorkerProcess:
    """One worker process, its pipes and shared gates, the sessions it hosts, runs and queues."""

    def __init__(self, pool: "Pool", index: int) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a server with threads
        self.pool, self.index = pool, index
        self.gates = Gates(context, MAX_HOSTED)
        commands, self._commands = context.Pipe(duplex=False)
        self._out, out = context.Pipe(duplex=False)
        # Below the page from its first instruction (importing torch included): set from here as well.
        niceness = min(19, os.getpriority(os.PRIO_PROCESS, 0) + pool.nice)
        self.process = context.Process(target=host.main, name=f"ranklab-worker-{index}", daemon=True,
                                       args=(commands, out, self.gates, niceness, pool.threads, pool.warm))
        with _main_module_hidden():
            self.process.start()
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self.process.pid, niceness)
        commands.close()
        out.close()
        self.free = list(range(MAX_HOSTED - 1, -1, -1))
        self.hosted: dict[str, Any] = {}
        self.closing: dict[str, int] = {}  # sid -> slot, until the worker says the session is gone
        self.running: list[Any] = []
        self.queue: collections.deque = collections.deque()
        self.ready = threading.Event()
        self.dead: Optional[str] = None
        self._send = threading.Lock()
        self._reaping = threading.Lock()
        threading.Thread(target=self._listen, name=f"ranklab-listen-{index}", daemon=True).start()

    def send(self, op: str, sid: str, *args: Any) -> None:
        with self._send:
            try:
                self._commands.send((op, sid, args))
            except (OSError, ValueError):  # the process is gone: the listener has said so to its sessions
                pass

    def _listen(self) -> None:
        while True:
            try:
                kind, sid, payload = self._out.recv()
            except (EOFError, OSError):
                break
            if kind == host.READY:
                self.ready.set()
                self.pool.worker_ready()
            elif kind == "closed":
                with self.pool.lock:
                    slot = self.closing.pop(sid, None)
                    if slot is not None:
                        self.free.append(slot)
            else:
                session = self.hosted.get(sid)
                if session is not None:
                    session.receive(kind, payload)
        with self._reaping:
            self.process.join(timeout=5)
            code = self.process.exitcode
        self.dead = f"the training process stopped (exit code {code})" if code else "the training process stopped"
        self.ready.set()
        for session in list(self.hosted.values()):
            session.worker_lost(self.dead)

    def stop(self, timeout: float) -> None:
        self.send("shutdown", "")
        with self._reaping:  # one thread at a time waits for the process (two would race for its exit code)
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(5)


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """A spawned process runs its parent's ``__main__`` again before its target; under Streamlit that is
    the app script (which would start a pool of its own), elsewhere a script without a main guard. The
    worker needs none of it: it is hidden while the process starts."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class Refused(ValueError):
    """A session this server cannot take now: one line for the page."""


class NoMemory(Refused):
    """A session the pool's memory cannot hold now."""


class Pool:
    """``workers`` worker processes, each training up to ``runs_per_worker`` sessions at once, whose sessions
    hold at most ``memory`` bytes in all (None: no bound)."""

    def __init__(self, workers: int, runs_per_worker: int, nice: int = WORKER_NICE, threads: int = 1,
                 warm: Any = None, memory: Optional[int] = None,
                 available: Optional[Callable[[], int]] = None) -> None:
        """``available()``: the host's available memory, read again once every worker is ready (their own
        memory, ~0.75 GB each with torch and the default data, then no longer counts as the sessions')."""
        if workers < 1 or runs_per_worker < 1:
            raise ValueError(f"a pool needs workers >= 1 and runs_per_worker >= 1, got {workers} and {runs_per_worker}")
        self.size, self.runs_per_worker = workers, runs_per_worker
        self.nice, self.threads, self.warm, self.memory = nice, threads, warm, memory
        self.asks: dict[str, int] = {}  # session id -> the bytes it holds (reserve)
        self.available, self._measured = available, False
        self.lock = threading.RLock()
        self.workers: list[WorkerProcess] = []
        self.closed = False
        self._monitor: Optional[threading.Thread] = None

    def start(self) -> "Pool":
        """Start the worker processes (once); they get ready in the background."""
        with self.lock:
            if not self.workers and not self.closed:
                self.workers = [WorkerProcess(self, i) for i in range(self.size)]
                self._monitor = threading.Thread(target=self._watch, name="ranklab-pool", daemon=True)
                self._monitor.start()
        return self

    @property
    def capacity(self) -> int:
        return self.size * self.runs_per_worker

    def attach(self, session: Any) -> tuple[WorkerProcess, Gate]:
        """Host ``session`` on the worker holding the fewest (a new worker for a dead one)."""
        self.start()
        with self.lock:
            for i, w in enumerate(self.workers):
                if w.dead is not None:  # its pages show the error; each Reset brings its run here again
                    self.workers[i] = WorkerProcess(self, i)
            alive = [w for w in self.workers if w.dead is None and w.free]
            if not alive:
                raise Refused("every training process of this server hosts as many pages as it can, or has stopped: "
                              "try again when pages close")
            w = min(alive, key=lambda w: (len(w.hosted), w.index))
            slot = w.free.pop()
            gate = w.gates.gate(slot)
            gate.clear()
            session.slot = slot
            w.hosted[session.sid] = session
            session.eager = len(w.hosted) <= self.runs_per_worker  # its model built before its Start (host.py)
        return w, gate

    def reserve(self, sid: str, ask: int) -> None:
        """Hold ``ask`` bytes of the pool's memory for session ``sid`` (instead of what it held), or raise
        :class:`NoMemory` and hold what it held."""
        with self.lock:
            held = sum(n for other, n in self.asks.items() if other != sid)
            if self.memory is not None and held + ask > self.memory:
                raise NoMemory(f"this server's memory is held by the runs of its other open pages ({held / 1e9:.2f} "
                               f"of its {self.memory / 1e9:.2f} GB), and these settings ask for {ask / 1e9:.2f} GB: "
                               "choose a smaller model or batch, or wait until pages close")
            self.asks[sid] = ask

    def worker_ready(self) -> None:
        """A worker is ready; once all are (the first time), the memory the sessions may hold is at most what
        the host has available now plus what they hold already."""
        with self.lock:
            if self._measured or self.memory is None or self.available is None or not self.workers \
                    or not all(w.ready.is_set() for w in self.workers):
                return
            self._measured = True
            self.memory = min(self.memory, self.available() + sum(self.asks.values()))

    def unreserve(self, sid: str) -> None:
        """Session ``sid`` holds nothing any more (it closed, or was never hosted)."""
        with self.lock:
            self.asks.pop(sid, None)

    def detach(self, session: Any) -> None:
        """``session`` is dropped: out of its worker (its slot free once the worker has closed it), its memory
        free."""
        w = session.host
        self.unreserve(session.sid)
        with self.lock:
            self._leave(session)
            if w.hosted.pop(session.sid, None) is not None:
                w.closing[session.sid] = session.slot
        w.send("close", session.sid, 0)

    def admit(self, session: Any) -> bool:
        """Train ``session`` now if its worker has a free place, else queue it; True if it trains."""
        w = session.host
        with self.lock:
            if session in w.running:
                return True
            if len(w.running) < self.runs_per_worker and not w.queue:
                w.running.append(session)
                return True
            if session not in w.queue:
                w.queue.append(session)
            return False

    def release(self, session: Any) -> None:
        """``session`` no longer trains (paused, finished, failed): the next in the queue goes on."""
        with self.lock:
            self._leave(session)

    def _leave(self, session: Any) -> None:
        w = session.host
        if session in w.queue:
            w.queue.remove(session)
        if session in w.running:
            w.running.remove(session)
        while w.queue and len(w.running) < self.runs_per_worker:
            nxt = w.queue.popleft()
            w.running.append(nxt)
            nxt.admitted()

    def place(self, session: Any) -> Optional[tuple[int, Optional[float]]]:
        """(place in its worker's queue, 1 = next; seconds until a place is likely free, None when no
        running session has a rate yet), or None when it is not queued."""
        w = session.host
        with self.lock:
            if session not in w.queue:
                return None
            place = list(w.queue).index(session) + 1
            left = [s.seconds_left() for s in w.running]
        known = sorted(t for t in left if t is not None)  # None (no rate yet) never compared: it broke the page
        if len(known) < len(left) or not known:
            return place, None
        # Each freed place takes the next in the queue: place p waits for the p-th end, one round per k.
        rounds, within = divmod(place - 1, len(known))
        return place, known[within] + rounds * known[-1]

    def _watch(self) -> None:
        """Sessions nobody watches stop training (a closed tab), and go on when a page shows them."""
        while not self.closed:
            time.sleep(MONITOR_SECONDS)
            with self.lock:
                sessions = [s for w in self.workers for s in list(w.running) + list(w.queue)]
            for s in sessions:
                if not s.watch.watched():
                    s.wait_for_viewer()

    def shutdown(self, timeout: float = STOP_SECONDS) -> None:
        """Stop every worker: each pauses its sessions and joins their threads, then ends."""
        with self.lock:
            self.closed, workers = True, list(self.workers)
        for w in workers:
            w.send("shutdown", "")
        for w in workers:
            w.stop(timeout)


_POOL: Optional[Pool] = None
_POOL_LOCK = threading.Lock()


def server_pool() -> Optional[Pool]:
    """The process's pool, sized from the environment (None: ``RANKLAB_WORKERS=0``, train in threads)."""
    global _POOL
    from ..core.env import dashboard_threads, dashboard_workers, runs_per_worker, worker_nice
    from .served import available_memory, pool_memory

    workers = dashboard_workers()
    if workers == 0:
        return None
    with _POOL_LOCK:
        if _POOL is None or _POOL.closed:
            from .settings import Settings, to_configs

            try:
                memory = pool_memory()
            except ValueError:  # the operator's malformed value: every page's settings errors say so
                memory = 0
            _POOL = Pool(workers, runs_per_worker(), nice=worker_nice(WORKER_NICE), threads=dashboard_threads(),
                         warm=to_configs(Settings())[0], memory=memory,
                         available=available_memory)
            atexit.register(_POOL.shutdown)  # after Streamlit stops: the workers end before the interpreter
        return _POOL
