"""The CUDA section of docs/benchmarks.md, in one command on one GPU, in under 10 minutes.

    python -m bench.gpu              # needs a CUDA device; without one it says so and exits 0
    python -m bench.gpu --no-write   # print the section instead of writing it
    python -m bench.gpu --smoke      # tiny sizes on whatever device there is (CPU too): checks the script
    python -m bench.gpu --sections peers,eval   # re-measure some parts (losses, peers, amp, eval, train)
    python -m bench.gpu --deadline 300          # parts not started within 300 s are stated as not run
    python -m bench.gpu --profile smooth_ap:16384   # one loss call under torch.profiler: its top ops
    bash bench/gpu_session.sh 520   # a lent GPU's whole check in one call: profiles, this, tests, v2's time

1. Every loss at B = 1024, 4096, 16384 with 4 per class, 2 classes, and 2 levels for the
   hierarchical losses, fwd + bwd from the embeddings, on three engines:
   - the default on CUDA (fused Triton kernels, device budget);
   - the PyTorch path with the device budget;
   - "CPU-sized": the engine as it ran on every device before, cache-sized blocks and tiles.
   Columns: time, peak memory, largest differences.
2. Peers at equal B: the papers' cubic SmoothAP, and pytorch-metric-learning's FastAPLoss and
   SmoothAPLoss (`pip install pytorch-metric-learning` to include them).
3. AMP: embeddings in bf16 / fp16 (the loss stays float32): time and the difference from float32.
4. Evaluation: retrieval_metrics against pytorch-metric-learning's AccuracyCalculator at 15k and
   100k x 128 (easy and hard data, bench/metrics.py), and `lab eval --eval-images all` on glyphs.
5. Training throughput with the data path against the model alone (bench/train.py): small_cnn at
   B = 256 and resnet50 @224 bf16 at B = 128.
The load, the GPU, torch and Triton versions head the section; each target of issue 20 is stated
as met or missed.

This module runs the sections and the profile; the cases and engines are in bench/gpu_cases.py, the
tables in bench/gpu_tables.py, the targets and their verdicts in bench/gpu_targets.py.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Optional

import torch

import lab.core.budget as budget
import lab.losses as L
from bench.gpu_cases import ENGINES, Case, Deadline, ms
from bench.gpu_tables import amp_table, eval_table, eval_whole_split, loss_tables, peer_table, train_table
from bench.gpu_targets import target_lines
from bench.measure import DOCS, load_average, publish, write_section
from lab.losses.engine import fused_sums


def describe(device: torch.device) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU (smoke run on the CPU)"
    triton = getattr(fused_sums.triton, "__version__", "not installed")
    free = f", {torch.cuda.mem_get_info(device)[0] / 2**30:.0f} GiB free at the start" if device.type == "cuda" else ""
    return (f"{gpu}{free}; torch {torch.__version__}, Triton {triton}; load average (1 min) {load_average():.1f} "
            f"on {os.cpu_count()} CPUs; default memory budget per loss call "
            f"{budget.budget_bytes(device) / 2**20:.0f} MB")


def guarded(title: str, build: Callable[[], str], deadline: Deadline) -> str:
    """One section: its tables, or why it has none (the deadline passed, or it failed on this machine:
    the traceback goes to the run's output and the other sections still run)."""
    if deadline.passed():
        return f"### {title}\n\n{deadline.note()[0].upper()}{deadline.note()[1:]}.\n"
    try:
        return f"### {title}\n\n" + build()
    except Exception as error:
        traceback.print_exc()
        return f"### {title}\n\n**Failed** on this machine: `{type(error).__name__}: {str(error)[:300]}`.\n"


SECTIONS = ("losses", "peers", "amp", "eval", "train")  # --sections: each a block of its own in the docs
HEAD = ("## GPU (`python -m bench.gpu`)\n\nTimes: wall clock with `torch.cuda.synchronize`, median of 3 after a "
        "warm-up (one run when a call takes over a second); MB: peak of `torch.cuda.max_memory_allocated` above the "
        "inputs. Loss embeddings: B x 512, L2-normalised inside the loss, fwd + bwd. Each part below names the run "
        "that measured it: `python -m bench.gpu --sections peers,eval` re-measures those parts alone.")


def write_part(key: str, markdown: str, path: Path = DOCS) -> None:
    """Replace block ``gpu-<key>`` inside the ``gpu`` block of docs/benchmarks.md; a ``gpu`` block from
    before the parts existed (no ``gpu-head``) is replaced whole."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if "<!-- BEGIN gpu-head -->" not in text:
        write_section("gpu", "<!-- BEGIN gpu-head -->\n<!-- END gpu-head -->", path)
        text = path.read_text()
    if f"<!-- BEGIN gpu-{key} -->" not in text:
        text = text.replace("<!-- END gpu -->", f"<!-- BEGIN gpu-{key} -->\n<!-- END gpu-{key} -->\n<!-- END gpu -->")
        path.write_text(text)
    write_section(f"gpu-{key}", markdown, path)


def profile(spec: str, device: torch.device) -> str:
    """``NAME:B[:composition]`` (composition "4/class", "2 classes" or "2 levels"; default 4/class): one
    loss call, fwd + bwd, under torch.profiler after a warm-up -> the 20 ops with the most device time
    (CPU time without a GPU). What a target's time is made of, before changing anything."""
    name, size, *rest = spec.split(":")
    composition = rest[0] if rest else "4/class"
    if name not in L.LOSSES or composition not in ("4/class", "2 classes", "2 levels") or not size.isdigit():
        raise SystemExit(f"--profile takes NAME:B[:composition] with NAME one of {', '.join(L.LOSSES)} and "
                         f"composition 4/class, 2 classes or 2 levels; got {spec!r}")
    case = Case(name, int(size), composition, device)
    case()  # warm-up: kernels compiled, allocator filled
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with torch.profiler.profile(activities=activities) as prof:
        case()
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=20)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print the section, do not write docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on any device: check the script only")
    parser.add_argument("--deadline", type=float, default=540.0,
                        help="seconds: what has not started by then is stated as not run (default 540)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated parts to measure, of {', '.join(SECTIONS)} (default all)")
    parser.add_argument("--profile", metavar="NAME:B[:composition]",
                        help="profile one loss call instead (e.g. smooth_ap:16384): print its top ops, write nothing")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown or not chosen:
        parser.error(f"--sections takes a comma-separated list of {', '.join(SECTIONS)}; got {args.sections!r}")
    if not torch.cuda.is_available() and not args.smoke:
        print("bench/gpu.py measures the CUDA path and this machine has no CUDA device: nothing measured, nothing "
              "written. (--smoke runs it at tiny sizes on the CPU, to check the script.)")
        return 0
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.profile:
        print(profile(args.profile, device))
        return 0
    sizes = [16, 32] if args.smoke else [1024, 4096, 16384]
    engines = ENGINES if device.type == "cuda" else ("pytorch", "cpu-sized")
    start, deadline = time.perf_counter(), Deadline(args.deadline)
    dry_run = args.no_write or args.smoke
    run = (f"Measured {time.strftime('%Y-%m-%d')} by `python -m bench.gpu --sections {','.join(chosen)}`: "
           f"{describe(device)}.")
    times: dict = {}

    def losses() -> str:
        tables, measured = loss_tables(sizes, device, engines, deadline)
        times.update(measured)
        return tables

    def evaluation() -> str:
        table, eval_times = eval_table([500, 1000] if args.smoke else [15_000, 100_000], device, deadline)
        hundred_k = eval_times.get((100_000, "easy"))
        verdict = "not measured" if hundred_k is None else "met" if hundred_k <= 1.0 else "**missed**"
        text = table + f"\n- `retrieval_metrics`, 100k x 128, <= 1 s: {ms(hundred_k)} ms, {verdict}."
        if deadline.passed():
            return text + f"\n- `lab eval --eval-images all` on glyphs: {deadline.note()}.\n"
        seconds, images = eval_whole_split(device, 500 if args.smoke else None)
        return text + (f"\n- `lab eval --eval-images all` on glyphs (small_cnn, {images} images), <= 5 s: "
                       f"{seconds:.1f} s, " + ("met" if seconds <= 5.0 else "**missed**") + ".\n")

    plan = {"losses": lambda: guarded("Every loss, three engines", losses, deadline)
                                      + "\n### Targets\n\n" + target_lines(times),
            "peers": lambda: guarded("Peers, 4 per class", lambda: peer_table(sizes[:2], device), deadline),
            "amp": lambda: guarded("Mixed precision", lambda: amp_table(sizes[1], device), deadline),
            "eval": lambda: guarded("Evaluation", evaluation, deadline),
            "train": lambda: guarded("Training throughput", lambda: train_table(device, args.smoke), deadline)}
    parts = [HEAD]
    if not dry_run:
        write_part("head", HEAD)
    for key in chosen:
        parts.append(f"{plan[key]()}\n{run}")
        if not dry_run:  # part by part: a run cut off still leaves what it measured
            write_part(key, parts[-1])
    print(f"Whole run: {time.perf_counter() - start:.0f} s ({', '.join(chosen)}).")
    if dry_run:
        publish("gpu", "\n\n".join(parts), dry_run=True)
    else:
        print(f"wrote the GPU parts {', '.join(chosen)} of docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
