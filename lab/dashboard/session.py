"""One page's training: one run, or two side by side from the same seed (compare mode).

The Streamlit page keeps a :class:`TrainingSession` (and the process-wide ``session_registry`` keeps it
for a browser reload); everything here is plain Python, tested without Streamlit.

* Trainers are built lazily (first Start, Step or view that needs a model). Every curve starts from
  the untrained model: a copy of it is kept at the build and evaluated right after the first step,
  published first (``_one_step``), so that a Start on a busy machine shows step 1 without waiting for
  the step-0 evaluation (0.8 CPU s against 0.13 for a step of the default settings; issue 46).
* ``advance`` runs a few steps per run and evaluates on a small held-out subset every
  ``eval_every`` steps; a failure (NaN loss, bad data, ...) stops training and becomes
  ``error`` (a sentence), the trainer having rolled the step back.
* While running, a background thread (:class:`~lab.dashboard.worker.Worker`) calls ``tick``;
  the page only reads :attr:`view`, a copy published after every change, so drawing never
  waits for training and training never waits for drawing.
* ``reconfigure`` keeps every run whose configuration is unchanged: a new loss for run B
  restarts run B only; run A keeps its steps and waits (``advance`` trains the runs that are
  behind first) until B has caught up.
* Compare mode: both trainers share the datasets (steps never run concurrently), and each owns
  its random generators (:mod:`lab.train.randomness`), so run B draws exactly what it would
  draw alone and two runs with the same loss have the same curves, whatever else trains.
* Every method that touches the trainers holds one lock, so a click (Step, a new setting)
  waits for the tick in progress, at most a few steps and their evaluations, and never runs
  beside it. Pause touches no trainer: it waits only for the training step in flight (a second
  lock around each step), so the step it shows is final and it takes effect within one step,
  whatever evaluation or held-out snapshot the tick is computing (they finish on their own and
  add their point at that step).
"""
from __future__ import annotations

import copy
import functools
import threading
import time
from typing import Any, Callable, Optional, Sequence, TypeVar

from torch import nn

from ..train import NonFiniteLossError, Trainer, TrainConfig, config_diff
from ..train.trainer import StepCancelled
from .datasets import shared_datasets
from .gate import Gate
from .heldout import HeldOut, snapshot
from .view import RunView, View
from .worker import Worker

F = TypeVar("F", bound=Callable[..., Any])
HELDOUT_WANTED_SECONDS = 30.0  # a held-out view asked this recently: the worker refreshes its snapshots


def locked(method: F) -> F:
    """Run ``method`` holding the session's lock (re-entrant: start() calls build()), then
    publish the new :attr:`TrainingSession.view`."""
    @functools.wraps(method)
    def wrapper(self: "TrainingSession", *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            try:
                return method(self, *args, **kwargs)
            finally:
                self._publish()
    return wrapper  # type: ignore[return-value]


class Run:
    """One configuration, its trainer once built, its random state and its held-out snapshot."""

    def __init__(self, label: str, config: TrainConfig) -> None:
        self.label, self.config = label, config
        self.reset()

    def reset(self) -> None:
        self.trainer: Optional[Trainer] = None
        self.initial: Optional[nn.Module] = None  # the untrained model, until its step-0 evaluation (_one_step)
        self._snapshot: Optional[HeldOut] = None
        self.projections: dict[tuple[str, int], list[list[float]]] = {}  # (method, step) -> points

    def same(self, label: str, config: TrainConfig) -> bool:
        """True when (label, config) would train exactly this run (run length and the like may differ)."""
        return label == self.label and not config_diff(self.config.to_dict(), config.to_dict())

    @property
    def step_count(self) -> int:
        return self.trainer.step_count if self.trainer is not None else 0

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.trainer.history if self.trainer is not None else []

    def last_eval(self) -> dict[str, Any]:
        return _last_eval(self.history)

    def latest_snapshot(self) -> Optional[HeldOut]:
        """The held-out snapshot of the current model, whatever its age (None before the first)."""
        return self._snapshot if self.trainer is not None else None

    def fresh_snapshot(self, max_lag: int) -> Optional[HeldOut]:
        """The held-out snapshot if it is at most ``max_lag`` steps old, else None."""
        h = self._snapshot
        if h is None or self.trainer is None or not 0 <= self.step_count - h.step <= max_lag:
            return None
        return h

    def held_out(self, max_lag: int = 0) -> HeldOut:
        """Embeddings of the held-out subset, recomputed when they are more than ``max_lag`` steps
        old (0: whenever the model changed; a live view passes the evaluation period). Call it
        holding the session's lock: it runs the model."""
        h = self.fresh_snapshot(max_lag)
        if h is None:
            h = self._snapshot = snapshot(self.trainer)
        return h


class TrainingSession:
    """Start / Pause / Step / Reset over one or two runs, and the schedule of a tick.

    ``background=False`` (tests of the tick logic): nothing trains unless ``tick`` is called.
    """

    def __init__(self, configs: Sequence[TrainConfig], labels: Sequence[str], target_steps: int,
                 steps_per_tick: int, eval_every: int, background: bool = True) -> None:
        self.runs = [Run(label, cfg) for label, cfg in zip(labels, configs)]
        self.target_steps, self.steps_per_tick, self.eval_every = target_steps, steps_per_tick, eval_every
        self.running = False
        self.error: Optional[str] = None
        self._error_run: Optional[str] = None  # the run the error came from (None: the whole session)
        self.notice: Optional[str] = None
        self.lock = threading.RLock()
        self._stepping = threading.Lock()  # held around each training step only: what Pause waits for
        self._changed = threading.Condition()  # also orders publications: the last view is the latest state
        self._data: Optional[tuple[dict, tuple]] = None  # (data config, (train_set, test_set, eval_transform))
        self._heldout_asked = -float("inf")
        self.gate: Optional[Gate] = None  # in a worker process: where the page's Pause meets the steps (gate.py)
        self.on_publish: Optional[Callable[["TrainingSession"], None]] = None  # a worker process sends the view
        self.worker = Worker(self) if background else None
        self._publish()

    # ------------------------------------------------------------------ state
    @property
    def built(self) -> bool:
        return all(r.trainer is not None for r in self.runs)

    @property
    def has_model(self) -> bool:
        """At least one run is built (a run restarted beside a kept one is built on the next tick)."""
        return any(r.trainer is not None for r in self.runs)

    @property
    def step_count(self) -> int:
        return min(r.step_count for r in self.runs)

    @property
    def status(self) -> str:
        """"error", "new" (no model yet), "done", "running" or "paused"."""
        if self.error:
            return "error"
        if not self.has_model:
            return "new"
        if self.step_count >= self.target_steps:
            return "done"
        return "running" if self.running else "paused"

    @property
    def progress(self) -> float:
        return min(1.0, self.step_count / self.target_steps)

    @property
    def view(self) -> View:
        """The latest published copy of the session: what a page draws, without the lock."""
        return self._view

    def _publish(self) -> None:
        # Under the condition's lock: the worker (after a step) and Pause (from a click) publish
        # concurrently, and a view built earlier must never replace a later one.
        with self._changed:
            runs = []
            for r in self.runs:
                history = list(r.history)  # a copy first: the worker may append meanwhile
                runs.append(RunView(r.label, r.step_count, history, _last_eval(history)))
            self._view = View(self.status, self.running, self.has_model, self.step_count, self.target_steps,
                              self.error, self.notice, tuple(runs))
            self._changed.notify_all()
            if self.on_publish is not None:
                self.on_publish(self)

    def wait(self, predicate: Callable[[View], bool], timeout: float) -> bool:
        """Block until ``predicate(view)`` holds (checked at every publication) or ``timeout`` seconds
        pass; its last value. For tests and scripts: the page never waits."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._view), timeout)

    def close(self) -> None:
        """Pause and wait for the background thread to end (a session dropped for good)."""
        if self.worker is not None:
            self.worker.stop()
        else:
            self.pause()

    def touch(self) -> None:
        """A page shows this session: keep (or start again) its background training."""
        if self.worker is not None:
            self.worker.seen()

    def matches(self, configs: Sequence[TrainConfig], labels: Sequence[str]) -> bool:
        """True when ``configs`` would train exactly these runs (run length and the like may differ)."""
        return len(configs) == len(self.runs) and all(
            r.same(label, c) for r, label, c in zip(self.runs, labels, configs))

    @locked
    def reconfigure(self, configs: Sequence[TrainConfig], labels: Sequence[str]) -> list[str]:
        """Train ``configs`` from now on, keeping every run whose label and configuration are
        unchanged (its model, steps and history). The labels of the runs that start from step 0;
        when no run is kept, the session is new (not running)."""
        old = list(self.runs)
        runs = [next((r for r in old if r.same(label, c)), None) or Run(label, c) for label, c in zip(labels, configs)]
        restarted = [r.label for r in runs if r not in old]
        if not restarted and len(runs) == len(old):
            return []
        self.runs = runs
        kept = [r for r in runs if r in old]
        if not kept:
            self.running, self.error, self._error_run, self.notice = False, None, None, None
        elif self._error_run is not None and self._error_run not in {r.label for r in kept}:
            self.error, self._error_run = None, None  # the failed run is gone
        if self.running and self.worker is not None:
            self.worker.ensure()
        return restarted

    def set_schedule(self, target_steps: int, steps_per_tick: int, eval_every: int) -> None:
        """Change what does not alter the trajectory: run length, steps per tick, evaluation period."""
        self.target_steps, self.steps_per_tick, self.eval_every = target_steps, steps_per_tick, eval_every

    # ------------------------------------------------------------------ buttons
    @locked
    def start(self) -> None:
        self.notice = None
        if not self.build():
            return
        if self.step_count >= self.target_steps:
            self.notice = f"the run has reached its {self.target_steps} steps: raise 'steps' to train further"
            return
        self.running = True
        if self.worker is not None:
            self.worker.ensure()

    def pause(self, wait: bool = True) -> None:
        """Stop training at the next step boundary. Waits for the step in flight only (not for the
        session's lock: an evaluation in progress finishes on its own, at the same step), so the
        published view's step count is final. ``wait=False`` (a worker process, whose page has
        already closed the session's gate): the step in flight is cancelled at its commit instead."""
        self.running = False
        if not wait:
            self._publish()
            return
        with self._stepping:
            self._publish()

    @locked
    def step(self) -> None:
        """One tick by hand (training pauses: a step is for looking closely)."""
        self.running = False
        self.notice = None
        self.advance(self.steps_per_tick)

    @locked
    def reset(self) -> None:
        for run in self.runs:
            run.reset()
        self.running, self.error, self._error_run, self.notice = False, None, None, None

    @locked
    def tick(self) -> bool:
        """Up to ``steps_per_tick`` steps while running (what the background worker calls), one
        step of every run at a time: a Pause stops it at the next step. True if training moved."""
        moved = False
        for _ in range(self.steps_per_tick):
            if not self.running or not self._one_step(while_running=True):
                break
            moved = True
        if self.status != "running":
            self.running = False
        return moved

    def snapshots(self, max_lag: int = 0) -> list[tuple[Run, HeldOut]]:
        """Each run with its held-out snapshot (see :meth:`Run.held_out`); builds the runs if needed.
        A snapshot recent enough is returned without waiting for the tick in progress; while a
        view asks for them, the worker refreshes them at every evaluation."""
        self._heldout_asked = time.monotonic()
        runs = list(self.runs)
        fresh = [r.fresh_snapshot(max_lag) for r in runs]
        if self.running and not all(h is not None for h in fresh):
            # Never wait for the worker's tick from the page (its script thread would hold up a
            # Pause click): the latest snapshots, refreshed by the worker at its next evaluation.
            fresh = [r.latest_snapshot() for r in runs]
        if all(h is not None for h in fresh):
            return list(zip(runs, fresh))  # type: ignore[arg-type]
        return self._locked_snapshots(max_lag)

    @locked
    def _locked_snapshots(self, max_lag: int) -> list[tuple[Run, HeldOut]]:
        return [(run, run.held_out(max_lag)) for run in self.runs] if self.build() else []

    # ------------------------------------------------------------------ work
    @locked
    def build(self) -> bool:
        """Build the missing trainers (shared datasets), keeping a copy of each untrained model for its
        step-0 evaluation. False on error."""
        if self.error:
            return False
        for run in self.runs:
            if run.trainer is not None:
                continue
            try:
                train_set, test_set, eval_transform = self._datasets(run.config)
                run.trainer = Trainer(run.config, train_set=train_set, test_set=test_set,
                                      eval_transform=eval_transform)
                run.initial = copy.deepcopy(run.trainer.model)  # evaluated after the first step
            except Exception as e:  # noqa: BLE001 - any failure becomes a message on the page
                run.trainer = None
                self.running = False
                self._fail("could not build the model", e, run)
                return False
        return True

    def _datasets(self, config: TrainConfig) -> tuple:
        """The datasets of ``config``, shared by every run that differs from it only in its loss (drawn or
        read once per process for every session: :func:`lab.dashboard.datasets.shared_datasets`)."""
        key = {k: v for k, v in config.to_dict().items() if k not in ("loss", "loss_kwargs")}
        if self._data is None or self._data[0] != key:
            self._data = (key, shared_datasets(config))
        return self._data[1]

    def test_set(self):
        """The held-out split the views show (its images: thumbnails, names)."""
        return self._datasets(self.runs[0].config)[1]

    @locked
    def advance(self, steps: int) -> None:
        """Up to ``steps`` steps (never past the target), evaluating on schedule. A run ahead of the
        others (it was kept when they restarted) waits until they have caught up with it."""
        for _ in range(steps):
            if not self._one_step(while_running=False):
                return

    def _one_step(self, while_running: bool) -> bool:
        """One step of each run at the lowest step count (the others wait), then the evaluations
        that fell due. ``while_running``: not if a Pause came first. False if nothing trained
        (target reached, an error, paused). Call holding the session's lock."""
        goal = min(self.step_count + 1, self.target_steps)
        if goal <= self.step_count or self.error or not self.build():
            return False
        behind = [run for run in self.runs if run.step_count < goal]
        with self._stepping:
            if while_running and not self.running:
                return False
            for run in behind:
                gate = self.gate  # a step the page's Pause came before is cancelled at its commit
                run.trainer.may_commit = None if gate is None else functools.partial(gate.claim, goal)
                if not self._guarded(run, "training stopped", self._train, run, goal - run.step_count):
                    return False
        # Outside the step lock: a Pause does not wait for evaluations. The untrained models' evaluations
        # first (their records before the step's own), once the page can show the step.
        initial = [run for run in behind if run.initial is not None]
        if initial:
            self._publish()
        for run in initial:
            if not self._guarded(run, "evaluation failed", self._evaluate_initial, run):
                return False
        for run in behind:
            if (run.step_count % self.eval_every == 0 or run.step_count >= self.target_steps) and \
                    not self._guarded(run, "evaluation failed", self._evaluate, run):
                return False
        return True

    def _guarded(self, run: Run, what: str, work: Callable[..., None], *args: Any) -> bool:
        """``work(*args)``; an exception stops training and becomes the session's error (False)."""
        try:
            work(*args)
            return True
        except StepCancelled:  # the page paused the session while the step was computed: nothing happened
            self.running = False
            return False
        except Exception as e:  # noqa: BLE001 - any failure becomes a message on the page
            self.running = False
            self._fail(f"{run.label}: {what}", e, run)
            return False

    def _train(self, run: Run, steps: int) -> None:
        run.trainer.step(steps)

    def _evaluate_initial(self, run: Run) -> None:
        model, run.initial = run.initial, None
        run.trainer.evaluate(model=model, step=0)

    def _evaluate(self, run: Run) -> None:
        run.trainer.evaluate()
        if time.monotonic() - self._heldout_asked < HELDOUT_WANTED_SECONDS:
            run.held_out()  # here, not in the page's drawing: a view open while training stays fast

    def _fail(self, what: str, error: Exception, run: Optional[Run] = None) -> None:
        detail = str(error) if isinstance(error, (ValueError, NonFiniteLossError, FileNotFoundError)) \
            else f"{type(error).__name__}: {error}"
        self.error = f"{what}: {detail}"
        self._error_run = run.label if run is not None else None


def _last_eval(history: list[dict[str, Any]]) -> dict[str, Any]:
    return next((r for r in reversed(history) if r.get("kind") == "eval"), {})
