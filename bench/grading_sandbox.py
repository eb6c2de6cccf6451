"""What the grading sandbox costs: seconds per submission with bubblewrap against ``--no-sandbox``.

    python -m bench.grading_sandbox                  # 5 rounds; writes the "Grading sandbox" section
    python -m bench.grading_sandbox --rounds 2 --no-write

Grades the correct and the untouched (blank) submission of assignment 03 one by one with
``lab.grading.grade.run_submission``, sandboxed and not, interleaved (the order of the two modes
alternates from round to round) so that both see the same machine load. Reports each mode's median
wall-clock seconds per submission, the median of the paired differences (sandbox minus not, same
round and student) and their ratio. On a loaded machine those pairs scatter by seconds, so the part
that differs between the modes is also timed alone, interleaved: starting the student's Python and
importing torch and lab.grading, with and without bwrap (the calls after it are the same in both
modes). CPU time is not used: bwrap's PID-namespace init is not reaped by the grader, so the
sandboxed process's CPU time never reaches RUSAGE_CHILDREN.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import cpu_model, load_average, publish
from lab.grading.assignments import ASSIGNMENTS
from lab.grading.generate import generate
from lab.grading.grade import find_submissions, load_tests, run_submission
from lab.grading.sandbox import Limits, bwrap_command, require_sandbox
from lab.grading.sandbox import start as start_sandbox

ROOT = Path(__file__).resolve().parents[1]
NAME = "03_histogram_losses_and_bin_width"


def course(root: Path) -> Path:
    """submissions/correct (the solution) and submissions/blank (the student version), with the notebook."""
    a = ASSIGNMENTS[NAME]
    g = {x.name: x for x in generate(ROOT / "assignments", root / "build", only=NAME)}[NAME]
    for student, module in (("correct", ROOT / "assignments" / NAME / a.modules[0]),
                            ("blank", g.student_dir / a.modules[0])):
        (root / "submissions" / student).mkdir(parents=True)
        shutil.copy(module, root / "submissions" / student / a.modules[0])
        shutil.copy(g.student_dir / a.notebook, root / "submissions" / student / a.notebook)
    return root / "submissions"


def start_python(sandbox: bool, code: str) -> float:
    """Wall-clock seconds of ``python -c code``, sandboxed (bwrap and its control group) or not."""
    argv = [sys.executable, "-I", "-c", code]
    start = time.perf_counter()
    if sandbox:
        cmd, fds = bwrap_command(argv, [], Limits())
        proc, group = start_sandbox(cmd, fds, Limits())
        proc.wait()
        if group is not None:
            group.remove()
    else:
        subprocess.run(argv, check=True)
    return time.perf_counter() - start


def _row(label: str, off: list[float], on: list[float]) -> str:
    diffs = [a - b for a, b in zip(on, off)]
    return (f"| {label} | {statistics.median(off):.2f} | {statistics.median(on):.2f} | "
            f"{statistics.median(diffs):+.2f} | "
            f"{statistics.median(a / b for a, b in zip(on, off)):.2f} | {min(diffs):+.2f} … {max(diffs):+.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    args = parser.parse_args()
    require_sandbox()
    with tempfile.TemporaryDirectory(prefix="ranklab_bench_sandbox_") as tmp:
        subs = find_submissions(course(Path(tmp)))
        tests = load_tests(ROOT / "assignments", ASSIGNMENTS[NAME])
        seconds: dict[tuple[bool, str], list[float]] = {}
        points: dict[tuple[bool, str], float] = {}
        loads = [load_average()]
        for r in range(args.rounds):
            for sandbox in ((True, False) if r % 2 == 0 else (False, True)):
                for sub in subs:
                    start = time.perf_counter()
                    result = run_submission(sub, tests, timeout=120, sandbox=sandbox)
                    seconds.setdefault((sandbox, sub.student), []).append(time.perf_counter() - start)
                    points[(sandbox, sub.student)] = result.points
            loads.append(load_average())
        starts: dict[tuple[bool, str], list[float]] = {}
        for r in range(4 * args.rounds):
            for code in ("pass", "import torch, lab.grading"):
                for sandbox in ((True, False) if r % 2 == 0 else (False, True)):
                    starts.setdefault((sandbox, code), []).append(start_python(sandbox, code))
    assert all(points[(True, s.student)] == points[(False, s.student)] for s in subs), points  # same scores
    rows = [_row(f"grade one submission: {s.student} ({points[(True, s.student)]:g} points)",
                 seconds[(False, s.student)], seconds[(True, s.student)]) for s in subs]
    rows += [_row(f"start Python: `python -c '{code}'`", starts[(False, code)], starts[(True, code)])
             for code in ("pass", "import torch, lab.grading")]
    text = f"""## Grading sandbox (`python -m bench.grading_sandbox`)

Seconds to grade one submission of assignment 03 (2 test cells, 5 checks) with `run_submission`,
sandboxed (bubblewrap) and `--no-sandbox`, interleaved over {args.rounds} rounds; medians, and the
median of the paired differences (same round, same student), wall-clock seconds. Both modes run
the checks in the grader and the student's code in a process of its own: the difference is bwrap's
cost, which lies in starting the student's process — timed alone below, {4 * args.rounds} interleaved
pairs. CPU: {cpu_model()}; load average {min(loads):.1f}–{max(loads):.1f} on 2 cores (other jobs on
the machine: a whole submission's pairs scatter by seconds either way).

| seconds | `--no-sandbox` | sandbox | added (median of pairs) | ratio (median) | added, min … max |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Target (issue 32): at most 1 s added per submission.
"""
    publish("grading sandbox", text, args.no_write)


if __name__ == "__main__":
    main()
