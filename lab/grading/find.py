"""Find the work in a folder of submissions: one entry per student (``NAME.zip``, a folder ``NAME/`` holding
the assignment's files or one zip, or nbgrader's ``NAME/ASSIGNMENT/``), its assignment, in natural order.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .assignments import ASSIGNMENTS, Assignment, find_assignment
from .grade_sheet import natural_key
from .submission import KINDS, verify
from .unzip import Limits, UnsafeZip, check_entries, open_zip


@dataclass
class Submission:
    student: str
    path: Optional[Path]  # a zip or a folder; None when nothing gradable was found
    assignment: Optional[Assignment] = None
    notes: list[str] = field(default_factory=list)


def _gradable(folder: Path) -> bool:
    return any(p.suffix in KINDS for p in folder.iterdir() if p.is_file())


def _locate(entry: Path) -> Optional[Path]:
    """The zip or folder to grade for one entry of SUBMISSIONS_DIR."""
    if entry.is_file():
        return entry if entry.suffix == ".zip" else None
    if _gradable(entry):
        return entry
    zips = sorted(entry.glob("*.zip"))
    if len(zips) == 1:
        return zips[0]
    inner = [p for p in entry.iterdir() if p.is_dir() and p.name in ASSIGNMENTS]  # nbgrader: NAME/ASSIGNMENT/
    return inner[0] if len(inner) == 1 and _gradable(inner[0]) else None


def _assignment(path: Path, notes: list[str], limits: Limits) -> Optional[Assignment]:
    """By the zip's manifest, else by the files (see find_assignment)."""
    if path.suffix == ".zip":
        try:
            return ASSIGNMENTS[verify(path, limits)["assignment"]]
        except Exception:  # no or broken manifest: look at the files instead (_prepare notes why)
            try:
                with open_zip(path, limits) as zf:
                    files = {i.filename for i in check_entries(zf, path.name, limits) if "/" not in i.filename}
            except UnsafeZip:  # _prepare refuses it, with the reason
                return None
    else:
        files = {p.name for p in path.iterdir()}
    try:
        return find_assignment(path.stem if path.suffix == ".zip" else path.name, files)
    except ValueError as exc:
        notes.append(str(exc))
        return None


def find_submissions(folder: Path, forced: Optional[str] = None, limits: Limits = Limits()) -> list[Submission]:
    """One Submission per entry of ``folder`` (hidden entries and stray files skipped), in natural order of
    the students (s9 before s10). An entry whose assignment cannot be told gets the batch's, when the others
    agree on one. Two entries of one student (NAME.zip and NAME/, or names differing in case only, which
    share a feedback file on macOS and Windows) are an error naming both."""
    out, seen = [], {}
    for entry in sorted(folder.iterdir(), key=lambda p: natural_key(p.name)):
        if entry.name.startswith(".") or (entry.is_file() and entry.suffix != ".zip"):
            continue
        sub = Submission(entry.stem if entry.is_file() else entry.name, _locate(entry))
        if sub.student.casefold() in seen:
            raise ValueError(f"two submissions for student {sub.student!r}: {seen[sub.student.casefold()]} and "
                             f"{entry}; keep one of them")
        seen[sub.student.casefold()] = entry
        if sub.path is not None and sub.path.suffix == ".zip" and not zipfile.is_zipfile(sub.path):
            sub.path = None
            sub.notes.append(f"{entry.name} is not a readable zip")
        elif sub.path is None:
            sub.notes.append("no submission found (a zip from lab.grading.collect, or the assignment's files)")
        if forced:
            sub.assignment = ASSIGNMENTS[forced]
        elif sub.path is not None:
            sub.assignment = _assignment(sub.path, sub.notes, limits)
        out.append(sub)
    found = {s.assignment.name for s in out if s.assignment}
    if len(found) == 1:
        for sub in out:
            sub.assignment = sub.assignment or ASSIGNMENTS[next(iter(found))]
    return out
