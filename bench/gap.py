"""The decomposability gap (ROADMAP Eq. 6) on a whole test split: lab's counted APs against the
N x N sort of its definition (what ``decomposability_gap`` did before, and what the studies paid for
each run's held-out gap). Writes the "gap" section of docs/benchmarks.md.

    python -m bench.gap                  # N = 2,000, 5,000 and 14,672 (protocol v2's split), ~5 min
    python -m bench.gap --sizes 2000 --no-write

Data shaped like the glyphs' test split cut as the studies cut it: 8 images a class, D = 64, one
epoch of the sampler's batches, 32 classes x 4 images (every query has 3 positives in its batch).
CPU time of one thread (the studies' workers run one), peak memory above the start of the call
(in a process whose allocator returns freed memory).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

from bench.measure import cpu_model, cpu_time_and_peak, load_average, publish
from lab.metrics import average_precision, decomposability_gap

SIZES = (2000, 5000, 14672)
PER_CLASS, DIM, M, BATCH = 8, 64, 4, 128


def problem(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(embeddings (n, DIM), labels (n,), batch_ids (n,)): classes as noisy clusters; each class's
    images in groups of M, the groups shuffled and BATCH / M of them to a batch (a P x K epoch)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) // PER_CLASS
    centres = torch.randn(int(labels.max()) + 1, DIM, generator=g)
    embeddings = centres[labels] + 1.5 * torch.randn(n, DIM, generator=g)
    groups = torch.arange(n) // M  # M consecutive images share a class (PER_CLASS is a multiple of M)
    batch_of_group = torch.randperm(int(groups.max()) + 1, generator=g) // (BATCH // M)
    return embeddings, labels, batch_of_group[groups]


def gap_by_sort(embeddings: torch.Tensor, labels: torch.Tensor, batch_ids: torch.Tensor) -> float:
    """Eq. 6 the direct way: the N x N similarities, each row sorted twice (all items, its batch)."""
    e = F.normalize(embeddings.float(), dim=1)
    scores = e @ e.T
    targets = labels[:, None] == labels[None, :]
    others = ~torch.eye(len(e), dtype=torch.bool)
    in_batch = others & (batch_ids[:, None] == batch_ids[None, :])
    usable = (targets & in_batch).any(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        global_ap = average_precision(scores[usable], targets[usable], others[usable])
        batch_ap = average_precision(scores[usable], targets[usable], in_batch[usable])
    return float((batch_ap - global_ap).mean())


def run(sizes: tuple[int, ...]) -> list[dict]:
    rows = []
    for n in sizes:
        args = problem(n)
        values = {}

        def timed(name, fn):
            def call():
                values[name] = fn(*args)
            return cpu_time_and_peak(call, repeat=1, long=0.0)

        ours_s, ours_mb = timed("ours", decomposability_gap)
        sort_s, sort_mb = timed("sort", gap_by_sort)
        rows.append(dict(n=n, ours_s=ours_s, ours_mb=ours_mb, sort_s=sort_s, sort_mb=sort_mb,
                         diff=abs(values["ours"] - values["sort"]), gap=values["ours"]))
        print(f"N = {n}: ours {ours_s:.2f} s {ours_mb:.0f} MB, sort {sort_s:.2f} s {sort_mb:.0f} MB, "
              f"gap {values['ours']:.4f} (|difference| {rows[-1]['diff']:.1e})", flush=True)
    return rows


def markdown(rows: list[dict], load: tuple[float, float]) -> str:
    lines = [
        "## Decomposability gap on a whole split (`python -m bench.gap`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()}, one thread's CPU time, load average "
        f"{load[0]:.1f} before and {load[1]:.1f} after. {PER_CLASS} images a class, D = {DIM}, one epoch of "
        f"{BATCH}-image batches of {BATCH // M} classes x {M} (the studies' sampler: every query has positives in "
        "its batch). *sort*: Eq. 6 through the N x N similarities, each row sorted for its "
        "global and its batch AP (the gap before this benchmark; every v2 study run computed it once on "
        "the 14,672-image test split). *ours*: `lab.metrics.decomposability_gap`, both APs counted by "
        "the evaluation's engine in memory-budget chunks, one batch at a time.",
        "",
        "| N | ours (s) | sort (s) | speed-up | ours peak (MB) | sort peak (MB) | gap | abs. difference |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['n']:,} | {r['ours_s']:.2f} | {r['sort_s']:.2f} | {r['sort_s'] / r['ours_s']:.1f}x | "
                     f"{r['ours_mb']:.0f} | {r['sort_mb']:.0f} | {r['gap']:.4f} | {r['diff']:.1e} |")
    lines += ["", "The difference is the sort's float32 ranks against the engine's float64 sums."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="numbers of items N")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if any(n < 2 * PER_CLASS for n in args.sizes):
        parser.error(f"--sizes must be at least {2 * PER_CLASS}, got {args.sizes}")
    before = load_average()
    rows = run(tuple(args.sizes))
    publish("gap", markdown(rows, (before, load_average())), args.no_write)
    return rows


if __name__ == "__main__":
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") != "65536":
        # Peak memory means something only if freed blocks go back to the system (bench/losses.py).
        os.execve(sys.executable, [sys.executable, "-m", "bench.gap", *sys.argv[1:]],
                  {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})
    main()
