"""A dashboard worker's host (lab.dashboard.host.Host) builds a page's models before its Start, in this process
with the pipes replaced by lists: only the settings the page ends on, and never ahead of a waiting command."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from lab.dashboard import Settings, TrainingSession, run_labels, to_configs
from lab.dashboard.host import Host

TINY = Settings(classes=6, batch_size=8, m=2, steps=100, steps_per_tick=2, eval_every=4)
WAIT = 120  # seconds, at most, on a loaded machine


class Out:
    def __init__(self) -> None:
        self.sent: list[tuple] = []
        self.changed = threading.Condition()

    def send(self, message: tuple) -> None:
        with self.changed:
            self.sent.append(message)
            self.changed.notify_all()

    def wait_view(self, done: int, built: bool) -> object:
        """The first view published after command ``done`` whose runs are (all) built or not."""
        def found():
            return next((m[2] for m in self.sent if m[0] == "view" and m[2].done >= done
                         and all(r[4] for r in m[2].runs) == built), None)
        with self.changed:
            assert self.changed.wait_for(found, WAIT), self.sent
            return found()


def host_of(out: Out) -> Host:
    gate = SimpleNamespace(restart=lambda step: None)
    return Host(out, SimpleNamespace(gate=lambda slot: gate))


def args_of(s: Settings, eager: bool = True) -> tuple:
    return to_configs(s), run_labels(s), s.steps, s.steps_per_tick, s.eval_every, 0, eager


def closed(host: Host, sid: str) -> bool:
    """Close ``sid`` and wait until its inbox has carried out everything before the close."""
    host.handle("close", sid, (99,))
    deadline = time.monotonic() + WAIT
    while sid in host.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    return sid not in host.sessions


def counting_builds(monkeypatch) -> list:
    built = []
    original = TrainingSession.build

    def counting(self):
        built.append([r.config.lr for r in self.runs])
        return original(self)

    monkeypatch.setattr(TrainingSession, "build", counting)
    return built


def test_a_new_page_gets_its_model_built_before_its_start():
    out = Out()
    host = host_of(out)
    host.handle("create", "a", (1, *args_of(TINY)))
    view = out.wait_view(1, built=True)  # built with nothing asked but the page's creation
    assert view.step_count == 0 and not view.running  # the page's status stays "new" (test_dashboard_status.py)
    session = host.sessions["a"]
    # The untrained model is kept, to be evaluated after step 1: a Start shows step 1 without waiting for it.
    assert session.runs[0].history == [] and session.runs[0].initial is not None
    host.handle("close", "a", (2,))


def test_a_command_right_after_the_creation_does_not_cancel_the_build():
    out = Out()
    host = host_of(out)
    host.handle("create", "c", (1, *args_of(TINY)))
    host.handle("schedule", "c", (2, 50, 2, 4))  # e.g. the page's run length, sent before the build began
    out.wait_view(2, built=True)
    assert all(r.trainer is not None for r in host.sessions["c"].runs)
    host.handle("close", "c", (3,))


def test_a_burst_of_new_settings_builds_the_last_only(monkeypatch):
    # A student dragging a slider sends a reconfigure per value: each build took ~2 s of the worker, and the
    # page's Start waited behind all of them. A build now runs only when no command of the session waits.
    built = counting_builds(monkeypatch)
    out = Out()
    host = host_of(out)
    lrs = [1e-3, 2e-3, 3e-3]
    settings = [Settings(**{**TINY.__dict__, "lr": lr}) for lr in lrs]
    host.handle("create", "b", (1, *args_of(settings[0])))
    for number, s in enumerate(settings[1:], start=2):
        host.handle("reconfigure", "b", (number, to_configs(s), run_labels(s)))
    out.wait_view(3, built=True)
    assert built[-1] == [lrs[-1]] and len(built) <= 2, built  # 3 before: every value of the slider built
    assert all(r.trainer is not None for r in host.sessions["b"].runs)
    assert closed(host, "b")


def test_a_session_that_would_wait_in_the_queue_is_not_built_before_its_start(monkeypatch):
    # Its worker has no place to train it (Pool.attach: eager false): building it would take CPU from the
    # runs that train, for a model that waits.
    built = counting_builds(monkeypatch)
    out = Out()
    host = host_of(out)
    host.handle("create", "d", (1, *args_of(TINY, eager=False)))
    host.handle("schedule", "d", (2, 50, 2, 4))
    out.wait_view(2, built=False)
    assert closed(host, "d") and built == []
