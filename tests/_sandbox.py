"""The grading sandbox in tests: skip or fail without bubblewrap, and a driver that grades a folder and
reports what it left behind (changed files, processes).

    python tests/_sandbox.py SUBMISSIONS OUTPUT_CSV REPORT_JSON [--timeout S] [--memory BYTES] [--wait S]
                             [--no-sandbox] --watch DIR [--watch DIR ...]

The driver makes itself a child subreaper: any process the grading leaves behind, detached or in a
session of its own, is re-parented to it rather than to init, so "what is left" is every descendant
of the driver once ``grade`` has returned and ``--wait`` seconds have passed (each listed with its
session and process group), and no process of anyone else's on a shared machine is counted. The
leftovers are then killed. Works with the ``grade`` of any checkout (it passes only the keywords
that checkout's ``grade`` accepts), so the same attacks can be graded with an older grader.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import inspect
import json
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def require_sandbox() -> None:
    """Skip (locally) or fail (RANKLAB_REQUIRE_SANDBOX=1, CI) when bubblewrap cannot run here."""
    import pytest

    from lab.grading.sandbox import SandboxUnavailable
    from lab.grading.sandbox import require_sandbox as check

    try:
        check()
    except SandboxUnavailable as exc:
        if os.environ.get("RANKLAB_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"RANKLAB_REQUIRE_SANDBOX=1 but {exc}")
        pytest.skip(str(exc))


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> SHA-256; links by their target), bytecode caches aside."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if "__pycache__" in path.parts:
            continue
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_dir():
            out[rel + "/"] = "dir"
    return out


def _stat(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm)": state ppid pgrp session ...
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return dict(pid=pid, state=fields[0], ppid=int(fields[1]), pgrp=int(fields[2]), session=int(fields[3]), cmd=cmd)


def descendants(root: int) -> list[dict]:
    """The live (not zombie) processes below ``root``, with their session and process group."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                procs[int(entry.name)] = _stat(int(entry.name))
            except (OSError, ValueError, IndexError):  # it ended while we looked
                continue
    out, frontier = [], {root}
    while frontier:
        children = [p for p in procs.values() if p["ppid"] in frontier]
        out += children
        frontier = {p["pid"] for p in children}
    return [p for p in out if p["state"] != "Z"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("submissions", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("report", type=Path)
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("--memory", type=int)
    parser.add_argument("--wait", type=float, default=3.0, help="seconds to watch after grade returns")
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--watch", type=Path, action="append", default=[])
    args = parser.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    from lab.grading.grade import grade

    accepted = inspect.signature(grade).parameters
    extra = {k: v for k, v in dict(memory=args.memory, sandbox=not args.no_sandbox).items()
             if k in accepted and v is not None}
    before = {str(d): tree(d) for d in args.watch}
    procs_before = descendants(os.getpid())
    start = time.perf_counter()
    grade(args.submissions, args.output, timeout=args.timeout, jobs=2, **extra)
    seconds = time.perf_counter() - start
    written = {p.name: p.read_bytes() for p in args.output.parent.glob(f"{args.output.stem}*.csv")}
    time.sleep(args.wait)
    left = descendants(os.getpid())
    for p in left:
        try:
            os.kill(p["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    report = dict(seconds=seconds, processes_before=procs_before, processes_left=left,
                  changed_after_grade=sorted(n for n, data in written.items()
                                             if (args.output.parent / n).read_bytes() != data),
                  trees_before=before, trees_after={str(d): tree(d) for d in args.watch})
    tmp = args.report.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(args.report)  # atomically: a half-written report is never read


if __name__ == "__main__":
    main()
