"""What the autograde wrapper remembers in an nbgrader course: the hand-ins as collected, and each outcome.

``COURSE/ranklab_autograde/handins.json``  {assignment: {student: {"timestamp", "files"}}}: the SHA-256 of
    every file of ``submitted/STUDENT/ASSIGNMENT/``, taken the first time the wrapper sees each collect (a new
    ``timestamp.txt`` is a new collect). Nothing a student's code runs in can write the course folder, so a
    later difference is a change made on the instructor's side: the cross-check reports it.
``COURSE/ranklab_autograde/ASSIGNMENT.json``  {student: outcome}: the trusted scores, what the student's own
    notebook run claimed, the hand-in's changes and the ``lab_code`` signal, for the cross-check.

Both are written by the trusted side only, atomically.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from ..core.files import write_text_atomic
from .handin import fingerprint

FOLDER = "ranklab_autograde"
MAX_TIMESTAMP = 200  # bytes of nbgrader's timestamp.txt read


def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a record of lab.grading.autograde ({exc}); move it away to start over") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a record of lab.grading.autograde; move it away to start over")
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def timestamp(folder: Path) -> str:
    """nbgrader's ``timestamp.txt`` of a hand-in ('' when there is none), read as bounded text."""
    path = folder / "timestamp.txt"
    if path.is_symlink() or not path.is_file():
        return ""
    with open(path, "rb") as f:
        return f.read(MAX_TIMESTAMP).decode("utf-8", "replace").strip()


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """'NAME changed' / 'NAME added' / 'NAME removed' for every difference of two fingerprints."""
    out = [f"{n} changed" for n in sorted(set(before) & set(after)) if before[n] != after[n]]
    out += [f"{n} added" for n in sorted(set(after) - set(before))]
    return out + [f"{n} removed" for n in sorted(set(before) - set(after))]


class Handins:
    """The fingerprints of the hand-ins of one course."""

    def __init__(self, course: Path) -> None:
        self.path = Path(course) / FOLDER / "handins.json"
        self.data = _load(self.path)

    def check(self, assignment: str, student: str, folder: Path) -> tuple[list[str], bool]:
        """(what changed in ``folder`` since its collect was recorded, whether it was recorded now): a hand-in seen
        for the first time, or with a new timestamp (collected again), is recorded as it is."""
        now, stamp = fingerprint(folder), timestamp(folder)
        known: Optional[dict] = self.data.get(assignment, {}).get(student)
        if known is None or known.get("timestamp") != stamp:
            self.data.setdefault(assignment, {})[student] = {"timestamp": stamp, "files": now}
            _save(self.path, self.data)
            return [], True
        return changes(known["files"], now), False

    def recorded(self, assignment: str, student: str) -> Optional[dict[str, str]]:
        entry = self.data.get(assignment, {}).get(student)
        return None if entry is None else entry["files"]


def outcomes_path(course: Path, assignment: str) -> Path:
    return Path(course) / FOLDER / f"{assignment}.json"


def load_outcomes(course: Path, assignment: str) -> dict[str, Any]:
    return _load(outcomes_path(course, assignment))


def save_outcome(course: Path, assignment: str, student: str, outcome: dict[str, Any]) -> None:
    path = outcomes_path(course, assignment)
    data = _load(path)
    data[student] = outcome
    _save(path, data)
