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


STATUS = {"new": "press Start or Step to build the model and train", "running": "training",
          "paused": "paused", "done": "finished", "error": "stopped by an error"}


def status_text(v: View) -> str:
    """The progress text of a page (the dashboard's and the class page's): "Step 12 / 1000 · training",
    with the queue, the work asked of a worker or a run catching up the other."""
    text = f"Step {v.step_count} / {v.target_steps} · {STATUS[v.status]}"
    if v.queue:
        text += f" · {v.queue}"
    elif v.running and not v.has_model:
        text += " · building the model"
    elif v.busy:
        text += f" · {v.busy}…"
    ahead = max(r.step_count for r in v.runs)
    if ahead > v.step_count:
        behind = " and ".join(r.label for r in v.runs if r.step_count < ahead)
        text += f" · {behind} catching up (the other run waits at step {ahead})"
    return text


def before_curves(v: View, where: str = "") -> Optional[str]:
    """What a page says instead of the training curves while there are none to draw (Markdown; "" when the
    progress says it), else None. ``where``: where the buttons are (" in the sidebar")."""
    if v.has_model and v.status != "new" and any(r.history for r in v.runs):
        return None
    if v.error:
        return ""  # the progress shows it
    if v.running or v.busy:
        return "Training the first step…" if v.has_model else "Building the model in a training process…"
    if v.status == "paused":
        return "Paused before the first step: press **Start** to go on."
    return f"Nothing trained yet: press **Start** (continuous) or **Step** (one tick){where}."
