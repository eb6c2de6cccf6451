"""The loss engine against the old one (bench/frozen_autograd_engine.py) and against pytorch-metric-learning,
on CPU, in one run of a few minutes; writes the "losses" section of docs/benchmarks.md.

    python -m bench.losses                       # B = 1024 and 4096, 64-d embeddings (~6 minutes)
    python -m bench.losses --quick --no-write    # small batches, a few seconds: prints the section

1. Forward + backward of the loss alone (from cosine scores), 4 samples per class: today's engine
   and the new one, speed-up, largest differences of the per-query losses and of their gradients.
2. pytorch-metric-learning's FastAPLoss and SmoothAPLoss at equal B (embeddings in).
3. The loss's share of a small-CNN training step (forward + backward of model and loss).
4. Batches of 2 classes and of 1 class against 4 samples per class at equal B: time, and peak
   memory measured in a child process whose allocator returns freed memory (``few_classes``).
Times are CPU seconds on 1 thread (see ``measure.cpu_times``), the median of 3 after a warm-up.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from bench.loss_cases import (DIM, PER_CLASS, ScoreStep, TrainingStep, build, embedding_step, fast_ap_difference,
                              lab_loss, pml_loss)
from bench.measure import cpu_model, cpu_time_and_peak, cpu_times, load_average, write_section

ROOT = Path(__file__).resolve().parents[1]


TARGETS = ["smooth_ap", "sup_ap", "roadmap", "fast_ap", "soft_bin_ap"]  # the five (5x goal)
OTHERS = ["smooth_recall", "sup_recall", "calibration", "sup_hap", "sup_ndcg"]  # timed at B <= --others-max
SPEED_GOAL, SHARE_GOAL = 5.0, 0.05


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f}" if seconds >= 0.1 else f"{seconds * 1e3:.1f}"


def engines(sizes: list[int], others_max: int) -> tuple[str, dict]:
    """Section 1: today's engine against the new one, score level, 4 per class; and {(name, B): speed-up}
    of the issue's five."""
    lines = ["| loss | B | today, ms | new, ms | speed-up | max abs diff, losses | max abs diff, gradients |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    cosine, ratios = {}, {}
    for b in sizes:
        cosine[b] = cpu_times({b: embedding_step(lambda e, _: cosine_scores(e).sum(), b, PER_CLASS)})[b]
        for name in TARGETS + [n for n in OTHERS if b <= others_max]:
            steps = {e: ScoreStep(name, b, PER_CLASS, e) for e in ("today", "new")}
            t = cpu_times(steps)
            dv, dg = steps["new"].difference(steps["today"])
            ratio = t["today"] / t["new"]
            if name in TARGETS:
                ratios[name, b] = ratio
            mark = "" if name not in TARGETS else (" (goal met)" if ratio >= SPEED_GOAL else " (**below 5x**)")
            lines.append(f"| {name} | {b} | {ms(t['today'])} | {ms(t['new'])} | {ratio:.1f}x{mark} | {dv:.1e} | "
                         f"{dg:.1e} |")
            print(lines[-1], flush=True)
    return ("### The new engine against the old one (`bench/frozen_autograd_engine.py`, commit 802a172), "
            "4 samples per class\n\n"
            "The loss alone, from precomputed cosine scores (the embedding layer costs the same for both: "
            + ", ".join(f"{ms(cosine[b])} ms at B = {b}" for b in sizes) + " for normalise + cosine, forward + "
            "backward). Differences: per-query losses and their gradients with respect to the (B, B) scores, "
            f"float32. `{'`, `'.join(OTHERS)}`: up to B = {others_max} only.\n\n" + "\n".join(lines) + "\n"), ratios


# Why a loss can miss the 5x goal: what was measured about it, to print next to a miss.
WHY = {
    "smooth_ap": "SmoothAP had no bookkeeping to remove: today's engine already computed it as one (chunk, P, N) "
                 "block of sigmoids with two batched mat-vec sums (no H^- parts, no masks rebuilt), with 4 per "
                 "class in a single chunk up to B = 1365, so without checkpoint recomputation. Both engines "
                 "evaluate the same 3 B^2 sigmoids and their derivatives (about 8 passes over each entry: "
                 "difference, scale, sigmoid, sum, derivative, then the gradient's scale and two sums); what the "
                 "new one saves is autograd's temporaries and the cache misses of a block that does not fit in "
                 "cache, not masks or `where`. At B = 4096 today's chunks are also recomputed in the backward.",
    "roadmap": "ROADMAP is SupAP plus the calibration loss, an O(B^2) pass that was already lean in today's code "
               "(the `calibration` row) and adds about the same time to both engines, which pulls the ratio below "
               "SupAP's.",
}


def goal_summary(ratios: dict) -> str:
    missed = {k: r for k, r in ratios.items() if r < SPEED_GOAL}
    text = (f"Speed-up goal (>= {SPEED_GOAL:.0f}x for the issue's five losses at B = "
            f"{' and '.join(str(b) for b in sorted({b for _, b in ratios}))}): met in {len(ratios) - len(missed)} "
            f"of {len(ratios)} cases (a ratio near 5x can land on either side of it from one run to the next "
            "on these shared cores).")
    for (name, b), r in missed.items():
        text += f" **Missed: `{name}` at B = {b}, {r:.1f}x, {SPEED_GOAL / r:.2f}x short of the goal.**"
    for name in dict.fromkeys(name for name, _ in missed):
        text += f"\n\nWhy `{name}`: " + WHY.get(name, "not analysed.")
    return text + "\n"


def cosine_scores(emb: torch.Tensor) -> torch.Tensor:
    e = torch.nn.functional.normalize(emb, dim=1)
    return e @ e.T


def peers(fast_sizes: list[int], smooth_sizes: list[int]) -> str:
    """Section 2: pytorch-metric-learning, embeddings in, equal B."""
    try:
        from pytorch_metric_learning import __version__ as version
    except ImportError:
        return "### pytorch-metric-learning\n\nNot installed: no comparison.\n"
    lines = ["| loss | B | pytorch-metric-learning, ms | lab, ms | lab speed-up | abs diff of the loss |",
             "|---|---:|---:|---:|---:|---:|"]
    for pml_name, ours, sizes in (("FastAPLoss", "fast_ap", fast_sizes), ("SmoothAPLoss", "smooth_ap", smooth_sizes)):
        for b in sizes:
            t = cpu_times({"pml": embedding_step(pml_loss(pml_name), b, PER_CLASS),
                           "lab": embedding_step(lab_loss(ours, b), b, PER_CLASS)})
            diff = f"{fast_ap_difference(b):.1e}" if ours == "fast_ap" else "different objective"
            lines.append(f"| {pml_name} / {ours} | {b} | {ms(t['pml'])} | {ms(t['lab'])} | "
                         f"{t['pml'] / t['lab']:.1f}x | {diff} |")
            print(lines[-1], flush=True)
    return (f"### pytorch-metric-learning {version}, same run\n\nEmbeddings in (normalise + cosine included), "
            "4 samples per class. FastAPLoss (10 bins) is the objective of `fast_ap`: the losses differ by float "
            "rounding only. SmoothAPLoss is not `smooth_ap`'s objective (it ranks the query among its own "
            "positives and needs equal class sizes); it builds several (B, B, B) float tensors (about 20 GB at "
            f"B = 1024), so it is run at B = {', '.join(map(str, smooth_sizes))} only; its time is comparable, "
            "tau = 0.01 for both.\n\n" + "\n".join(lines) + "\n")


def training_share(size: int) -> str:
    """Section 3: the loss's share of a small-CNN training step."""
    step = TrainingStep(size)
    fns = {("model", ""): step.model_part, ("whole", "roadmap"): step.whole(build("roadmap", size // PER_CLASS))}
    fns.update({(engine, n): step.loss_part(build(n, size // PER_CLASS, engine))
                for n in TARGETS for engine in ("today", "new")})
    t = cpu_times(fns, long=30.0)
    model = t["model", ""]
    lines = ["| loss | today: loss, ms | share | new: loss, ms | share |", "|---|---:|---:|---:|---:|"]
    for n in TARGETS:
        cells = [f"{ms(t[e, n])} | {t[e, n] / (model + t[e, n]):.1%}" for e in ("today", "new")]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    met = all(t["new", n] / (model + t["new", n]) < SHARE_GOAL for n in TARGETS)
    return (f"### Share of a training step, B = {size}\n\nsmall_cnn ({DIM}-d), 1 x 32 x 32 images, "
            f"4 per class. Model forward + backward: {ms(model)} ms; the loss's forward + backward from the "
            f"embeddings (normalise + cosine included); share = loss / (model + loss). Check: a whole step with "
            f"`roadmap` (model + loss in one graph) took {ms(t['whole', 'roadmap'])} ms, model + loss = "
            f"{ms(model + t['new', 'roadmap'])} ms. Goal < 5 %: {'met' if met else 'not met'} for all five with the "
            "new engine.\n\n" + "\n".join(lines) + "\n")


def few_cases(size: int, big: int) -> list[tuple]:
    """(name, B, per class, engine) of section 4. The sigmoid losses with 1 or 2 classes are cubic in B
    (minutes at B = 4096): only the histogram losses run so at ``big``. Today's engine with 2 classes
    only for smooth_ap and the histogram losses (today's sup_ap and roadmap take over a minute each)."""
    cases = [(n, size, per, "new") for n in TARGETS for per in (PER_CLASS, size // 2, size)]
    cases += [(n, size, PER_CLASS, "today") for n in TARGETS]
    cases += [(n, size, size // 2, "today") for n in ("smooth_ap", "fast_ap", "soft_bin_ap")]
    cases += [(n, big, PER_CLASS, "new") for n in TARGETS]
    cases += [(n, big, big // 2, "new") for n in ("fast_ap", "soft_bin_ap")]
    return cases


def few_classes(size: int, big: int) -> str:
    """Section 4. Times in this process; peak memory in a child process where glibc returns every
    allocation of 64 KB or more to the system when it is freed (``MALLOC_MMAP_THRESHOLD_``): otherwise
    a step reuses the heap left by earlier, larger steps and its resident-set peak does not move (and
    fresh pages for every tensor would slow the timings down)."""
    cases = few_cases(size, big)
    times = {}
    for group in dict.fromkeys(c[:2] for c in cases):
        times.update(cpu_times({c: ScoreStep(*c) for c in cases if c[:2] == group}))
        print(f"few classes {group}: {[ms(times[c]) for c in cases if c[:2] == group]} ms", flush=True)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, "-m", "bench.losses", "--child", json.dumps(cases)], env=env, cwd=ROOT,
                         check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    peaks = {tuple(case): value for case, value in json.loads(out.splitlines()[-1])}
    lines = ["| loss | B | engine | 4 per class: ms | MB | 2 classes: ms | MB | 1 class: ms | MB |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for b in (size, big):
        for n in TARGETS:
            for engine in ("today", "new"):
                if (n, b, PER_CLASS, engine) not in times:
                    continue
                cells = [(n, b, per, engine) for per in (PER_CLASS, b // 2, b)]
                lines.append(f"| {n} | {b} | {engine} | " + " | ".join(
                    f"{ms(times[c])} | {peaks[c]:.0f}" if c in times else "not run | —" for c in cells) + " |")
    two = times[TARGETS[0], size, size // 2, "new"]
    return ("### Batches of 2 classes and of 1 class, equal B\n\nForward + backward from the scores, CPU ms as "
            "above; MB: the rise of the peak resident set in one run, measured in a separate process whose "
            "allocator returns freed memory to the system (one run each: noise of a few MB, more where a first "
            "call allocates for good). With 2 classes a query has "
            "B/2 - 1 positives, with 1 class B - 1: the sigmoid losses' (query, positive, item) sums grow as B^3 "
            "(every pair within the sigmoid's band counts, exact sums need them all), so they run at "
            f"B = {size} only: at B = {big} with 2 classes `{TARGETS[0]}` would take about "
            f"{two * (big / size) ** 3:.0f} s (x{(big / size) ** 3:.0f} its B = {size} time). The histogram losses "
            "are O(B^2) whatever the classes. Not run: today's engine with 1 class, and today's `sup_ap` and "
            "`roadmap` with 2 classes (cubic: over a minute each).\n\n" + "\n".join(lines) + "\n")


def child(cases: list[list]) -> None:
    out = []
    with contextlib.redirect_stdout(sys.stderr):
        for name, size, per, engine in cases:
            _, peak = cpu_time_and_peak(ScoreStep(name, size, per, engine), repeat=0)  # one run: the peak only
            out.append([[name, size, per, engine], peak])
            print(out[-1], flush=True)
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--others-max", type=int, default=1024)
    parser.add_argument("--smooth-pml-sizes", type=int, nargs="+", default=[512])
    parser.add_argument("--quick", action="store_true", help="B = 64 and 128: a check that the script runs")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    if args.quick:
        args.sizes, args.others_max, args.smooth_pml_sizes = [64, 128], 64, [64]
    small, big = args.sizes[0], args.sizes[-1]
    load_start = load_average()
    compared, ratios = engines(args.sizes, args.others_max)
    sections = [goal_summary(ratios), compared, peers(args.sizes, args.smooth_pml_sizes), training_share(small),
                few_classes(small, big)]
    text = (
        "## Losses: time and memory (`python -m bench.losses`)\n\n"
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads by default; the timings use 1). Load average (1 min) at the start / "
        f"end of the run: {load_start:.2f} / {load_average():.2f} (other agents share the cores). "
        "The CUDA path is timed in the GPU section below (`python -m bench.gpu`). Times: CPU time of one thread "
        "(`torch.set_num_threads(1)`, `time.process_time`), the median of 3 runs after a warm-up, one run for "
        "calls over 2 s; the compared versions' runs interleaved. On shared cores wall-clock times move "
        "several-fold with the load; one thread's CPU time moves less, but the other processes share the caches, "
        "so the same case can still differ by up to 2x within a run (compare the first and last tables): read the "
        f"ratios of interleaved runs, not single times. Batches: B L2-normalised {DIM}-d embeddings "
        "(the trainer's width), the batch retrieving from itself.\n\n"
        "`torch.compile` is not used: the engine's loops run over tiles whose count and shapes depend on the "
        "data (positives per query, compacted item lists, `nonzero`), and the gradient is taken inside a custom "
        "`autograd.Function` in the forward; each is a graph break, so there is little left to fuse, and on CPU "
        "the first call of a compiled function costs a C++ build. Not measured.\n\n" + "\n".join(sections))
    if args.no_write:
        print(text)
    else:
        write_section("losses", text)
        print("wrote docs/benchmarks.md")


if __name__ == "__main__":
    main()
