"""Find the work in a folder of submissions: one entry per student (``NAME.zip``, a folder ``NAME/`` holding
the assignment's files or one zip, or nbgrader's ``NAME/ASSIGNMENT/``), its assignment, in natural order.
"""
from __future__ import annotations

import os
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .assignments import ASSIGNMENTS, Assignment, find_assignment
from .grade_sheet import natural_key
from .names import identity, shown
from .submission import KINDS, verify
from .unzip import Limits, UnsafeZip, check_entries, open_zip


@dataclass
class Submission:
    student: str
    path: Optional[Path]  # a zip or a folder; None when nothing gradable was found
    assignment: Optional[Assignment] = None
    notes: list[str] = field(default_factory=list)
    refused: str = ""  # why nothing of it is graded: a link, a hidden name, two entries of one student


def _gradable(folder: Path) -> bool:
    return any(p.suffix in KINDS for p in folder.iterdir() if p.is_file())


def _locate(entry: Path, forced: Optional[str]) -> tuple[Optional[Path], str]:
    """(the zip or folder to grade for one entry of SUBMISSIONS_DIR, why it is refused) for an entry that is a
    regular file or a folder (never a link: the caller refused those)."""
    if not entry.is_dir():
        return (entry if entry.suffix == ".zip" else None), ""
    if forced and (entry / forced).is_dir() and not _gradable(entry):  # nbgrader: NAME/ASSIGNMENT/ among others
        return entry / forced, ""
    if _gradable(entry):
        return entry, ""
    zips = sorted(entry.glob("*.zip"))
    if len(zips) == 1:
        return zips[0], (f"{shown(entry.name)}/{shown(zips[0].name)} is a symbolic link: links are not followed"
                         if zips[0].is_symlink() else "")
    inner = [p for p in entry.iterdir() if p.is_dir() and p.name in ASSIGNMENTS]  # nbgrader: NAME/ASSIGNMENT/
    return (inner[0] if len(inner) == 1 and _gradable(inner[0]) else None), ""


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
    """One Submission per student entry of ``folder`` (a zip or a folder; stray files are not students), in
    natural order of the students (s9 before s10). An entry whose assignment cannot be told gets the batch's,
    when the others agree on one. Entries that are refused, each with its reason and the rest of the batch
    graded: a symbolic link (never followed), a hidden name (``.x``), and two entries of one student (``NAME.zip``
    and ``NAME/``, or names that differ only by case or by Unicode normalisation: :func:`names.identity`)."""
    out: list[Submission] = []
    people: dict[str, list[Submission]] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: natural_key(p.name)):
        mode = os.lstat(entry).st_mode
        link, is_dir = stat.S_ISLNK(mode), stat.S_ISDIR(mode)
        if not (link or is_dir or (stat.S_ISREG(mode) and entry.suffix == ".zip")):
            continue  # a stray file (README.txt, .DS_Store): nobody's submission
        sub = Submission(entry.name[:-4] if entry.name.endswith(".zip") and not is_dir else entry.name, None)
        if link:
            sub.refused = f"{shown(entry.name)} is a symbolic link: links are not followed (copy the files in)"
        elif entry.name.startswith("."):
            sub.refused = f"{shown(entry.name)} is a hidden entry (its name starts with '.'): rename it to grade it"
        else:
            sub.path, sub.refused = _locate(entry, forced)
        people.setdefault(identity(sub.student), []).append(sub)
        out.append(sub)
    for sub in out:
        if sub.path is not None and sub.path.suffix == ".zip" and not sub.refused and not zipfile.is_zipfile(sub.path):
            sub.path = None
            sub.notes.append(f"{shown(sub.student)}.zip is not a readable zip")
        elif sub.path is None and not sub.refused:
            sub.notes.append("no submission found (a zip from lab.grading.collect, or the assignment's files)")
        if forced:
            sub.assignment = ASSIGNMENTS[forced]
        elif sub.path is not None and not sub.refused:
            sub.assignment = _assignment(sub.path, sub.notes, limits)
    for group in people.values():
        if len(group) > 1:
            both = " and ".join(repr(shown(s.student + (".zip" if s.path and s.path.suffix == ".zip" else "")))
                                for s in group)
            for s in group:
                s.path, s.refused = None, (f"two entries of one student: {both} (the same name, or names that differ "
                                           "only by case or Unicode normalisation); keep one of them")
    found = {s.assignment.name for s in out if s.assignment}
    if len(found) == 1:
        for sub in out:
            sub.assignment = sub.assignment or ASSIGNMENTS[next(iter(found))]
    return out
