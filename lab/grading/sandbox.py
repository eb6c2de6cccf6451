"""Where student code runs: a bubblewrap (``bwrap``) sandbox, with limits, that nothing outlives.

The sandbox gets new user, PID, network, IPC and UTS namespaces (``--unshare-all``), its own session,
and dies with its parent. It sees, read-only, the system's /usr, /bin, /lib*, the Python prefix,
the virtual environment and the installed ``lab`` package, and nothing else of the instructor's: not
the checkout's tests/, assignments/ (the solutions), build/, the hidden tests, other submissions or
the output folder. Its writable folders are tmpfs of a bounded size: ``/submission`` (a copy of the
student's own files, the working directory), ``/tmp`` and ``/dev/shm``; they vanish with it. Its root and
``/dev`` are read-only. Its network is a loopback of its own. bwrap starts with a minimal environment and
reads its options from a memory file (``--args``), so /proc/1 inside shows neither the instructor's
variables nor the mounts. Each sandbox runs in a memory control group of its own (:mod:`lab.grading.cgroup`:
every kind of memory of every process inside counts, and its processes are bounded), where one can be
made. The limits (:class:`Limits`) are also set by the student's process itself, hard, before any student
code runs. The grader kills the sandbox from outside (on a time-out and after the last test): bwrap's PID
namespace dies with its init, and every process in it with it.

Without bubblewrap, grading refuses (:class:`SandboxUnavailable`); ``--no-sandbox`` runs the student's
process as a plain child in its own session, which gives up the file, network and process isolation
(the verdict is still computed outside it, and the limits still apply).
"""
from __future__ import annotations

import argparse
import functools
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from . import cgroup
from .cgroup import Cgroup

GiB = 2**30
DEFAULT_MEMORY = 4 * GiB
SCRATCH = "/submission"  # the student's working directory inside the sandbox
NO_SANDBOX_GIVES_UP = ("--no-sandbox: student code runs as you, unisolated: it can read and write your files, "
                       "use the network and leave processes behind (the verdict is still computed outside it)")


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or does not work here."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of the student's process (and of every process it starts)."""

    memory: int = DEFAULT_MEMORY  # bytes of heap (RLIMIT_DATA; RLIMIT_AS would refuse torch's mappings)
    processes: int = 256  # RLIMIT_NPROC: threads count too (torch's pool); not enforced for root by the kernel
    file_size: int = 64 * 2**20  # RLIMIT_FSIZE: bytes per written file, and the size of each tmpfs
    cpu_seconds: int = 3600  # RLIMIT_CPU: a backstop; the wall-clock time-out is enforced from outside

    def apply(self) -> None:
        """Set every limit, soft and hard: the student's code cannot raise them again."""
        for what, value in ((resource.RLIMIT_DATA, self.memory), (resource.RLIMIT_NPROC, self.processes),
                            (resource.RLIMIT_FSIZE, self.file_size), (resource.RLIMIT_CPU, self.cpu_seconds),
                            (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(what, (value, value))

    def args(self) -> list[str]:
        return ["--memory", str(self.memory), "--processes", str(self.processes), "--file-size",
                str(self.file_size), "--cpu-seconds", str(self.cpu_seconds)]


def lab_package() -> Path:
    """The directory of the ``lab`` package this grader runs (the sandbox imports the same one)."""
    import lab

    return Path(lab.__file__).resolve().parent


def read_only_paths() -> list[Path]:
    """What Python needs, and nothing of the checkout beyond the ``lab`` package."""
    system = [Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache",
                                "/etc/alternatives")]
    python = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parents[1]}
    return [p for p in system if p.exists()] + sorted(python) + [lab_package()]


def _base(limits: Limits) -> list[str]:
    """bwrap's namespaces, the read-only system and Python, /proc, /dev and bounded tmpfs (/tmp, /dev/shm)."""
    # The tmpfs /tmp first, the binds over it: a checkout or venv that lives under /tmp (a CI clone) stays
    # visible (mounted the other way round, the tmpfs hid it and the sandbox could not import lab).
    size = str(limits.file_size)
    cmd = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--size", size, "--tmpfs", "/tmp"]
    for path in read_only_paths():
        cmd += ["--ro-bind", str(path), str(path)]
    return cmd + ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]


# Last, once every mount point exists: the sandbox's root and its /dev take no files (bwrap makes both writable
# tmpfs, unbounded); only the bounded tmpfs mounted on them stay writable.
READ_ONLY_TOPS = ["--remount-ro", "/dev", "--remount-ro", "/"]
BWRAP_ENV = {"PATH": "/usr/bin:/bin"}  # bwrap's own environment, which /proc/1/environ shows inside


def _setenv(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--setenv", key, value)]


def _options_fd(options: list[str]) -> int:
    """A memory file holding bwrap's options, NUL-separated, for ``bwrap --args FD``: inside the sandbox,
    /proc/1/cmdline (bwrap's) then shows ``--args FD`` and the command, not the mounts and paths."""
    fd = os.memfd_create("bwrap-options", 0)
    os.write(fd, b"".join(os.fsencode(o) + b"\0" for o in options))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _bwrap(options: list[str], argv: list[str], fds: list[int]) -> tuple[list[str], list[int]]:
    fd = _options_fd(options + READ_ONLY_TOPS)
    return [shutil.which("bwrap") or "bwrap", "--args", str(fd), "--", *argv], [*fds, fd]


def bwrap_command(argv: list[str], files: list[Path], limits: Limits) -> tuple[list[str], list[int]]:
    """(the bwrap command running ``argv`` in a sandbox holding copies of ``files``, the fds to pass and
    close once it started).

    The files are copied in through open descriptors (``--file``), so the sandbox gets its own copies
    in its tmpfs and no path of the instructor's; a link is refused (O_NOFOLLOW)."""
    options = _base(limits) + ["--size", str(limits.file_size), "--tmpfs", SCRATCH]
    fds = []
    for f in files:
        fds.append(os.open(f, os.O_RDONLY | os.O_NOFOLLOW))
        options += ["--file", str(fds[-1]), f"{SCRATCH}/{f.name}"]
    # PYTHONPATH for what runs inside without ``-I`` (a notebook's kernel): the same lab as the grader's.
    env = {"PATH": "/usr/bin:/bin", "HOME": SCRATCH, "PYTHONPATH": str(lab_package().parent),
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8", "HF_HUB_OFFLINE": "1"}
    return _bwrap(options + _setenv(env) + ["--chdir", SCRATCH], argv, fds)


def start(cmd: list[str], fds: list[int], limits: Limits, *, group: bool = True, **popen: Any
          ) -> tuple[subprocess.Popen, Optional[Cgroup]]:
    """Start a sandbox command of :func:`bwrap_command` in a control group of
    its own bounding all its memory to ``limits.memory`` and its processes (where one can be made, see
    :mod:`lab.grading.cgroup`), in a session of its own, with bwrap's minimal environment. The fds are closed
    here once it started. The caller removes the group (``Cgroup.remove``) once the process is gone."""
    made, _ = cgroup.make(limits.memory, limits.processes) if group else (None, "")
    try:
        proc = subprocess.Popen(cmd, env=BWRAP_ENV, pass_fds=fds, start_new_session=True,
                                preexec_fn=made.join if made else None, **popen)
    except BaseException:
        if made:
            made.remove()
        raise
    finally:
        for fd in fds:
            os.close(fd)
    return proc, made


@functools.lru_cache(maxsize=None)
def _probe() -> str:
    """'' when bwrap works here, else why not (one line)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    cmd, fds = bwrap_command([sys.executable, "-I", "-c", "pass"], [], Limits())
    try:
        proc, _ = start(cmd, fds, Limits(), group=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not start ({exc})"
    if proc.returncode:
        last = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"bwrap does not work here ({last})"
    return ""


def require_sandbox() -> None:
    """Raise SandboxUnavailable, in one line naming the package, unless bwrap works here."""
    problem = _probe()
    if problem:
        raise SandboxUnavailable(f"{problem}: install the Debian package bubblewrap (apt-get install bubblewrap) "
                                 "to grade student code in a sandbox, or pass --no-sandbox to run it unisolated")


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m lab.grading.sandbox [--memory B ...] -- COMMAND ...``: set the limits, hard, then become COMMAND
    (inside the sandbox, before any student code: a notebook's kernel inherits them)."""
    parser = argparse.ArgumentParser(prog="python -m lab.grading.sandbox")
    for name, default in (("memory", Limits.memory), ("processes", Limits.processes),
                          ("file-size", Limits.file_size), ("cpu-seconds", Limits.cpu_seconds)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    Limits(args.memory, args.processes, args.file_size, args.cpu_seconds).apply()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
