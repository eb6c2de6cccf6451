"""Student names and texts as the grader writes them: a file name that is safe and unique, one identity per
person, and every string a student controls bounded before it reaches a file.

A student's name is the name of their entry in the submissions folder, so it is whatever a file name can be:
240 characters, a leading dot or ``-``, ``+=@`` and tabs, newlines, undecodable bytes, the same letters
in another case or another Unicode normalisation (NFC ``José`` and NFD ``José`` look identical). The raw name
is kept for the grade sheet (escaped there, see :func:`lab.grading.grade_sheet.safe_cell`); everything that
becomes a path uses :func:`file_stem`, never the raw name.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

TEXT_CHARS = 10_000  # a student's string that reaches the grader's files
STEM_CHARS = 60  # a feedback file's stem: far below any file system's 255 bytes, temporary names included


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]


def file_stem(student: str) -> str:
    """A file name stem for ``student``: ASCII letters, digits, ``_ . -``, at most ``STEM_CHARS`` (+ 11)
    characters, never hidden. A name that is already such a stem is kept; any other gets the first 10 hex
    digits of its SHA-256 appended, so that two students never share a file (``a b`` and ``a_b``)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", unicodedata.normalize("NFC", student))
    stem = stem.lstrip(".-") or "_"
    if stem == student and len(stem) <= STEM_CHARS:
        return stem
    return f"{stem[:STEM_CHARS]}-{_digest(student)}"


def identity(student: str) -> str:
    """What makes two names one person: equal after Unicode NFC normalisation and case folding (``alice`` and
    ``Alice`` share a feedback file on macOS and Windows; NFC and NFD ``José`` are one name to a reader)."""
    return unicodedata.normalize("NFC", student).casefold()


def shown(student: str, limit: int = 80) -> str:
    """The name for a one-line message: escapes for what does not print, at most ``limit`` characters."""
    text = student.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "..."


def printable(value: Any, limit: int = TEXT_CHARS) -> str:
    """``value`` as text of at most ``limit`` characters (a student's string, before it reaches a file)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} characters cut]"
