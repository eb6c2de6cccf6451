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
