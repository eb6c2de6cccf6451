"""The dashboard's worker processes (lab.dashboard.pool): trainings out of the page's process, the page's
Pause answered from shared memory, explicit admission with a queue, lower priority, clean ends.

Sessions here are the pages' RemoteSession objects, driven without Streamlit; waits are on the
session's published view (a condition), never on time.
"""
import os
import signal
import time

import pytest
import torch

from lab.dashboard import Settings, TrainingSession, run_labels, to_configs
from lab.dashboard import remote_session as remote_module
from lab.dashboard.pool import Pool
from lab.dashboard.remote_session import RemoteSession
from lab.dashboard.settings import session_ask

pytestmark = pytest.mark.slow
TINY = Settings(classes=6, batch_size=8, m=2, steps=100_000, steps_per_tick=2, eval_every=4)
WAIT = 300  # seconds, at most, for a condition on a loaded machine (a worker imports torch first)


@pytest.fixture(scope="module")
def pool():
    p = Pool(1, 2, warm=to_configs(TINY)[0]).start()  # one worker: its sessions train in threads of one process
    yield p
    p.shutdown()


def session_of(pool, s: Settings = TINY) -> RemoteSession:
    return RemoteSession(pool, to_configs(s), run_labels(s), s.steps, s.steps_per_tick, s.eval_every,
                         session_ask(to_configs(s)))


def losses(history) -> list[float]:
    return [r["loss"] for r in history if r["kind"] == "train"]


def solo(s: Settings, steps: int) -> list[list[float]]:
    """Each run's losses when it trains alone, in this process, with the workers' one torch thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        session = TrainingSession(to_configs(s), run_labels(s), s.steps, 1, s.eval_every, background=False)
        session.advance(steps)
        return [losses(r.history) for r in session.runs]
    finally:
        torch.set_num_threads(threads)


def settled(v) -> bool:
    """The worker has published everything up to the step the page shows (its records included)."""
    return v.busy is None and all(len(losses(r.history)) >= v.step_count for r in v.runs)


def test_pause_is_final_at_once_whatever_step_the_worker_was_computing(pool):
    session = session_of(pool)
    try:
        session.start()
        assert session.wait(lambda v: v.step_count >= 5, WAIT), session.view
        session.pause()  # while the worker computes its next step: no waiting for it
        paused = session.view
        assert paused.status == "paused" and not paused.running
        assert session.wait(settled, WAIT), session.view
        assert session.step_count == paused.step_count  # the step in flight was cancelled, not kept
        assert losses(session.view.runs[0].history) == solo(TINY, paused.step_count)[0]
        session.start()  # and goes on from there, on the same trajectory
        assert session.wait(lambda v: v.step_count >= paused.step_count + 3, WAIT), session.view
        session.pause()
        assert session.wait(settled, WAIT), session.view
        assert losses(session.view.runs[0].history) == solo(TINY, session.step_count)[0]
    finally:
        session.close()


def test_a_compare_session_trains_its_solo_runs_while_another_session_trains_beside_it(pool):
    other = session_of(pool, TINY.replace(seed=3, loss="proxy_dg"))
    pair = session_of(pool, TINY.replace(compare=True, loss="roadmap", loss_b="smooth_ap"))
    try:
        other.start()
        pair.start()  # both in threads of the one worker, built and trained side by side
        assert pair.wait(lambda v: v.step_count >= 6, WAIT), pair.view
        assert other.view.running
        pair.pause()
        other.pause()
        assert pair.wait(settled, WAIT) and other.wait(settled, WAIT)
        n = pair.step_count
        alone = solo(TINY.replace(compare=True, loss="roadmap", loss_b="smooth_ap"), n)
        assert [losses(r.history) for r in pair.view.runs] == alone
        assert [losses(r.history) for r in other.view.runs] == solo(TINY.replace(seed=3, loss="proxy_dg"),
                                                                   other.step_count)
    finally:
        pair.close()
        other.close()


def test_a_new_setting_or_a_reset_never_mixes_the_old_runs_records_into_the_new(pool):
    s = TINY.replace(compare=True, loss_b="smooth_ap")
    session = session_of(pool, s)
    try:
        session.start()
        assert session.wait(lambda v: v.step_count >= 4, WAIT)
        changed = s.replace(loss_b="fast_ap")
        assert session.reconfigure(to_configs(changed), run_labels(changed)) == ["B · fast_ap"]
        assert session.wait(lambda v: v.runs[1].step_count >= 4, WAIT), session.view
        session.pause()
        assert session.wait(settled, WAIT)
        b = session.view.runs[1]
        assert losses(b.history) == solo(TINY.replace(loss="fast_ap"), b.step_count)[0]  # B alone, from step 0
        session.reset()
        assert session.view.step_count == 0 and session.view.status == "new"
        session.step()
        assert session.wait(lambda v: v.busy is None and v.step_count == TINY.steps_per_tick, WAIT), session.view
        assert [losses(r.history) for r in session.view.runs] == solo(changed, TINY.steps_per_tick)
    finally:
        session.close()


def test_a_full_worker_queues_the_next_start_and_says_where_it_waits():
    small = Pool(1, 1, warm=to_configs(TINY)[0]).start()  # one place
    first, second = session_of(small), session_of(small)
    try:
        assert first.eager and not second.eager  # one place: the second is built when it is admitted
        first.start()
        second.start()
        queued = second.view
        assert queued.running and queued.queue.startswith("waiting for a free trainer: 1st in the queue")
        assert first.wait(lambda v: v.step_count >= 4, WAIT)
        assert second.step_count == 0 and "in the queue" in second.view.queue
        first.pause()  # frees the place: the queue's first goes on
        assert second.wait(lambda v: v.step_count >= 2, WAIT), second.view
        assert second.view.queue is None
        third = session_of(small)
        third.start()
        third.pause()  # Pause leaves the queue: nothing of it trains, its Start is free again
        assert third.view.queue is None and third.view.status == "paused" and not third.view.running
        third.close()
    finally:
        first.close()
        second.close()
        small.shutdown()


def test_sessions_the_pools_memory_cannot_hold_are_refused_until_one_closes(pool):
    """A paused session keeps its model in its worker: the pool counts what every hosted session asks, and a
    session beyond its memory is refused before any worker hears of it (before: hosted without a bound)."""
    from lab.dashboard.pool import NoMemory

    ask, saved = session_ask(to_configs(TINY)), pool.memory
    assert ask > 0
    pool.memory = sum(pool.asks.values()) + 2 * ask  # room for two such sessions beside the others
    first = second = None
    try:
        first, second = session_of(pool), session_of(pool)
        hosted = len(first.host.hosted)
        first.start()
        assert first.wait(lambda v: v.step_count >= 1, WAIT)
        first.pause()  # paused, it keeps its model: it still holds its memory
        with pytest.raises(NoMemory, match="and these settings ask for"):
            session_of(pool)
        assert len(first.host.hosted) == hosted  # no worker heard of the refused one
        first.close()
        first = session_of(pool)  # the closed one's memory is free again
        first.start()
        assert first.wait(lambda v: v.step_count >= 1, WAIT), first.view
    finally:
        pool.memory = saved
        for s in (first, second):
            if s is not None:
                s.close()


def test_the_workers_run_below_the_page_and_end_cleanly(pool):
    session = session_of(pool)
    session.start()
    assert session.wait(lambda v: v.step_count >= 2, WAIT)
    worker = pool.workers[0].process
    assert os.getpriority(os.PRIO_PROCESS, worker.pid) >= os.getpriority(os.PRIO_PROCESS, 0) + 10
    session.close()
    ended = Pool(1, 1).start()
    training = session_of(ended)
    training.start()
    assert training.wait(lambda v: v.step_count >= 2, WAIT)
    ended.shutdown()  # while it trains: the worker pauses it and joins its thread, then exits
    assert ended.workers[0].process.exitcode == 0


def test_a_worker_stopped_while_a_command_runs_in_torch_ends_without_an_abort():
    # A page's Step runs in the session's inbox thread, a daemon thread. Stopped during it, the worker used to
    # return into the interpreter's teardown, which ends a daemon thread inside torch with pthread_exit; its
    # unwinding through torch's C++ frames aborted the process ("terminate called without an active
    # exception", exit code -6), seen when a class's server stopped with pages still busy.
    heavy = TINY.replace(batch_size=256, m=4, classes=64)  # a step long enough to be in flight (a model built first)
    for attempt in range(3):
        ended = Pool(1, 1).start()
        session = session_of(ended, heavy)
        assert ended.workers[0].ready.wait(WAIT)
        session.step()  # the inbox thread builds the trainer, then trains one tick
        time.sleep(0.5 * attempt)
        ended.shutdown(timeout=WAIT)
        assert ended.workers[0].process.exitcode == 0, f"attempt {attempt}: {ended.workers[0].process.exitcode}"


def test_a_worker_that_dies_is_an_error_on_its_pages_and_reset_trains_again_elsewhere():
    fragile = Pool(1, 2, warm=to_configs(TINY)[0]).start()
    session = session_of(fragile)
    try:
        session.start()
        assert session.wait(lambda v: v.step_count >= 2, WAIT)
        os.kill(fragile.workers[0].process.pid, signal.SIGKILL)
        assert session.wait(lambda v: v.status == "error", WAIT), session.view
        assert "the training process stopped" in session.view.error and "press Reset" in session.view.error
        session.reset()  # a new worker hosts it
        session.step()
        assert session.wait(lambda v: v.step_count == TINY.steps_per_tick and v.busy is None, WAIT), session.view
    finally:
        session.close()
        fragile.shutdown()


def test_a_session_nobody_watches_stops_and_goes_on_when_a_page_shows_it(pool, monkeypatch):
    monkeypatch.setattr(remote_module, "WATCH_SECONDS", 0.0)
    session = session_of(pool)
    try:
        session.start()
        assert session.wait(lambda v: v.notice is not None and "waits at step" in v.notice, WAIT), session.view
        assert not session.view.running
        session.watch.page_open = lambda: True
        session.touch()
        assert "waited at step" in session.view.notice and session.view.running
        reached = session.step_count
        assert session.wait(lambda v: v.step_count >= reached + 2, WAIT)
    finally:
        session.close()
