"""Where student code runs: a bubblewrap (``bwrap``) sandbox, with limits, that nothing outlives.

The sandbox gets new user, PID, network, IPC and UTS namespaces (``--unshare-all``), its own session,
and dies with its parent. It sees, read-only, the system's /usr, /bin, /lib*, the Python prefix,
the virtual environment and the installed ``lab`` package, and nothing else of the instructor's: not
the checkout's tests/, assignments/ (the solutions), build/, the hidden tests, other submissions or
the output folder. Its writable folders are tmpfs of a bounded size: ``/submission`` (a copy of the
student's own files, the working directory) and ``/tmp``; they vanish with it. Its network is a
loopback of its own. The limits (:class:`Limits`) are set by the student's process itself, hard,
before any student code runs. The grader kills the sandbox from outside (on a time-out and after
the last test): bwrap's PID namespace dies with its init, and every process in it with it.

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
from typing import Optional

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
    """bwrap's namespaces, the read-only system and Python, /proc, /dev and a bounded /tmp."""
    # The tmpfs /tmp first, the binds over it: a checkout or venv that lives under /tmp (a CI clone) stays
    # visible (mounted the other way round, the tmpfs hid it and the sandbox could not import lab).
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
           "--size", str(limits.file_size), "--tmpfs", "/tmp"]
    for path in read_only_paths():
        cmd += ["--ro-bind", str(path), str(path)]
    return cmd + ["--proc", "/proc", "--dev", "/dev"]


def _setenv(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--setenv", key, value)]


def bwrap_command(argv: list[str], files: list[Path], limits: Limits) -> tuple[list[str], list[int]]:
    """(the bwrap command running ``argv`` in a sandbox holding copies of ``files``, the fds to pass).

    The files are copied in through open descriptors (``--file``), so the sandbox gets its own copies
    in its tmpfs and no path of the instructor's."""
    cmd = _base(limits) + ["--size", str(limits.file_size), "--tmpfs", SCRATCH]
    fds = []
    for f in files:
        fds.append(os.open(f, os.O_RDONLY | os.O_NOFOLLOW))
        cmd += ["--file", str(fds[-1]), f"{SCRATCH}/{f.name}"]
    env = {"PATH": "/usr/bin:/bin", "HOME": SCRATCH, "PYTHONPATH": str(lab_package().parent),
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8"}
    return cmd + _setenv(env) + ["--chdir", SCRATCH, "--", *argv], fds


def bwrap_folder_command(argv: list[str], folder: Path, limits: Limits) -> list[str]:
    """The bwrap command running ``argv`` in ``folder``, the one host folder it may write (nbgrader's course
    folder: autograde writes its gradebook and autograded/ there), under ``limits`` set before ``argv`` runs
    (``python -m lab.grading.sandbox``, which then becomes ``argv``)."""
    folder = Path(folder).resolve()
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]), "HOME": "/tmp",
           "PYTHONPATH": str(lab_package().parent), "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime",
           "IPYTHONDIR": "/tmp/ipython", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
           "LANG": "C.UTF-8", "HF_HUB_OFFLINE": "1"}
    launcher = [sys.executable, "-m", "lab.grading.sandbox", *limits.args(), "--"]
    return _base(limits) + ["--bind", str(folder), str(folder)] + _setenv(env) + \
        ["--chdir", str(folder), "--", *launcher, *argv]


@functools.lru_cache(maxsize=None)
def _probe() -> str:
    """'' when bwrap works here, else why not (one line)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    cmd, _ = bwrap_command([sys.executable, "-c", "pass"], [], Limits())
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not start ({exc})"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
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
