"""A student's folder read as data: no link followed, no file with a second name, nothing beyond the limits.

A folder submission (or nbgrader's ``submitted/STUDENT/ASSIGNMENT/``) is the student's: a symbolic link in
it (Info-ZIP ``unzip`` restores them from a zip) would make the grader copy whatever it points to, the
solution or ``/etc/passwd``, into the sandbox and its feedback; a hard link names another file of the
same disk. So a folder with a link anywhere below it is refused, with its path, and the files the grader
reads are opened relative to the folder's own descriptor with ``O_NOFOLLOW``, must be regular files with
one link, and are read within the zip limits (:class:`lab.grading.unzip.Limits`).
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Iterable

from .unzip import Limits

MAX_WALK = 10_000  # entries looked at below a folder before it is refused as too large to be a submission


class UnsafeFolder(ValueError):
    """A folder (or entry) refused; the message names the path and the reason in one line."""


def refuse_link(path: Path, label: str) -> None:
    """UnsafeFolder when ``path`` itself is a symbolic link (a student entry, an nbgrader assignment folder)."""
    if stat.S_ISLNK(os.lstat(path).st_mode):
        raise UnsafeFolder(f"{label} is a symbolic link: links are not followed")


def check_tree(folder: Path, label: str) -> None:
    """UnsafeFolder if a symbolic link is anywhere below ``folder`` (not followed), or the tree is huge."""
    refuse_link(folder, label)
    seen = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            seen += 1
            if seen > MAX_WALK:
                raise UnsafeFolder(f"{label} holds more than {MAX_WALK} files and folders")
            if os.path.islink(os.path.join(root, name)):
                rel = os.path.relpath(os.path.join(root, name), folder)
                raise UnsafeFolder(f"{label}/{rel} is a symbolic link: links are not followed")


def read_files(folder: Path, label: str, suffixes: Iterable[str], limits: Limits = Limits()) -> dict[str, bytes]:
    """{name: bytes} of the top-level regular files of ``folder`` whose suffix is in ``suffixes`` (hidden names
    left out), after :func:`check_tree`. Each is opened relative to the folder with O_NOFOLLOW | O_NONBLOCK (a
    link or a FIFO cannot stand in for it between the check and the read) and must be a regular file with
    one link; all of them together are at most ``limits.max_bytes``, their number at most ``limits.max_entries``."""
    check_tree(folder, label)
    suffixes = tuple(suffixes)
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    out: dict[str, bytes] = {}
    used = 0
    try:
        names = sorted(n for n in os.listdir(dfd) if n.endswith(suffixes) and not n.startswith("."))
        if len(names) > limits.max_entries:
            raise UnsafeFolder(f"{label} holds {len(names)} files to grade, over the limit of {limits.max_entries}")
        for name in names:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                raise UnsafeFolder(f"{label}/{name} cannot be opened as a plain file ({exc.strerror})") from None
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue  # a folder named like a module: not a file to grade
                if st.st_nlink > 1:
                    raise UnsafeFolder(f"{label}/{name} has {st.st_nlink} hard links (another name for another "
                                       "file): refused")
                used += st.st_size
                if used > limits.max_bytes:
                    raise UnsafeFolder(f"{label}: its files to grade hold more than {limits.max_bytes / 2**20:g} MB "
                                       f"(the limit; at {name})")
                with os.fdopen(fd, "rb", closefd=False) as f:
                    data = f.read(st.st_size + 1)
                if len(data) != st.st_size:  # it changed while we read it
                    raise UnsafeFolder(f"{label}/{name} changed while it was read")
                out[name] = data
            finally:
                os.close(fd)
    finally:
        os.close(dfd)
    return out


def fingerprint(folder: Path) -> dict[str, str]:
    """{relative path: SHA-256} of every regular file below ``folder`` (links recorded as ``link:TARGET``, not
    followed): what a hand-in held, to tell later whether anyone changed it."""
    out = {}
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path):
                out[rel] = "link:" + os.readlink(path)
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    out[rel] = "special file"  # a FIFO or a device: never read (it could block)
                    continue
                digest = hashlib.sha256()
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            out[rel] = digest.hexdigest()
    return out
