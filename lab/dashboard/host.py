"""A worker process of the dashboard's pool (:mod:`lab.dashboard.pool`): it hosts training sessions.

The page's process sends commands on a pipe (``(op, sid, args)``); the worker hosts one
:class:`~lab.dashboard.session.TrainingSession` per page session and trains the running ones in
threads of its own, at a lower priority than the page (``os.nice``) and with one torch thread each.
Each session has an inbox thread that runs its commands in order, so a model being built for one
session never holds up another's. What changes comes back on a second pipe: every publication of a
session's view as a :class:`Published` (the history records the page has not seen yet, not all of
them), every new held-out snapshot, and a line when the worker is ready.

The worker ends when the page's process says so (``shutdown``: every session paused and its thread
joined, then ``os._exit``: no interpreter teardown meets a command's thread inside torch) or when it
disappears (the pipe closes). Ctrl-C reaches the page's process and the workers alike (one process group): the
workers ignore it and wait for the page's process to stop them.
"""
from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Optional

from .worker import stop_all

READY = "ready"
# After these commands the worker builds the session's models while no other command of the session waits: a
# Start then trains at once instead of building first (0.5 s to step 1 through the pool where the build takes
# ~2 s; docs/benchmarks.md; the untrained models' evaluation comes after step 1: lab.dashboard.session). A
# burst of new settings builds only the last. Only for the sessions the worker has a place to train (``eager``
# at create): a page that would wait in the queue builds when it is admitted, and its build takes no CPU from
# the runs that train.
PREPARE = frozenset({"create", "reset", "reconfigure"})


@dataclass(frozen=True)
class Published:
    """A session's view as the worker published it: per run (label, step count, whether the history
    starts over, the records new since the last publication, whether it has a model), and ``done``,
    the number of the last of the page's commands the worker has carried out."""

    status: str
    running: bool
    has_model: bool
    step_count: int
    error: Optional[str]
    notice: Optional[str]
    runs: tuple[tuple[str, int, bool, list, bool], ...]
    done: int


class Host:
    """The sessions of one worker process, by the page's session id."""

    def __init__(self, out: Any, gates: Any) -> None:
        self.out, self.gates = out, gates
        self.sessions: dict[str, Any] = {}
        self.inboxes: dict[str, queue.Queue] = {}
        self.sent: dict[str, dict[int, int]] = {}  # sid -> {id(run): history records sent}
        self.snapshots: dict[str, dict[int, int]] = {}  # sid -> {id(run): id of the snapshot sent}
        self.done: dict[str, int] = {}  # sid -> number of the last command carried out
        self.eager: dict[str, bool] = {}  # sid -> whether its models are built before a Start (PREPARE)
        self._send_lock = threading.Lock()

    def send(self, *message: Any) -> None:
        with self._send_lock:
            try:
                self.out.send(message)
            except (OSError, ValueError):  # the page's process is gone: the reader ends the worker
                pass

    def handle(self, op: str, sid: str, args: tuple) -> None:
        """Route a command: ``create`` makes the session and its inbox, the others wait in its inbox."""
        if op == "create":
            self.inboxes[sid] = inbox = queue.Queue()
            threading.Thread(target=self._serve, args=(sid, inbox), name=f"ranklab-inbox-{sid}", daemon=True).start()
        inbox = self.inboxes.get(sid)
        if inbox is not None:
            inbox.put((op, args))

    def _serve(self, sid: str, inbox: queue.Queue) -> None:
        prepare = False  # a PREPARE command came, and the models it calls for are not built yet
        while True:
            op, (number, *args) = inbox.get()
            try:
                if self._run(sid, op, tuple(args)) is False:
                    return
            except Exception as e:  # noqa: BLE001 - a command that fails is the session's error, never the worker's
                session = self.sessions.get(sid)
                if session is not None:
                    with session.lock:
                        session.running = False
                        session._fail(f"{op} failed", e)
            session = self.sessions.get(sid)
            if session is not None:
                self.done[sid] = number
                with session.lock:
                    session._publish()  # the page learns that the command is done
                prepare = prepare or (op in PREPARE and self.eager.get(sid, False))
                if prepare and inbox.empty():  # a later command (a Start, new settings) goes first
                    prepare = False
                    with session.lock:
                        session.build()  # a failure is the session's error (build catches it), shown before Start
                        session._publish()

    def _run(self, sid: str, op: str, args: tuple) -> Optional[bool]:
        from .session import TrainingSession

        if op == "create":
            configs, labels, target, per_tick, every, slot, self.eager[sid] = args
            session = TrainingSession(configs, labels, target, per_tick, every)
            session.gate = self.gates.gate(slot)
            session.worker.page_open = lambda: True  # the page's process decides whether anyone watches
            self.sent[sid], self.snapshots[sid], self.done[sid] = {}, {}, 0
            session.on_publish = lambda s, sid=sid: self._published(sid, s)
            self.sessions[sid] = session
            return None
        session = self.sessions[sid]
        if op == "close":
            session.on_publish = None
            session.close()
            for kept in (self.sessions, self.inboxes, self.sent, self.snapshots, self.done, self.eager):
                kept.pop(sid, None)
            self.send("closed", sid, None)
            return False
        if op == "start":
            session.start()
        elif op == "pause":
            session.pause(wait=False)  # the page closed the gate: a step in flight is cancelled at its commit
        elif op == "step":
            if session.gate.allow_more(session.steps_per_tick, *args):  # unless the page acted since it asked
                session.step()
            else:
                session._publish()
        elif op == "build":
            session.build()
        elif op == "reset":
            session.reset()
            session.gate.restart(0)
        elif op == "reconfigure":
            session.reconfigure(*args)
            session.gate.restart(session.step_count)
        elif op == "schedule":
            session.set_schedule(*args)
        elif op == "snapshots":
            session.snapshots(*args)  # made now when paused; while training, at the next evaluation
        return None

    def _published(self, sid: str, session: Any) -> None:
        """Send what the page has not seen of ``session`` (called under the session's publication lock)."""
        sent, shown, done = self.sent.get(sid), self.snapshots.get(sid), self.done.get(sid, 0)
        if sent is None or shown is None:
            return
        runs = []
        for run in session.runs:
            history = run.history
            seen = sent.get(id(run), 0)
            again = seen > len(history)  # reset, or cut (HISTORY_MAX)
            start = 0 if again else seen
            runs.append((run.label, run.step_count, again or start == 0, list(history[start:]),
                         run.trainer is not None))
            sent[id(run)] = len(history)
            h = run.latest_snapshot()
            if h is not None and shown.get(id(run)) != id(h):
                shown[id(run)] = id(h)
                self.send("snapshot", sid, (done, run.label, h))
        for gone in set(sent) - {id(r) for r in session.runs}:
            sent.pop(gone, None)
            shown.pop(gone, None)
        v = session.view
        self.send("view", sid, Published(v.status, v.running, v.has_model, v.step_count, v.error, v.notice,
                                         tuple(runs), done))


def main(commands: Any, out: Any, gates: Any, niceness: int, threads: int, warm: Any = None) -> None:
    """The worker process: ``niceness`` (the page's + 10: the page answers first), ``threads`` torch
    threads, then commands until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except OSError:
        pass
    import torch
    from tqdm import tqdm

    torch.set_num_threads(threads)
    # tqdm's bars (the data's first render) lock with a multiprocessing RLock: in this spawned process a named
    # semaphore, which os._exit below leaves behind ("leaked semaphore objects" when the server exits). No other
    # process shares this worker's bars: a thread lock is enough.
    tqdm.set_lock(threading.RLock())
    host = Host(out, gates)
    if warm is not None:  # the page's default data, drawn (or read from the disk cache) before the first Start
        from .datasets import shared_datasets

        try:
            for dataset in shared_datasets(warm)[:2]:
                if hasattr(dataset, "pixels"):
                    dataset.pixels()
        except Exception:  # noqa: BLE001 - met again, and reported, by the session that needs these data
            pass
    host.send(READY, "", os.getpid())
    try:
        while True:
            try:
                op, sid, args = commands.recv()
            except (EOFError, OSError):
                break  # the page's process is gone
            if op == "shutdown":
                break
            host.handle(op, sid, args)
    finally:
        stop_all()  # every training thread paused and joined: none inside torch at exit
        host.send("stopped", "", os.getpid())
    # An inbox thread may still be inside torch (a page's Step or snapshot in flight). The interpreter's
    # teardown ends such a daemon thread with pthread_exit, whose unwinding through torch's C++ frames aborts
    # the process ("terminate called without an active exception", exit code -6). Nothing of the worker needs
    # that teardown (its sessions' state lives in the page's process, it writes no file): it ends here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
