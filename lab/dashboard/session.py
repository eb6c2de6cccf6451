"""One browser session's training: one run, or two side by side from the same seed (compare mode).

The Streamlit page keeps a :class:`TrainingSession` in ``st.session_state`` and calls ``tick()``
from a timed fragment; everything else here is plain Python, tested without Streamlit.

* Trainers are built lazily (first Start, Step or view that needs a model), then evaluated once
  at step 0 so every curve starts from the untrained model.
* ``advance`` runs a few steps per run and evaluates on a small held-out subset every
  ``eval_every`` steps; a failure (NaN loss, bad data, ...) stops training and becomes
  ``error`` (a sentence), the trainer having rolled the step back.
* Compare mode: both trainers share the datasets (steps never run concurrently), and each keeps
  its own random-number state, swapped in around its steps, so run B draws exactly the
  augmentations it would draw alone and two runs with the same loss have the same curves.
* Every method that touches the trainers holds one lock. Streamlit's fast reruns start a new
  script thread for a button click while the old one may still be inside a tick: without the
  lock, Pause or Step could run beside ``trainer.step`` (measured: a tick cut after one of its
  two steps). With it, a click waits for the tick in progress, at most a few steps.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Optional, Sequence, TypeVar

from ..train import NonFiniteLossError, Trainer, TrainConfig, config_diff
from ..train.checkpoint import rng_state, set_rng_state
from ..train.loading import build_datasets
from .heldout import HeldOut, snapshot

F = TypeVar("F", bound=Callable[..., Any])


def locked(method: F) -> F:
    """Run ``method`` holding the session's lock (re-entrant: start() calls build())."""
    @functools.wraps(method)
    def wrapper(self: "TrainingSession", *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


class Run:
    """One configuration, its trainer once built, its random state and its held-out snapshot."""

    def __init__(self, label: str, config: TrainConfig) -> None:
        self.label, self.config = label, config
        self.reset()

    def reset(self) -> None:
        self.trainer: Optional[Trainer] = None
        self.rng: Optional[dict] = None
        self._snapshot: Optional[HeldOut] = None
        self.projections: dict[tuple[str, int], list[list[float]]] = {}  # (method, step) -> points

    @property
    def step_count(self) -> int:
        return self.trainer.step_count if self.trainer is not None else 0

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.trainer.history if self.trainer is not None else []

    def last_eval(self) -> dict[str, Any]:
        return next((r for r in reversed(self.history) if r.get("kind") == "eval"), {})

    def held_out(self, max_lag: int = 0) -> HeldOut:
        """Embeddings of the held-out subset, recomputed when they are more than ``max_lag`` steps
        old (0: whenever the model changed; a live view passes the evaluation period)."""
        if self._snapshot is None or self.step_count - self._snapshot.step > max_lag \
                or self._snapshot.step > self.step_count:
            self._snapshot = snapshot(self.trainer)
        return self._snapshot


class TrainingSession:
    """Start / Pause / Step / Reset over one or two runs, and the schedule of a tick."""

    def __init__(self, configs: Sequence[TrainConfig], labels: Sequence[str], target_steps: int,
                 steps_per_tick: int, eval_every: int) -> None:
        self.runs = [Run(label, cfg) for label, cfg in zip(labels, configs)]
        self.target_steps, self.steps_per_tick, self.eval_every = target_steps, steps_per_tick, eval_every
        self.running = False
        self.error: Optional[str] = None
        self.notice: Optional[str] = None
        self.lock = threading.RLock()

    # ------------------------------------------------------------------ state
    @property
    def built(self) -> bool:
        return all(r.trainer is not None for r in self.runs)

    @property
    def step_count(self) -> int:
        return min(r.step_count for r in self.runs)

    @property
    def status(self) -> str:
        """"error", "new" (no model yet), "done", "running" or "paused"."""
        if self.error:
            return "error"
        if not self.built:
            return "new"
        if self.step_count >= self.target_steps:
            return "done"
        return "running" if self.running else "paused"

    @property
    def progress(self) -> float:
        return min(1.0, self.step_count / self.target_steps)

    def matches(self, configs: Sequence[TrainConfig], labels: Sequence[str]) -> bool:
        """True when ``configs`` would train exactly these runs (run length and the like may differ)."""
        if len(configs) != len(self.runs) or list(labels) != [r.label for r in self.runs]:
            return False
        return all(not config_diff(r.config.to_dict(), c.to_dict()) for r, c in zip(self.runs, configs))

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

    @locked
    def pause(self) -> None:
        self.running = False

    @locked
    def step(self) -> None:
        """One tick by hand (training pauses: a step is for looking closely)."""
        self.running = False
        self.notice = None
        if self.build():
            self.advance(self.steps_per_tick)

    @locked
    def reset(self) -> None:
        for run in self.runs:
            run.reset()
        self.running, self.error, self.notice = False, None, None

    @locked
    def tick(self) -> bool:
        """What the timed fragment calls: a few steps if running. True if training moved."""
        if not self.running:
            return False
        before = self.step_count
        self.advance(self.steps_per_tick)
        if self.status != "running":
            self.running = False
        return self.step_count > before

    @locked
    def snapshots(self, max_lag: int = 0) -> list[tuple[Run, HeldOut]]:
        """Each run with its held-out snapshot (see :meth:`Run.held_out`); builds the runs if needed."""
        return [(run, run.held_out(max_lag)) for run in self.runs] if self.build() else []

    # ------------------------------------------------------------------ work
    @locked
    def build(self) -> bool:
        """Build the missing trainers (shared datasets) and evaluate them at step 0. False on error."""
        if self.error:
            return False
        if self.built:
            return True
        try:
            train_set, test_set, eval_transform = build_datasets(self.runs[0].config)
            for run in self.runs:
                run.trainer = Trainer(run.config, train_set=train_set, test_set=test_set,
                                      eval_transform=eval_transform)
                run.rng = rng_state()  # right after the trainer seeded everything
                run.trainer.evaluate()
        except Exception as e:  # noqa: BLE001 - any failure becomes a message on the page
            for run in self.runs:
                run.trainer = None
            self._fail("could not build the model", e)
            return False
        return True

    @locked
    def advance(self, steps: int) -> None:
        """Up to ``steps`` steps of every run (never past the target), evaluating on schedule."""
        steps = min(steps, self.target_steps - self.step_count)
        if steps < 1 or self.error:
            return
        for run in self.runs:
            try:
                self._train(run, steps)
            except Exception as e:  # noqa: BLE001
                self.running = False
                self._fail(f"{run.label}: training stopped", e)
                return

    def _train(self, run: Run, steps: int) -> None:
        start = run.step_count
        set_rng_state(run.rng)
        try:
            run.trainer.step(steps)
        finally:
            run.rng = rng_state()
        end = run.step_count
        if end // self.eval_every > start // self.eval_every or end >= self.target_steps:
            run.trainer.evaluate()

    def _fail(self, what: str, error: Exception) -> None:
        detail = str(error) if isinstance(error, (ValueError, NonFiniteLossError, FileNotFoundError)) \
            else f"{type(error).__name__}: {error}"
        self.error = f"{what}: {detail}"
