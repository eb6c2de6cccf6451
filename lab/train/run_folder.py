"""A run folder (``--out``) protects the run it holds.

* One writer: a lock file (``.lock``, ``fcntl.flock``) is held while a trainer writes the folder; a
  second process (or a second trainer in this one) gets a one-line error naming the holder's pid.
  The kernel drops the lock when its process dies, however it dies.
* Another run is never mixed in: a new run on a folder that holds one is refused, naming the run;
  ``resume`` continues it (with the same config), ``overwrite`` removes it first.
* The log is repaired on resume (:func:`repair_log`): a last line cut short by a crash or a full
  disk is cut off (the original kept as ``metrics.jsonl.bak``); anything else wrong is an error
  naming the file and the line.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from .checkpoint import previous_path
from .config import config_diff
from ..core.files import pid_alive, write_atomic

try:
    import fcntl
except ImportError:  # Windows: no flock, no lock (the other rules still hold)
    fcntl = None

LOCK = ".lock"
MODES = ("new", "resume", "overwrite")
RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoint.pt")  # any of them: the folder holds a run


class RunFolderError(ValueError):
    """The folder holds another run, or another process is writing it."""


def run_files(out: Path) -> list[Path]:
    """The files of the run ``out`` holds (the kept previous checkpoint and the log's .bak too)."""
    names = [*RUN_FILES, previous_path(out / "checkpoint.pt").name, "metrics.jsonl.bak"]
    return [out / n for n in names if (out / n).is_file()]


def saved_config(out: Path) -> Optional[dict[str, Any]]:
    """The mapping in ``out/config.yaml`` (None without one); unreadable: an error naming it."""
    path = out / "config.yaml"
    if not path.is_file():
        return None
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise RunFolderError(f"{path} is not the YAML config of a run ({' '.join(str(e).split())})") from None
    if not isinstance(loaded, dict):
        raise RunFolderError(f"{path} is not the YAML config of a run: it holds a {type(loaded).__name__}")
    return loaded


def describe_run(out: Path) -> str:
    """'loss roadmap, seed 1, 30 steps' from config.yaml (or the files, without one)."""
    config = saved_config(out)
    if config is None:
        return "no config.yaml; " + ", ".join(p.name for p in run_files(out))
    length = f"{config.get('epochs')} epochs" if (config.get("epochs") or 0) > 0 else f"{config.get('steps')} steps"
    return f"loss {config.get('loss')}, seed {config.get('seed')}, {length}"


class RunFolder:
    """The lock and the rules of one run folder, for the process that writes it (rank 0)."""

    def __init__(self, out: Union[str, Path]) -> None:
        self.out = Path(out)
        self._fd: Optional[int] = None
        self.claimed = False  # this trainer's run is the folder's (checked once, whatever the mode)

    # ------------------------------------------------------------------ the lock
    def lock(self) -> None:
        """Hold ``out/.lock`` (non-blocking); held elsewhere: RunFolderError naming the holder's pid."""
        if self._fd is not None or fcntl is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunFolderError(self._busy()) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _busy(self) -> str:
        pid = _holder(self.out / LOCK)
        if pid is not None and not pid_alive(pid):  # the holder may not have written its pid yet
            time.sleep(0.1)
            pid = _holder(self.out / LOCK)
        who = "an unknown pid" if pid is None else f"pid {pid}"
        if pid == os.getpid():
            who += " (this process: another Trainer writes it; call its close() first)"
        return (f"{self.out} is in use by another run ({who} holds {self.out / LOCK}): wait for it to end, "
                "or choose another --out")

    def release(self) -> None:
        """Let another process write the folder (this trainer's run stays claimed: it may write again)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit the modules may be gone: the kernel unlocks
            self.release()

    # ------------------------------------------------------------------ the run it holds
    def check(self, mode: str, config: Optional[dict[str, Any]] = None) -> None:
        """Refuse what ``mode`` would do wrong here (no lock taken: the CLI's early check). ``new``:
        the folder must not hold a run; ``resume``: its run must have ``config``'s trajectory."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if self._fd is None and (self.out / LOCK).is_file():  # a run writing here now: say so first
            self.lock()
            self.release()
        if self.claimed or not self.out.is_dir() or mode == "overwrite" or not run_files(self.out):
            return
        if mode == "new":
            raise RunFolderError(f"--out {self.out} holds another run ({describe_run(self.out)}): --resume "
                                 "continues it, --overwrite replaces it (Trainer(..., overwrite=True)), or choose "
                                 "another --out")
        if (self.out / "metrics.jsonl").is_file():
            read_log(self.out / "metrics.jsonl")  # a damaged line: said now, before anything is built
        saved = saved_config(self.out)
        diff = config_diff(saved, config) if saved is not None and config is not None else {}
        if diff:
            keys = ", ".join(f"{k}: {a!r} there vs {b!r} now" for k, (a, b) in diff.items())
            raise RunFolderError(f"--out {self.out} holds another run ({describe_run(self.out)}; {keys}): resume "
                                 "into its own folder, --overwrite replaces it, or choose another --out")

    def claim(self, mode: str, config: Optional[dict[str, Any]] = None) -> None:
        """Lock, check (once per trainer), and for ``overwrite`` remove the old run's files."""
        self.lock()
        if self.claimed:
            return
        try:
            self.check(mode, config)
        except RunFolderError:
            self.release()
            raise
        if mode == "overwrite":
            for path in run_files(self.out):
                path.unlink()
        self.claimed = True


def _holder(lock: Path) -> Optional[int]:
    try:
        text = lock.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def read_log(path: Path) -> tuple[list[tuple[int, bytes]], bytes]:
    """([(step, line)] of a metrics log's complete lines, the bytes after its last newline). A line
    that is not a JSON record with an integer ``step``: a ValueError naming the file and the line."""
    raw = path.read_bytes()
    complete, _, tail = raw.rpartition(b"\n")
    records = []
    for number, line in enumerate(complete.split(b"\n") if complete else [], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:  # also a UnicodeDecodeError
            raise ValueError(f"{path}, line {number}: not a JSON record ({e}); move the file away to resume "
                             "with a new log") from None
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ValueError(f"{path}, line {number}: a record without an integer \"step\"; move the file away to "
                             "resume with a new log")
        records.append((record["step"], line + b"\n"))
    return records, tail


def repair_log(path: Path, step: int) -> Optional[dict[str, Any]]:
    """Keep the records of a metrics log with ``step <= step`` (atomic rewrite), after cutting off
    a last line without its newline (kept in ``.bak``, with a warning); see :func:`read_log`.
    Returns the log's evaluation record at ``step`` (a finished run's final evaluation), if any."""
    if not path.exists():
        return None
    raw = path.read_bytes()
    records, tail = read_log(path)
    if tail.strip(b"\0 \t\r"):
        backup = path.with_name(path.name + ".bak")
        write_atomic(backup, lambda f: f.write(raw))
        warnings.warn(f"{path}: its last line was cut short ({len(tail)} bytes without a newline: a crash or a full "
                      f"disk while writing it); removed it, the original is kept as {backup}", RuntimeWarning,
                      stacklevel=2)
    kept = b"".join(line for s, line in records if s <= step)  # later ones are written again
    if kept != raw:
        write_atomic(path, lambda f: f.write(kept))
    at_step = [json.loads(line) for s, line in records if s == step]
    return next((r for r in reversed(at_step) if r.get("kind") == "eval"), None)
