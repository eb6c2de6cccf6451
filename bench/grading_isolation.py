"""What grading with no way out costs: a course of 24 honest submissions, today's grader against a checkout's.

    python -m bench.grading_isolation [--before b0a4995] [--rounds 2] [--no-write]

Builds 24 honest submissions of assignment 03 (8 correct, 8 untouched, 8 with ``soft_histogram`` written
and ``fast_ap`` not) and grades the whole folder with ``python -m lab.grading.grade --jobs 2``, once with
the grader of this checkout and once with the one of ``--before`` (a ``git archive`` of that commit, run
from its own folder), alternating which goes first from round to round so both see the same load. Checks
that both give every student the same points, and reports seconds per submission (wall clock of the whole
batch / 24) and the paired difference. The part that differs between the two is the start of each
sandbox (``python -I``, the control group, the read-only root, bwrap's options from a memory file): it is
also timed alone, interleaved, as the start of a sandboxed ``python -c 'import torch, lab.grading'``.
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench.measure import cpu_model, load_average, publish

ROOT = Path(__file__).resolve().parents[1]
NAME = "03_histogram_losses_and_bin_width"
STUDENTS = 24


def course(root: Path) -> Path:
    """submissions/sNN: correct, untouched and half-done (soft_histogram only) in turn, with the notebook."""
    from lab.grading.assignments import ASSIGNMENTS
    from lab.grading.generate import generate

    a = ASSIGNMENTS[NAME]
    g = {x.name: x for x in generate(ROOT / "assignments", root / "build", only=NAME)}[NAME]
    solution = (ROOT / "assignments" / NAME / a.modules[0]).read_text()
    stub = (g.student_dir / a.modules[0]).read_text()
    head, _, _ = solution.partition("def fast_ap(")
    _, _, stub_tail = stub.partition("def fast_ap(")
    half = head + "def fast_ap(" + stub_tail  # soft_histogram solved, fast_ap still the TODO
    for i in range(STUDENTS):
        folder = root / "submissions" / f"s{i:02d}"
        folder.mkdir(parents=True)
        (folder / a.modules[0]).write_text((solution, stub, half)[i % 3])
        shutil.copy(g.student_dir / a.notebook, folder / a.notebook)
    return root / "submissions"


def checkout(commit: str, into: Path) -> Path:
    """The files of ``commit`` (git archive), unpacked into ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], check=True,
                          capture_output=True).stdout
    into.mkdir(parents=True)
    tar = into / "src.tar"
    tar.write_bytes(data)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    tar.unlink()
    return into


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished process this one waited for, and theirs in turn: the
    grader, its workers and each sandbox (each parent waits for its children)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def grade_batch(code: Path, subs: Path, out: Path) -> tuple[float, float, dict[str, str]]:
    """(wall seconds, CPU seconds, {student: points}) of ``python -m lab.grading.grade`` of the checkout at
    ``code``. The CPU seconds barely move with what else runs on the machine; the wall clock does."""
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-m", "lab.grading.grade", str(subs), "-o", str(out), "--jobs", "2",
                    "--assignment", NAME, "--regrade"], cwd=code, env=env, check=True, capture_output=True)
    seconds, cpu = time.perf_counter() - start, children_cpu() - cpu
    with open(out.with_name(out.stem + "_totals.csv"), newline="") as f:
        return seconds, cpu, {r["student"]: r["points"] for r in csv.DictReader(f)}


STARTUP = r"""
import subprocess, sys, time
from pathlib import Path
from lab.grading import sandbox
cmd, fds = sandbox.bwrap_command([sys.executable, "-c", "import torch, lab.grading"], [], sandbox.Limits())
start = time.perf_counter()
if hasattr(sandbox, "start"):
    proc, group = sandbox.start(cmd, fds, sandbox.Limits())
    proc.wait()
    if group is not None:
        group.remove()
else:
    subprocess.run(cmd, pass_fds=fds, check=True)
print(time.perf_counter() - start)
"""


def start_sandbox(code: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", STARTUP], cwd=code, env=env, check=True, capture_output=True,
                          text=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="b0a4995", help="the commit of today's grader (default b0a4995)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--starts", type=int, default=10, help="interleaved pairs of sandbox starts")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    args = parser.parse_args()
    from lab.grading.sandbox import require_sandbox

    require_sandbox()
    with tempfile.TemporaryDirectory(prefix="ranklab_bench_isolation_") as tmp:
        tmp = Path(tmp)
        subs = course(tmp)
        codes = {"before": checkout(args.before, tmp / "before"), "after": ROOT}
        seconds: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        points: dict[str, dict[str, str]] = {}
        loads = [load_average()]
        for r in range(args.rounds):
            for which in (("before", "after") if r % 2 == 0 else ("after", "before")):
                s, c, p = grade_batch(codes[which], subs, tmp / f"out_{which}" / "grades.csv")
                seconds[which].append(s / STUDENTS)
                cpu[which].append(c / STUDENTS)
                points[which] = p
                loads.append(load_average())
        starts: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(args.starts):
            for which in (("before", "after") if r % 2 == 0 else ("after", "before")):
                starts[which].append(start_sandbox(codes[which]))
        loads.append(load_average())
    same = points["before"] == points["after"]
    assert same, {s: (points["before"].get(s), points["after"].get(s)) for s in points["after"]}
    totals = sorted(set(points["after"].values()), key=float)

    def row(label: str, before: list[float], after: list[float]) -> str:
        diffs = [a - b for a, b in zip(after, before)]
        return (f"| {label} | {statistics.median(before):.2f} | {statistics.median(after):.2f} | "
                f"{statistics.median(diffs):+.2f} | {min(diffs):+.2f} … {max(diffs):+.2f} |")

    text = f"""## Grading isolation (`python -m bench.grading_isolation`)

A course of {STUDENTS} honest submissions of assignment 03 (a third correct, a third untouched, a third with
`soft_histogram` only: points {', '.join(totals)}) graded by `python -m lab.grading.grade --jobs 2` with
today's grader ({args.before}) and with this checkout's (`python -I` processes, the student's folder read
as data, a memory control group per sandbox, the read-only root and `/dev`, bounded answers), alternating
which goes first over {args.rounds} rounds; then the start of a sandboxed `python -c 'import torch,
lab.grading'` alone, {args.starts} interleaved pairs. Same points for every student: {'yes' if same else 'NO'}.
Wall-clock seconds, medians and the median of the paired differences; CPU seconds: user + system of the
grader and every process it started (getrusage of the waited-for children), which the machine's other work
barely moves. With `--jobs 2` on 2 cores, a submission's added wall time is about half its added CPU time.
CPU: {cpu_model()}; load average {min(loads):.1f}–{max(loads):.1f} on 2 cores.

| seconds | {args.before} | this checkout | added (median of pairs) | added, min … max |
|---|---|---|---|---|
{row("a batch of 24, per submission", seconds["before"], seconds["after"])}
{row("a batch of 24, CPU seconds per submission", cpu["before"], cpu["after"])}
{row("start of one sandbox, importing torch", starts["before"], starts["after"])}

Target (issue 42): at most 1 s added per submission.
"""
    publish("grading isolation", text, args.no_write)


if __name__ == "__main__":
    main()
