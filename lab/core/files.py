"""Files written atomically (run folders, study results, grade sheets, unzipped submissions, caches), through
temporary files that belong to one process.

A temporary file is ``.{name}.{pid}.{token}.tmp`` beside its target: the pid says whose it is, so a
process removes only its own strays and those of processes that are gone (killed while writing),
never the file another live process is writing into the same folder.
"""
from __future__ import annotations

import contextlib
import errno
import glob
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Callable, Optional, Union

PathLike = Union[str, Path]


def temporary_path(path: PathLike) -> Path:
    """A fresh temporary name beside ``path``, owned by this process."""
    path = Path(path)
    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def owner_pid(temporary: Path, name: str) -> int:
    """The pid in a temporary name of :func:`temporary_path` for ``name``; -1 for another pattern."""
    middle = temporary.name[len(name) + 2 : -len(".tmp")]  # "{pid}.{token}"
    pid = middle.split(".", 1)[0]
    return int(pid) if pid.isdigit() else -1


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie not yet reaped counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_strays(path: PathLike) -> None:
    """Remove the temporary files of ``path`` left by this process or by processes that are gone;
    those of a live process (another run writing here) and of unknown patterns are left alone."""
    path = Path(path)
    for stray in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = owner_pid(stray, path.name)
        if pid == os.getpid() or (pid > 0 and not pid_alive(pid)):
            with contextlib.suppress(FileNotFoundError):
                stray.unlink()


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # no space left; over the user's quota


class DiskFullError(OSError):
    """A file could not be written for lack of space: one line naming the file, ENOSPC (or EDQUOT), and
    what became of it (``state``; default, for an atomic write: the file there is unchanged)."""

    def __init__(self, path: PathLike, code: int, state: Optional[str] = None) -> None:
        state = state or ("the file there is unchanged" if Path(path).exists() else "no file was written")
        self.message = f"cannot write {path}: {os.strerror(code).lower()} ({errno.errorcode[code]}); {state}"
        super().__init__(self.message)
        self.errno, self.filename = code, str(path)

    def __str__(self) -> str:
        return self.message


def full_disk(error: Optional[BaseException]) -> Optional[int]:
    """ENOSPC or EDQUOT when ``error`` or an exception it was raised from says the disk is full, else None.
    torch.save meets it as an OSError of the file it writes to, then raises a RuntimeError of its zip
    writer ("unexpected pos", inline_container.cc) while closing: the cause is in the chain, not on top."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in FULL_DISK:
            return error.errno
        if "No space left on device" in str(error):  # a C++ writer's own message
            return errno.ENOSPC
        error = error.__cause__ or error.__context__
    return None


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform or file system can open a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: PathLike, write: Callable[[IO[bytes]], None], previous: Optional[Path] = None) -> Path:
    """``write(f)`` into a temporary file of this process beside ``path``, fsync, then os.replace.

    os.replace is atomic on POSIX: a reader (or a crash) sees the old file or the new one, never a
    partial one. The file gets the mode a plain ``open(path, "w")`` would give it: the mode of the
    file it replaces, or 0o666 less the umask for a new one (not mkstemp's 0o600). The temporary file is
    removed if writing fails, also on Ctrl-C; after a success, the strays of ``path`` (and ``previous``)
    that :func:`remove_strays` may remove go too.
    ``previous``: the file replaced stays there (hard-linked first, so that ``path`` exists at every
    moment).
    A full disk, however the writer reports it, is one :class:`DiskFullError` naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        with open(tmp, "xb") as f:  # open() applies the umask, as for any new file
            _keep_mode(path, f.fileno())
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if previous is not None and path.is_file():
            _keep(path, previous)
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        code = full_disk(error)
        if code is not None:
            raise DiskFullError(path, code) from None
        raise
    fsync_dir(path.parent)  # the rename itself survives a power loss
    for target in (path, previous):
        if target is not None:
            remove_strays(target)
    return path


def _keep_mode(path: Path, fd: int) -> None:
    """Give the temporary file the mode of the file it will replace (open() would keep it too)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    os.fchmod(fd, mode)


def _keep(path: Path, previous: Path) -> None:
    link = temporary_path(previous)
    try:
        os.link(path, link)
    except OSError:  # a file system without hard links: a moment without `path` (a resume falls back)
        os.replace(path, previous)
        return
    os.replace(link, previous)


def write_text_atomic(path: PathLike, text: str, encoding: str = "utf-8") -> Path:
    """``text`` (written as is: no newline translation) into ``path``, atomically (:func:`write_atomic`)."""
    return write_atomic(path, lambda f: f.write(text.encode(encoding)))
