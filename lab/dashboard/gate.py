"""Where a page's Pause and a worker process's training meet: in memory both processes share.

A run trains in a worker process (:mod:`lab.dashboard.pool`); its page must answer a Pause at the
speed of a page, without waiting for the step the worker is computing (seconds on a busy machine,
the workers running at a lower priority). Each hosted session has a :class:`Gate`, two integers in
shared memory under one lock: ``claimed``, the last step the session may keep (a step claims its
number just before its commit, after its computation), and ``limit``, the last step it may claim.
Pause sets ``limit`` to ``claimed`` and reads it, in microseconds: that step is final. A step
computed meanwhile finds its claim refused at its commit and is rolled back
(:class:`lab.train.trainer.StepCancelled`), as if it had never begun; the page showed the step
count the run keeps. Start lifts the limit; Step allows ``steps_per_tick`` steps more, from where
the worker is when it gets to it, unless the page did something since (each action of the page
counts one ``epoch``: a Step the page paused before the worker began it trains nothing).

In a compare session (two runs), a step number is claimed once, by the first run that commits it:
the session's step count is the lowest of its runs'.
"""
from __future__ import annotations

from typing import Any

NO_LIMIT = 2**62


class Gate:
    """One session's (claimed, limit, epoch) in a shared array (slot ``slot``), under a shared lock."""

    def __init__(self, lock: Any, values: Any, slot: int) -> None:
        self.lock, self.values, self.at = lock, values, 3 * slot

    @property
    def claimed(self) -> int:
        with self.lock:
            return int(self.values[self.at])

    @property
    def epoch(self) -> int:
        with self.lock:
            return int(self.values[self.at + 2])

    def claim(self, step: int) -> bool:
        """May the session keep its step ``step`` (the worker asks just before the commit)?"""
        with self.lock:
            claimed, limit = self.values[self.at], self.values[self.at + 1]
            if step <= claimed:
                return True  # another run of the session claimed it
            if step == claimed + 1 and step <= limit:
                self.values[self.at] = step
                return True
            return False

    def stop(self) -> int:
        """No step after the ones claimed (Pause): the step count the session keeps."""
        with self.lock:
            self.values[self.at + 2] += 1
            claimed = int(self.values[self.at])
            self.values[self.at + 1] = claimed
            return claimed

    def allow(self) -> int:
        """Every step may be claimed (Start); the page's new epoch."""
        with self.lock:
            self.values[self.at + 2] += 1
            self.values[self.at + 1] = NO_LIMIT
            return int(self.values[self.at + 2])

    def bump(self) -> int:
        """A page action that changes no limit (Step: the worker allows its steps); the new epoch."""
        with self.lock:
            self.values[self.at + 2] += 1
            return int(self.values[self.at + 2])

    def allow_more(self, steps: int, epoch: int) -> bool:
        """``steps`` more steps from where the session is, unless the page acted after ``epoch`` (the worker,
        when it begins a Step the page asked for at ``epoch``)."""
        with self.lock:
            if self.values[self.at + 2] != epoch:
                return False
            self.values[self.at + 1] = min(NO_LIMIT, self.values[self.at] + steps)
            return True

    def restart(self, step: int) -> None:
        """The session's step count became ``step`` otherwise than by steps (reset, a run replaced): a
        running session may go on, a paused one may claim nothing until a page allows it."""
        with self.lock:
            self.values[self.at] = step
            if self.values[self.at + 1] < NO_LIMIT:
                self.values[self.at + 1] = step

    def clear(self) -> None:
        """At step 0, nothing allowed (a new session in this slot, or a Reset); the page's new epoch."""
        with self.lock:
            self.values[self.at] = self.values[self.at + 1] = 0
            self.values[self.at + 2] += 1


class Gates:
    """``size`` gates in shared memory, made before the worker process starts (which inherits them)."""

    def __init__(self, context: Any, size: int) -> None:
        self.size = size
        self.lock = context.Lock()
        self.values = context.RawArray("q", 3 * size)

    def gate(self, slot: int) -> Gate:
        if not 0 <= slot < self.size:
            raise ValueError(f"slot must be in [0, {self.size}), got {slot}")
        return Gate(self.lock, self.values, slot)
