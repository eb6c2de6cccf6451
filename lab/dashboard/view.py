"""What a page draws of a :class:`~lab.dashboard.session.TrainingSession`: a copy published after
every change (under the session's lock), read without the lock while the training thread works."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class RunView:
    """What the page shows of one run: copies, safe to read while the worker trains."""

    label: str
    step_count: int
    history: list[dict[str, Any]]
    last_eval: dict[str, Any]


@dataclass(frozen=True)
class View:
    """The session as of its last change (``TrainingSession.view``)."""

    status: str
    running: bool
    has_model: bool
    step_count: int
    target_steps: int
    error: Optional[str]
    notice: Optional[str]
    runs: tuple[RunView, ...]
    # Sessions trained by a worker process (lab.dashboard.remote_session): what the page waits for, in words.
    queue: Optional[str] = None  # "waiting for a free trainer: 2nd in the queue, about 40 s"
    busy: Optional[str] = None  # work asked of the worker and not answered yet: "building the model"

    @property
    def progress(self) -> float:
        return min(1.0, self.step_count / self.target_steps)
