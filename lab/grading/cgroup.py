"""One memory limit for every kind of memory: a control group per sandbox.

``RLIMIT_DATA`` (:class:`lab.grading.sandbox.Limits`) bounds each process's heap, but not what it shares:
a shared ``mmap``, a ``memfd``, files in ``/dev/shm`` or any tmpfs, or the same heap again in each forked
child. A memory control group counts all of it (anonymous and shared pages, tmpfs pages, every process
inside), so each sandbox runs in a group of its own with ``limit`` bytes of memory, no swap, and a bound on
its processes (``pids``: enforced for root too, unlike ``RLIMIT_NPROC``). Past the limit the kernel's OOM
killer ends a process of the group, never the grader.

cgroup v2 is used where this process's group can delegate the memory controller, else cgroup v1's memory
(and pids) hierarchies. Making a group needs write access to them: root, or a delegated subtree. Where none
can be made, :func:`make` says why in one line, and only the per-process limits and the tmpfs sizes hold.
"""
from __future__ import annotations

import contextlib
import functools
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

PREFIX = "ranklab-sandbox-"


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every cgroup mount."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            out.append((fields[4], tail[0], set(tail[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """This process's group per hierarchy: '' for cgroup v2, each v1 controller's name otherwise."""
    out = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in (controllers.split(",") if controllers else [""]):
                out[c] = path
    return out


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass
class Cgroup:
    """A control group made for one sandbox (a folder per hierarchy), until :meth:`remove`."""

    version: int
    dirs: list[Path]
    memory_dir: Path
    _procs: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._procs = [os.fsencode(d / "cgroup.procs") for d in self.dirs]

    def join(self) -> None:
        """Move the calling process into the group. Meant for ``preexec_fn`` (in the child, before exec): only
        system calls, so that it is safe in a child forked from a threaded grader."""
        pid = str(os.getpid()).encode()
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def oom_kills(self) -> int:
        """How many processes of the group the kernel killed for memory."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.memory_dir / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self) -> None:
        """Remove the group's folders once its processes are gone (the kernel frees them a moment later)."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still busy: a killed process not yet reaped by the kernel
                    time.sleep(0.02)


def _sweep(parent: Path) -> None:
    """Remove empty groups left by graders that are gone (killed before their clean-up)."""
    with contextlib.suppress(OSError):
        for d in parent.glob(f"{PREFIX}*"):
            pid = d.name[len(PREFIX):].split("-", 1)[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    d.rmdir()


def _new_dir(parent: Path) -> Path:
    _sweep(parent)
    d = parent / f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    d.mkdir()
    return d


def _v2(limit: int, processes: int) -> Cgroup:
    mount = next(m for m, kind, _ in _mounts() if kind == "cgroup2")
    own = Path(mount) / _own_paths()[""].lstrip("/")
    if "memory" not in (own / "cgroup.controllers").read_text().split():
        raise OSError("cgroup v2 without the memory controller here")
    enabled = (own / "cgroup.subtree_control").read_text().split()
    if "memory" not in enabled:  # refused (EBUSY) while this group holds processes, unless it is the root
        _write(own / "cgroup.subtree_control", "+memory" + (" +pids" if "pids" in (own / "cgroup.controllers")
                                                            .read_text().split() else ""))
    d = _new_dir(own)
    try:
        _write(d / "memory.max", str(limit))
        with contextlib.suppress(FileNotFoundError):
            _write(d / "memory.swap.max", "0")
        with contextlib.suppress(FileNotFoundError):
            _write(d / "pids.max", str(processes))
    except OSError:
        d.rmdir()
        raise
    return Cgroup(2, [d], d)


def _v1(limit: int, processes: int) -> Cgroup:
    mounts = {c: Path(m) for m, kind, opts in _mounts() if kind == "cgroup" for c in ("memory", "pids") if c in opts}
    own = _own_paths()
    if "memory" not in mounts or "memory" not in own:
        raise OSError("no memory controller (cgroup v1 or v2) here")
    made: list[Path] = []
    try:
        memory = _new_dir(mounts["memory"] / own["memory"].lstrip("/"))
        made.append(memory)
        _write(memory / "memory.limit_in_bytes", str(limit))
        with contextlib.suppress(FileNotFoundError):  # memory + swap: no swap beyond the limit
            _write(memory / "memory.memsw.limit_in_bytes", str(limit))
        if "pids" in mounts and "pids" in own:
            pids = _new_dir(mounts["pids"] / own["pids"].lstrip("/"))
            made.append(pids)
            _write(pids / "pids.max", str(processes))
    except OSError:
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return Cgroup(1, made, memory)


def make(limit: int, processes: int) -> tuple[Optional[Cgroup], str]:
    """(a new group bounding memory to ``limit`` bytes and its processes to ``processes``, '') or
    (None, why not, in one line)."""
    errors = []
    for build in (_v2, _v1):
        try:
            return build(limit, processes), ""
        except (OSError, StopIteration, KeyError, ValueError) as exc:
            errors.append(str(exc) or type(exc).__name__)
    return None, ("no memory control group could be made for the sandbox (" + "; ".join(errors) + "): memory is "
                  "bounded per process (RLIMIT_DATA) and by the tmpfs sizes only (run the grader as root on Linux)")


@functools.lru_cache(maxsize=None)
def unavailable() -> str:
    """'' when a group can be made here, else why not, in one line (the probe's group is removed again)."""
    group, why = make(2**30, 64)
    if group is not None:
        group.remove()
    return why
