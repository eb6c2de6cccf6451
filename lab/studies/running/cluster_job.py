"""One run as one submitit job, which a preemption or a time limit stops, checkpoints and requeues.

SLURM tells a job to stop with SIGTERM (preemption, the time limit) and, as submitit asks it, with SIGUSR2 some
time before the limit. :class:`RunJob` turns either signal into a request that :func:`.execution.execute` honours
between two steps: it saves the trainer's state in the run's work folder and raises ``Preempted``; the job then
hands over to submitit's own handler (the ``Checkpointable`` protocol), which pickles :meth:`RunJob.checkpoint`
(this same small job: its spec and its work folder, never the weights) and requeues the job (``scontrol
requeue`` on SLURM; the local executor restarts it). The requeued job finds the checkpoint and resumes the run
on the same trajectory: its record ends with the same weights and numbers as a run never stopped (on the CPU,
bit for bit; tests/test_study_slurm.py). A job that could not be requeued exits without a result; its
checkpoint stays, and the study's next call resumes the run from it.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from submitit.helpers import Checkpointable

from .execution import FAILURES, Preempted, execute
from .spec import RunSpec

PREEMPT_SIGNAL = "USR2"  # submitit's default (SUBMITIT_PREEMPT_SIGNAL), sent before the time limit


class StopSignals:
    """While entered: SIGTERM and submitit's signal only note that the job is to stop (``requested()``);
    submitit's handler of its signal, kept, is what :meth:`requeue` calls once the state is saved."""

    def __init__(self, what: str = "") -> None:
        self.received: Optional[int] = None
        self.what, self.shown = what, 0
        self.signals = [signal.SIGTERM, _submitit_signal()]
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        for s in self.signals:
            self.previous[s] = signal.signal(s, self._note)
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def _note(self, signum: int, frame: Any = None) -> None:
        self.received = signum

    def requested(self, step: int, total: int) -> bool:
        """Whether to stop now; also the job's progress line at each tenth of its steps (in its log)."""
        if step * 10 // total > self.shown:
            self.shown = step * 10 // total
            print(f"{self.what}: step {step} of {total}", flush=True)
        return self.received is not None

    def requeue(self) -> None:
        """submitit's checkpoint-and-requeue (its handler of its own signal: submitit installed it before this
        job began). Never returns: the process exits, to be started again, or ends without a result."""
        handler = self.previous.get(_submitit_signal())
        if not callable(handler) or getattr(handler, "__name__", "") != "checkpoint_and_try_requeue":
            raise RuntimeError("the run was stopped and checkpointed, but it is not running as a submitit job "
                               "that can be requeued: run the study again to resume it")
        try:
            handler(_submitit_signal(), None)
        except subprocess.CalledProcessError:  # SLURM requeues the job itself (preemption), or cannot: the
            pass  # checkpoint stays for the requeued job or the next call
        sys.exit(-1)  # not an Exception: submitit writes no result, the job is not taken as finished


def _submitit_signal() -> int:
    from submitit.core.job_environment import JobEnvironment

    return JobEnvironment._usr_sig()


class RunJob(Checkpointable):
    """A run of a study as a submitit job: :func:`.execution.execute` of ``spec`` checkpointing to ``work``.
    Returns {"record": the run's record} or {"error": "Type: message"} (the run's own failure, as the local
    runner lists it); stopped, it is requeued and resumes (see the module)."""

    def __init__(self, spec: RunSpec, threads: int, device: Optional[str], session: str, curve_every: int,
                 work: str) -> None:
        self.spec, self.threads, self.device, self.session = spec, threads, device, session
        self.curve_every, self.work = curve_every, work

    def __call__(self) -> dict[str, Any]:
        what = f"{self.spec.study}: {self.spec.setting}, seed {self.spec.seed}"
        with StopSignals(what) as stop:
            try:
                record = execute(self.spec, self.threads, self.device, session=self.session,
                                 curve_every=self.curve_every, work=Path(self.work), stop=stop.requested)
            except Preempted as e:
                print(f"{what}: {e} (signal "
                      f"{signal.Signals(stop.received).name})", flush=True)
                stop.requeue()
                raise  # not reached
            except FAILURES as e:
                return {"error": f"{type(e).__name__}: {e}"}
        return {"record": record}
