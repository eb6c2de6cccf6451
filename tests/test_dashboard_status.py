"""What a page says of a session trained in a worker process (lab.dashboard.remote_session.RemoteSession.status)
before the worker has answered, with a pool whose worker never answers: a busy machine, where building the
model takes minutes (bench/class_load.py --load 8 paused 3 of 6 pages while their models were built)."""
from __future__ import annotations

from types import SimpleNamespace

from lab.dashboard import Settings, run_labels, to_configs
from lab.dashboard.host import Published
from lab.dashboard.remote_session import RemoteSession

TINY = Settings(classes=6, batch_size=8, m=2, steps=100, steps_per_tick=2, eval_every=4)


class SilentPool:
    """Hosts every session on one worker that records what it is asked and never publishes a view."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []
        self.host = SimpleNamespace(dead=None, send=lambda *message: self.sent.append(message))
        self.gate = SimpleNamespace(allow=lambda: 0, stop=lambda: 0, clear=lambda: None, bump=lambda: 1)
        self.training: set[str] = set()

    def reserve(self, sid: str, ask: int) -> None:  # memory without a bound
        pass

    def attach(self, session):
        session.slot, session.eager = 0, False
        return self.host, self.gate

    def admit(self, session) -> bool:
        self.training.add(session.sid)
        return True

    def release(self, session) -> None:
        self.training.discard(session.sid)

    def place(self, session):
        return None

    def detach(self, session) -> None:
        self.release(session)


def session_of(pool: SilentPool, s: Settings = TINY) -> RemoteSession:
    return RemoteSession(pool, to_configs(s), run_labels(s), s.steps, s.steps_per_tick, s.eval_every)


def test_a_pause_before_the_model_is_built_says_paused_and_frees_start():
    # Before: "new" ("press Start or Step to build the model and train"), so the page never said "paused"
    # and bench/class_load.py counted the Pause as missed.
    pool = SilentPool()
    session = session_of(pool)
    assert session.view.status == "new"
    session.start()
    assert session.view.running and not session.view.has_model and session.sid in pool.training
    session.pause()
    v = session.view
    assert (v.status, v.running, v.has_model, v.step_count) == ("paused", False, False, 0)
    assert session.sid not in pool.training  # its place in the worker is free for the queue
    assert [m[0] for m in pool.sent] == ["create", "start", "pause"]
    session.start()  # Start is free again and trains from where it was: step 0
    assert session.view.status == "running" and session.sid in pool.training


def test_a_step_before_the_model_is_built_is_paused_while_the_worker_works():
    pool = SilentPool()
    session = session_of(pool)
    session.step()
    v = session.view
    assert (v.status, v.running, v.busy) == ("paused", False, "training one tick")


def test_reset_and_new_settings_make_a_started_session_new_again():
    pool = SilentPool()
    session = session_of(pool)
    session.start()
    session.pause()
    session.reset()
    assert session.view.status == "new"
    session.start()
    session.pause()
    other = Settings(**{**TINY.__dict__, "seed": TINY.seed + 1})
    assert session.reconfigure(to_configs(other), run_labels(other))  # nothing kept: a new run
    assert session.view.status == "new" and not session.view.running


def built_view(session: RemoteSession, done: int) -> Published:
    """What a worker publishes once it has built the session's models, before any training step."""
    runs = tuple((r.label, 0, True, [{"kind": "eval", "step": 0}], True) for r in session.runs)
    return Published("paused", False, True, 0, None, None, runs, done)


def test_a_model_built_before_start_is_still_new_on_the_page():
    # The worker builds a page's models as soon as the page exists (host.PREPARE): the page must still ask
    # for Start, not say "paused" about a run nobody started.
    pool = SilentPool()
    session = session_of(pool)
    session.receive("view", built_view(session, done=1))
    v = session.view
    assert v.has_model and (v.status, v.running, v.step_count) == ("new", False, 0)
    session.start()
    session.pause()
    assert session.view.status == "paused"


def test_a_reset_after_the_worker_died_with_no_room_left_is_an_error_on_the_page_not_a_traceback():
    from lab.dashboard.pool import Refused

    pool = SilentPool()
    session = session_of(pool)
    session.worker_lost("the training process stopped (exit code -9)")
    pool.host.dead = "the training process stopped (exit code -9)"

    def full(s):
        raise Refused("every training process of this server hosts as many pages as it can, or has stopped")

    pool.attach = full
    session.reset()  # before: the Refused (then a RuntimeError) reached the button's callback
    v = session.view
    assert v.status == "error" and v.error.endswith("or has stopped: press Reset to try again") and not v.running
