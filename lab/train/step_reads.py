"""How a training step's numbers reach the host: one protocol per Trainer, chosen when it is built.

Both protocols see a step through the same four calls, in this order: ``begin_step``; ``check`` for each of
the step's three finiteness checks (embeddings, loss, gradient norm: host_reads.FLAG_NAMES); then either
``after_failure`` (the step failed and was rolled back) or ``after_step`` (the step committed). Both fill a
step's record with floats in place and hand it out only once it is read: ``after_step`` returns the record or
None, ``read`` the newest record read. So no caller ever holds a record with tensors in it.

- :class:`ImmediateReads` (the CPU; fp16 anywhere, whose scaler reads its own state): each check reads its
  value at once and raises NonFiniteLossError at the first non-finite one, before the step commits; a
  committed step's numbers are read as it ends.
- :class:`DeferredReads` (an accelerator, ``RuntimePlan.deferred_reads``): a step reads nothing from the
  device (host_reads.py says why). Its checks become flags; its numbers and flags wait in a Pending record
  until a step logs (or ``step(n)`` returns, or the run saves or evaluates, which call ``read``), then all are
  read in one transfer. A non-finite step found then is reported exactly as the immediate protocol would
  have: the state goes back to the copy taken before the first unread step, the steps before the bad one
  are trained again under the immediate protocol, and NonFiniteLossError names the bad step.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Protocol, Union

import torch
from torch import Tensor

from .checkpoint import NonFiniteLossError
from .evaluation import batch_ap
from .host_reads import EMBEDDINGS_NOT_FINITE, Pending, clone_state, read_pending


class StepOwner(Protocol):
    """What the reads use of their Trainer (lab.train.trainer): its progress, state, step and records."""

    step_count: int

    def _state(self) -> dict[str, Any]: ...

    def _load_state(self, state: dict[str, Any]) -> None: ...

    def _train_step(self, reads: Optional["StepReads"] = None) -> Optional[dict[str, Any]]: ...

    def _remember(self, record: dict[str, Any]) -> None: ...

    def _log(self, record: dict[str, Any]) -> None: ...

    def _last_good(self) -> Optional[str]: ...


def step_reads(owner: StepOwner, deferred: bool, log_every: int) -> "StepReads":
    """The protocol of a trainer whose plan says ``deferred`` (RuntimePlan.deferred_reads)."""
    return DeferredReads(owner, log_every) if deferred else ImmediateReads(owner, log_every)


class StepReads:
    """What both protocols share: the committed steps not read yet, their one read, and the records it fills."""

    def __init__(self, owner: StepOwner, log_every: int) -> None:
        self.owner, self.log_every = owner, log_every
        self.pending: list[Pending] = []  # committed steps whose numbers are not read yet
        self.flags: list[Tensor] = []  # this step's checks so far, True where not finite (FLAG_NAMES' order)
        self.newest: Optional[dict[str, Any]] = None  # the record of the newest step read

    def logs(self, step: int) -> bool:
        return step % self.log_every == 0 or step == 1

    def begin_step(self) -> None:
        self.flags = []

    def check(self, bad: Tensor, what: Union[str, Callable[[], str]]) -> None:
        """One of the step's checks: ``bad`` (0-dim bool) is True where its value is not finite; ``what``
        names the value in NonFiniteLossError (a callable when naming it reads the value)."""
        self.flags.append(bad)

    def after_failure(self, error: BaseException) -> None:
        """The step failed before its commit (other than cancelled) and was rolled back; ``error`` is raised next."""

    def after_step(self, record: dict[str, Any], embeddings: Tensor, labels: Tensor,
                   started: float) -> Optional[dict[str, Any]]:
        """The step committed: its ``record`` (numbers still tensors) joins the unread steps; the record,
        read, if this step reads them, else None."""
        self.pending.append(Pending(record, embeddings, labels, torch.stack(self.flags), started))
        return self.read() if self._reads_after(record["step"]) else None

    def read(self) -> Optional[dict[str, Any]]:
        """Read the unread steps' numbers (one transfer), remember and log their records; the newest record
        read (None before the first step). A non-finite step goes back to the state before it and raises
        NonFiniteLossError, as the immediate protocol would have."""
        pending, self.pending = self.pending, []
        if not pending:
            return self.newest
        values, bad = read_pending(pending)
        if bad is not None:
            index, what = bad
            step = pending[index].record["step"]
            self._go_back_before(step)
            raise NonFiniteLossError(step, what, self.owner._last_good())
        seconds = self._seconds_per_step(pending)
        for entry, numbers in zip(pending, values):
            record = entry.record
            record.update(numbers, batch_ap=batch_ap(entry.embeddings, entry.labels))
            if seconds is not None:
                record.update(seconds_per_step=seconds, images_per_second=len(entry.embeddings) / seconds)
            self.owner._remember(record)
            if self.logs(record["step"]):
                self.owner._log(record)
        self.newest = pending[-1].record
        self._all_read()
        return self.newest

    def clear(self) -> None:
        """Forget the unread steps (a resume replaces the state they came from)."""
        self.pending = []

    # The protocols' differences, below.
    def _reads_after(self, step: int) -> bool:
        raise NotImplementedError

    def _go_back_before(self, step: int) -> None:
        raise NotImplementedError

    def _seconds_per_step(self, pending: list[Pending]) -> Optional[float]:
        return None  # each step keeps the time it measured itself

    def _all_read(self) -> None:
        pass


class ImmediateReads(StepReads):
    """Read every value when it is made; a non-finite one raises before the step commits."""

    def check(self, bad: Tensor, what: Union[str, Callable[[], str]]) -> None:
        super().check(bad, what)
        if bad:
            raise NonFiniteLossError(self.owner.step_count + 1, what if isinstance(what, str) else what(),
                                     self.owner._last_good())

    def _reads_after(self, step: int) -> bool:
        return True

    def _go_back_before(self, step: int) -> None:
        # Unreachable: a non-finite value raised in its check, so no committed step here holds one.
        raise AssertionError(f"step {step} committed a non-finite value under the immediate protocol")


class DeferredReads(StepReads):
    """Read at the steps that log; hold a copy of the state before the first unread step to go back to."""

    def __init__(self, owner: StepOwner, log_every: int) -> None:
        super().__init__(owner, log_every)
        self.snapshot: Optional[dict[str, Any]] = None  # the state before the first unread step
        self.immediate = ImmediateReads(owner, log_every)  # what the steps before a bad one are trained again with

    def begin_step(self) -> None:
        super().begin_step()
        if not self.pending:
            self.snapshot = clone_state(self.owner._state())  # where a non-finite step found later goes back to

    def after_failure(self, error: BaseException) -> None:
        """An earlier step's non-finite value (weights turned NaN make the lab's loss refuse the next batch) or
        this step's embeddings are reported as the immediate protocol does."""
        embeddings_bad = bool(self.flags[0]) if self.flags else False
        self.read()  # raises for an unread non-finite step: the cause of this error
        if embeddings_bad:
            raise NonFiniteLossError(self.owner.step_count + 1, EMBEDDINGS_NOT_FINITE,
                                     self.owner._last_good()) from error

    def clear(self) -> None:
        super().clear()
        self.snapshot = None

    def _reads_after(self, step: int) -> bool:
        return self.logs(step)

    def _go_back_before(self, step: int) -> None:
        """Back to the state before the unread steps, then train up to ``step - 1`` under the immediate protocol."""
        snapshot, self.snapshot = self.snapshot, None
        self.owner._load_state(snapshot)
        while self.owner.step_count < step - 1:
            self.owner._train_step(self.immediate)

    def _seconds_per_step(self, pending: list[Pending]) -> Optional[float]:
        # The read waited for the device: the steps' real time, together.
        return (time.perf_counter() - pending[0].started) / len(pending)

    def _all_read(self) -> None:
        self.snapshot = None
