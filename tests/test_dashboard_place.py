"""A queued page's place and wait (lab.dashboard.pool.Pool.place), without worker processes: the page asks
it on every tick, so it must answer whatever the running sessions know of their rates."""
from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from lab.dashboard.pool import Pool


def session(left=None):
    return SimpleNamespace(seconds_left=lambda: left)


def pool_with(running: list, queued: list) -> Pool:
    pool = Pool(1, len(running))
    host = SimpleNamespace(running=running, queue=deque(queued))
    for s in running + queued:
        s.host = host
    return pool


def test_a_queued_session_gets_its_place_while_no_running_session_has_a_rate():
    # Sorting [None, None] raised TypeError on every tick of a queued page (N = 12 on one server: 22
    # tracebacks in the server's log, the queued pages' progress never drawn).
    waiting = session()
    pool = pool_with([session(), session(), session()], [session(), waiting])
    assert pool.place(waiting) == (2, None)


@pytest.mark.parametrize("lefts", [[30.0, None, 10.0], [None, 5.0]])
def test_a_rate_not_known_for_every_running_session_gives_no_estimate(lefts):
    waiting = session()
    pool = pool_with([session(t) for t in lefts], [waiting])
    assert pool.place(waiting) == (1, None)


def test_the_estimate_is_the_places_end_among_the_running_sessions():
    first, second, third = session(), session(), session()
    pool = pool_with([session(30.0), session(10.0)], [first, second, third])
    assert [pool.place(s) for s in (first, second, third)] == [(1, 10.0), (2, 30.0), (3, 10.0 + 30.0)]
    outsider = session()
    outsider.host = first.host
    assert pool.place(outsider) is None  # not queued


# ------------------------------------------------------------------ memory: what the pool's sessions hold
def test_the_pool_holds_what_its_sessions_ask_and_refuses_beyond_its_memory():
    """Places bounded only the sessions that train; a paused session keeps its models in its worker. Before,
    nothing bounded what the hosted sessions held together (thirty paused convnext_base: about 61 GB)."""
    from lab.dashboard.pool import NoMemory

    gb = 10**9
    pool = Pool(1, 1, memory=10 * gb)
    pool.reserve("a", 6 * gb)
    pool.reserve("b", 4 * gb)  # exactly the pool's memory
    with pytest.raises(NoMemory, match=r"^this server's memory is held by the runs of its other open pages "
                                       r"\(10\.00 of its 10\.00 GB\), and these settings ask for 0\.50 GB: "):
        pool.reserve("c", gb // 2)
    pool.reserve("a", 2 * gb)  # new settings: the session holds their ask instead of its old one
    with pytest.raises(NoMemory, match=r"\(2\.00 of its 10\.00 GB\), and these settings ask for 9\.00 GB"):
        pool.reserve("b", 9 * gb)  # refused: it keeps what it held
    assert pool.asks == {"a": 2 * gb, "b": 4 * gb}
    pool.reserve("c", 4 * gb)
    assert sum(pool.asks.values()) == 10 * gb


def test_a_closed_session_frees_its_memory():
    pool = Pool(1, 1, memory=10)
    sent = []
    host = SimpleNamespace(running=[], queue=deque(), hosted={}, closing={}, send=lambda *m: sent.append(m))
    closing = SimpleNamespace(sid="a", host=host, slot=0)
    host.hosted["a"] = closing
    pool.reserve("a", 7)
    pool.detach(closing)
    assert pool.asks == {} and sent == [("close", "a", 0)]
    pool.reserve("b", 10)  # all of it again


def test_a_pool_without_a_memory_bound_holds_any_ask():
    pool = Pool(1, 1)
    pool.reserve("a", 10**15)
    pool.reserve("b", 10**15)
    assert len(pool.asks) == 2


def test_a_page_no_worker_has_room_for_is_refused_in_one_line_and_holds_nothing():
    """Before: a RuntimeError (a traceback on the page), and with the memory reserved first it would have kept
    its reservation for ever."""
    from lab.dashboard import Settings, run_labels, to_configs
    from lab.dashboard.pool import Refused
    from lab.dashboard.remote_session import RemoteSession

    pool = Pool(1, 1, memory=10**12)
    pool.start = lambda: pool
    pool.workers = [SimpleNamespace(dead=None, free=[], hosted={}, index=0)]  # every slot hosted
    s = Settings()
    with pytest.raises(Refused, match=r"^every training process of this server hosts as many pages as it can"):
        RemoteSession(pool, to_configs(s), run_labels(s), s.steps, s.steps_per_tick, s.eval_every, ask=5)
    assert pool.asks == {}


def test_once_every_worker_is_ready_the_memory_is_measured_again_without_theirs():
    """The memory at the first page was read while the workers were starting; each then holds ~0.75 GB of its
    own (torch, the default data), which the sessions cannot have. Before: never read again."""
    import threading

    gb = 10**9
    pool = Pool(2, 1, memory=20 * gb, available=lambda: 17 * gb)
    pool.workers = [SimpleNamespace(ready=threading.Event()) for _ in range(2)]
    pool.reserve("a", 2 * gb)
    pool.workers[0].ready.set()
    pool.worker_ready()
    assert pool.memory == 20 * gb  # not every worker is ready yet
    pool.workers[1].ready.set()
    pool.worker_ready()
    assert pool.memory == 19 * gb  # what is available now and what the sessions hold
    pool.available = lambda: 30 * gb
    pool.worker_ready()  # once: a worker started again later does not move it
    assert pool.memory == 19 * gb
    unbounded = Pool(1, 1, available=lambda: 1)
    unbounded.workers = [SimpleNamespace(ready=threading.Event())]
    unbounded.workers[0].ready.set()
    unbounded.worker_ready()
    assert unbounded.memory is None


def test_pages_reserving_at_once_never_hold_more_than_the_memory():
    """Six students' pages load together: each reservation sees the others' (one lock), so no two both fit the
    last free bytes."""
    import threading

    from lab.dashboard.pool import NoMemory

    pool = Pool(2, 3, memory=10)
    won, barrier = [], threading.Barrier(40)

    def page(i: int) -> None:
        barrier.wait()
        try:
            pool.reserve(f"page {i}", 3)
            won.append(i)
        except NoMemory:
            pass

    threads = [threading.Thread(target=page, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 3 and sum(pool.asks.values()) == 9
