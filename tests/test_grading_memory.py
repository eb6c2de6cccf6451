"""One memory limit for every kind of memory (issue 42, row 4): under --memory 1 a submission cannot hold more
than 1 GB in any form. Before, RLIMIT_DATA bounded only each process's heap: 1 GB written into /dev/shm, /dev,
the sandbox's root or a memfd, or a 3 GB shared mmap, all succeeded (student RSS 3.7 GB).

Each attack runs in the sandbox exactly as a student's process does (bwrap, the launcher that sets the limits,
a control group of its own), tries to hold 3 GB in one form, and prints how many MB it holds after each step.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lab.grading import cgroup
from lab.grading.launch import python_module
from lab.grading.sandbox import GiB, Limits, bwrap_command, start

from ._sandbox import require_sandbox

MB = 2**20
LIMIT = 1 * GiB
STEP = 64 * MB
ATTACK = r'''
import mmap, os, sys
form, step, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = []
def say(n, who="main"):
    print(who, n // 2**20, flush=True)
try:
    if form == "anonymous":
        for n in range(step, total + 1, step):
            held.append(b"\1" * step)
            say(n)
    elif form == "shared_mmap":
        m = mmap.mmap(-1, total)  # MAP_SHARED | MAP_ANONYMOUS: not counted by RLIMIT_DATA
        for n in range(step, total + 1, step):
            m.write(b"\1" * step)
            say(n)
    elif form in ("dev_shm", "dev", "root", "tmp"):  # a file each step: RLIMIT_FSIZE bounds one file, not many
        folder = {"dev_shm": "/dev/shm", "dev": "/dev", "root": "", "tmp": "/tmp"}[form]
        for n in range(step, total + 1, step):
            with open(f"{folder}/x{n}", "wb") as f:
                f.write(b"\1" * step)
            say(n)
    elif form == "memfds":  # one file would meet RLIMIT_FSIZE: many files do not
        n = 0
        while n < total:
            fd = os.memfd_create("x")
            held.append(fd)
            os.write(fd, b"\1" * step)
            n += step
            say(n)
    elif form == "forks":  # each child holds what it got for 5 s: together, at the same time
        import time
        kids, pids = 4, {}
        for k in range(kids):
            pid = os.fork()
            if pid == 0:
                try:
                    for n in range(step, total // kids + 1, step):
                        held.append(b"\1" * step)
                        say(n, f"child{k}")
                except MemoryError:
                    pass
                time.sleep(5)
                os._exit(0)
            pids[pid] = k
        for _ in range(kids):
            pid, status = os.wait()
            if os.WIFSIGNALED(status):  # killed for memory: it holds nothing
                print(f"child{pids[pid]} 0", flush=True)
except (OSError, MemoryError) as exc:
    print("stopped", type(exc).__name__, flush=True)
'''


def _attack(form: str, total: int = 3 * GiB) -> tuple[int, dict[str, int], str]:
    """(exit status, {process: MB it last said it held}, output) of the attack in a sandbox under LIMIT."""
    limits = Limits(memory=LIMIT)
    argv = python_module("lab.grading.sandbox", *limits.args(), "--", sys.executable, "-I", "-c", ATTACK, form,
                         str(STEP), str(total))
    cmd, fds = bwrap_command(argv, [], limits)
    proc, group = start(cmd, fds, limits, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        if group is not None:
            group.remove()
    held: dict[str, int] = {}
    for line in out.splitlines():
        who, _, mb = line.partition(" ")
        if mb.isdigit():
            held[who] = int(mb)
    return proc.returncode, held, out


def _require_cgroup() -> None:
    require_sandbox()
    why = cgroup.unavailable()
    if why:
        if os.environ.get("RANKLAB_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"RANKLAB_REQUIRE_SANDBOX=1 but {why}")
        pytest.skip(why)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["anonymous", "shared_mmap", "memfds", "forks"])
def test_no_form_of_memory_holds_more_than_the_limit(form):
    """Heap, a shared mapping, memory files and forked children: 1 GB in all, whatever the form."""
    _require_cgroup()
    _, held, out = _attack(form)
    assert held, out  # the attack ran and said what it held
    assert sum(held.values()) * MB <= LIMIT + len(held) * STEP, out


@pytest.mark.slow
@pytest.mark.parametrize("form, most", [("dev_shm", 64 * MB), ("tmp", 64 * MB), ("dev", 0), ("root", 0)])
def test_files_in_the_sandbox_s_tmpfs_are_bounded_and_its_root_and_dev_take_none(form, most):
    """/dev/shm and /tmp are tmpfs of the file-size limit (64 MB); the root and /dev are read-only (before:
    writable tmpfs without a size)."""
    require_sandbox()
    _, held, out = _attack(form)
    assert sum(held.values()) * MB <= most, out
    assert "stopped OSError" in out, out


@pytest.mark.slow
def test_a_sandbox_killed_for_memory_is_told_so():
    """The student hears why: the group's OOM kill is read back (a process killed by the kernel for memory)."""
    _require_cgroup()
    limits = Limits(memory=256 * MB)
    group, why = cgroup.make(limits.memory, limits.processes)
    assert group is not None, why
    try:
        done = subprocess.run([sys.executable, "-I", "-c", "import mmap; m = mmap.mmap(-1, 2**30); "
                               "[m.write(b'x' * 2**20) for _ in range(1024)]"], preexec_fn=group.join)
        assert done.returncode == -9 and group.oom_kills() >= 1
    finally:
        group.remove()
    assert not any(d.exists() for d in group.dirs)
