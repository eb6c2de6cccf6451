"""Evaluation time: lab.metrics.retrieval_metrics next to pytorch-metric-learning's AccuracyCalculator.

    python -m bench.metrics                     # N = 15k and 30k, four kinds of data; writes the "metrics" section
    python -m bench.metrics --before cafc424    # also an earlier commit's retrieval_metrics, interleaved
    python -m bench.metrics --sizes 5000 --kinds easy random --no-write

N L2-normalised 64-d embeddings, 8 per class, every item querying all the others (self-retrieval). Four
kinds of data, because the counting does different work on each (lab.metrics.counting):
- easy: images close to their class centre (R@1 ~ 0.93, a trained model): few items above a query's positives;
- clustered: classes packed 10 by 10 in tight clusters (R@1 ~ 0.3): the positives among the top ~80, mixed
  with their cluster's other classes;
- hard: images far from their class centre (R@1 ~ 0.002, early in training): most of a row above the positives;
- random: embeddings that ignore the labels (R@1 ~ 0.0005): the positives anywhere in the row.

In one process, on the CPU with the machine's threads, the methods interleaved (each round runs every
method once, so a burst of load hits all alike); the faster of the rounds is kept. AccuracyCalculator
(k="max_bin_count": precision_at_1 and mAP@R) against ours on the same embeddings: its metrics (R@1,2,4,8
and mAP@R, ``full_map=False``) and all (also the full mAP, the default). ``--before REV``: the
retrieval_metrics of an earlier commit of this repository (its ``lab`` exported by ``git archive`` and
imported as ``lab_before``) in the same rounds. The R@1 / mAP@R differences with AccuracyCalculator are
printed and asserted.

:func:`versus_accuracy_calculator` (N, D, device) is the same comparison for bench/gpu.py.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

from bench.measure import machine, publish
from lab.metrics import retrieval_metrics

ROOT = Path(__file__).resolve().parents[1]
DIM, PER_CLASS, FINE_PER_COARSE = 64, 8, 10
KINDS = ("easy", "clustered", "hard", "random")
SIZES = (15000, 30000)
# Spread of an image around its class centre, and of the class centres around their cluster's (coarse)
# centre. In more dimensions neighbours separate better: the hard spread grows as D^(1/4) to keep R@1 low.
NOISE = {"easy": 1.0, "clustered": 0.3, "hard": 6.0}
CENTRES = {"easy": 0.7, "clustered": 0.1, "hard": 0.7}
# Between two timed runs on the CPU: faiss's OpenMP threads spin on after it returns, and the next run
# paid for them (5k hard, one thread: 0.127 s instead of 0.097 s for the run after the faiss backend).
SETTLE_SECONDS = 0.3
MAX_DIFFERENCE = 1e-4  # of R@1 or mAP@R between ours and AccuracyCalculator (run())


CUDA_NOTE = (
    "**On CUDA:** the same comparison is timed by `python -m bench.gpu` (the GPU section below, part "
    "\"Evaluation\"). There `retrieval_metrics` runs on the embeddings' device: chunks of a quarter of the "
    "free memory, at most 2 GB (about 1,300 queries a chunk at N = 100k, `lab.metrics.chunking`), the counts "
    "from one broadcast comparison (at most 8 relevant items a query) or from bucket keys and a histogram "
    "(more), with no wait on the host inside the chunk loop and one move to the host at the end. Not yet "
    "measured on a GPU: the crossover between the two ways of counting (`DEVICE_MAX_PASSES = 8`, set from "
    "bytes moved), and whether the histogram's atomic adds contend (`SPREAD` spare bins).\n")


def embeddings(n: int, seed: int = 0, data: str = "easy", dim: int = DIM) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, dim) L2-normalised embeddings and (n, 2) labels (fine, coarse), in shuffled order; ``data``
    one of KINDS (the same labels for every kind)."""
    if data not in KINDS:
        raise ValueError(f"data must be one of {KINDS}, got {data!r}")
    g = torch.Generator().manual_seed(seed)
    fine = torch.arange(n) // PER_CLASS
    fine = fine[torch.randperm(n, generator=g)]
    num_fine = int(fine.max()) + 1
    labels = torch.stack([fine, fine // FINE_PER_COARSE], 1)
    if data == "random":  # drawn after the labels: the same labels as the other kinds
        return F.normalize(torch.randn(n, dim, generator=g), dim=1), labels
    coarse_centres = torch.randn(num_fine // FINE_PER_COARSE + 1, dim, generator=g)
    centres = (coarse_centres[torch.arange(num_fine) // FINE_PER_COARSE]
               + CENTRES[data] * torch.randn(num_fine, dim, generator=g))
    noise = NOISE[data] * (dim / DIM) ** 0.25 if data == "hard" else NOISE[data]
    return F.normalize(centres[fine] + noise * torch.randn(n, dim, generator=g), dim=1), labels


def _accuracy_calculator(device: torch.device):
    """pytorch-metric-learning's AccuracyCalculator (R@1 and mAP@R), or None if it is not installed."""
    try:
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    except ImportError:
        return None
    return AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r"), k="max_bin_count",
                              device=device)


def _differences(ours: dict, theirs: dict) -> dict[str, float]:
    return {"R@1": abs(ours["R@1"] - theirs["precision_at_1"]),
            "mAP@R": abs(ours["mAP@R"] - theirs["mean_average_precision_at_r"])}


def _timed(fn: Callable[[], dict], device: torch.device, clock: Callable[[], float] = time.perf_counter):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = clock()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return clock() - start, out


def _interleaved(fns: dict[str, Callable[[], dict]], repeat: int, device: torch.device,
                 clock: Callable[[], float] = time.perf_counter,
                 keep: Callable = None) -> tuple[dict[str, float], dict[str, dict]]:
    """({name: seconds}, {name: last output}) of ``repeat`` rounds, each running every function once: a
    burst of load on the machine hits every method alike. ``keep``: the rounds' times -> one (the median)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    outputs = {}
    for _ in range(repeat):
        for name, fn in fns.items():
            if device.type == "cpu":
                time.sleep(SETTLE_SECONDS)
            seconds, outputs[name] = _timed(fn, device, clock)
            times[name].append(seconds)
    keep = keep or (lambda ts: sorted(ts)[len(ts) // 2])
    return {name: keep(ts) for name, ts in times.items()}, outputs


def versus_accuracy_calculator(n: int, dim: int, device, repeat: int = 3, seed: int = 0, warm_theirs: bool = True,
                               kinds: Sequence[str] = ("easy", "hard")) -> dict[str, dict]:
    """For bench/gpu.py: retrieval_metrics and AccuracyCalculator on the same embeddings on ``device``.

    -> {kind: row} for each of ``kinds``, row = {"n", "dim", "device", "R@1", "mAP@R", "ours_s" (all metrics),
    "ours_top_s" (``full_map=False``: its metrics), "accuracy_calculator_s", "max_abs_diff"}: median
    wall-clock seconds of ``repeat`` interleaved runs after one warm-up of each (of ours only with
    ``warm_theirs=False``) (the device synchronised around every run), and the largest
    difference of R@1 and mAP@R between the two. Without pytorch-metric-learning its time and the
    difference are None. Runs on the CPU too (small N in tests/test_bench_metrics.py).
    """
    device = torch.device(device)
    calculator = _accuracy_calculator(device)
    rows = {}
    for data in kinds:
        emb, labels = embeddings(n, seed, data, dim)
        emb, fine = emb.to(device), labels[:, 0].to(device)
        fns = {"ours": lambda: retrieval_metrics(emb, fine),
               "ours_top": lambda: retrieval_metrics(emb, fine, full_map=False)}
        if calculator is not None:
            fns["theirs"] = lambda: calculator.get_accuracy(emb, fine)
        # Warm-up: CUDA context, kernels, faiss (``warm_theirs=False``: ours only, where theirs takes
        # tens of seconds a call and was warmed up at a smaller size).
        _interleaved(fns if warm_theirs else {k: f for k, f in fns.items() if k != "theirs"}, 1, device)
        median, out = _interleaved(fns, repeat, device)
        diff = None if calculator is None else {f"{name} {key}": value for name in ("ours", "ours_top")
                                                 for key, value in _differences(out[name], out["theirs"]).items()}
        rows[data] = {"n": n, "dim": dim, "device": str(device),
                      "R@1": out["ours"]["R@1"], "mAP@R": out["ours"]["mAP@R"],
                      "ours_s": median["ours"], "ours_top_s": median["ours_top"],
                      "accuracy_calculator_s": median.get("theirs"),
                      "max_abs_diff": None if diff is None else max(diff.values())}
    return rows


def lab_at(rev: str):
    """The ``lab.metrics`` of commit ``rev`` of this repository, imported as ``lab_before.metrics``
    (its ``lab`` exported by ``git archive``; lab's modules import each other relatively)."""
    folder = Path(tempfile.mkdtemp(prefix="ranklab-before-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "lab"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "lab").rename(folder / "lab_before")
    package = folder / "lab_before"
    spec = importlib.util.spec_from_file_location("lab_before", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["lab_before"] = module  # its relative imports find it there (no sys.path edit)
    spec.loader.exec_module(module)
    return importlib.import_module("lab_before.metrics")


def run(n: int, data: str, rounds: int, before=None) -> dict:
    """One row: AccuracyCalculator, ours (its metrics, all) and ``before``'s, interleaved; the fastest round."""
    cpu = torch.device("cpu")
    emb, labels = embeddings(n, data=data)
    fine = labels[:, 0]
    calculator = _accuracy_calculator(cpu)
    if calculator is None:
        raise SystemExit("pytorch-metric-learning is not installed: nothing to compare with")
    methods = {"pml": lambda: calculator.get_accuracy(emb, fine),
               "ours_top": lambda: retrieval_metrics(emb, fine, full_map=False),
               "ours_all": lambda: retrieval_metrics(emb, fine)}
    if before is not None:
        methods |= {"before_top": lambda: before.retrieval_metrics(emb, fine, full_map=False),
                    "before_all": lambda: before.retrieval_metrics(emb, fine)}
    wall, outputs = _interleaved(methods, rounds, cpu, keep=min)
    top = outputs["ours_top"]
    diff = max(max(_differences(outputs[name], outputs["pml"]).values()) for name in methods if name != "pml")
    print(f"N={n} {data}: " + ", ".join(f"{k} {v:.2f} s" for k, v in wall.items())
          + f"; R@1 {top['R@1']:.4f}, mAP@R {top['mAP@R']:.4f}; max |difference| with AccuracyCalculator {diff:.1e}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    # The same numbers as AccuracyCalculator, up to float32 rounding: faiss's product and torch's sum in
    # another order, and a near-tie between a positive and a negative may fall either way (one query's
    # flip moves mAP@R by up to 1 / (R Q): 5e-6 at 30k).
    assert diff <= MAX_DIFFERENCE, diff
    return {"wall": wall, "top": top, "diff": diff, "load": os.getloadavg()[0]}


def _ratio(wall: dict, name: str) -> str:
    return f"{wall[name] / wall['pml']:.2f}" if name in wall else "—"


def table(results: dict[tuple[int, str], dict]) -> str:
    before = any("before_top" in r["wall"] for r in results.values())
    head = ["N", "data", "R@1", "mAP@R", "AccuracyCalculator", "ours, its metrics", "ratio", "ours, all", "ratio"]
    if before:
        head += ["before, its metrics", "ratio", "before, all", "ratio"]
    lines = ["| " + " | ".join(head) + " | max abs diff | load (1 min) |",
             "|---:|---|" + "---:|" * (len(head) - 2) + "---|---:|"]
    for (n, data), r in results.items():
        w = r["wall"]
        cells = [f"{n:,}", data, f"{r['top']['R@1']:.3f}", f"{r['top']['mAP@R']:.3f}", f"{w['pml']:.2f} s",
                 f"{w['ours_top']:.2f} s", _ratio(w, "ours_top"), f"{w['ours_all']:.2f} s", _ratio(w, "ours_all")]
        if before:
            cells += [f"{w['before_top']:.2f} s", _ratio(w, "before_top"), f"{w['before_all']:.2f} s",
                      _ratio(w, "before_all")]
        lines.append("| " + " | ".join(cells) + f" | {r['diff']:.0e} | {r['load']:.1f} |")
    return "\n".join(lines)


def goals(results: dict[tuple[int, str], dict]) -> str:
    """Issue 34's target, met or missed where: its metrics in at most AccuracyCalculator's time, every kind."""
    missed = [f"N = {n:,} {data}: {r['wall']['ours_top'] / r['wall']['pml']:.2f}" for (n, data), r in results.items()
              if r["wall"]["ours_top"] > r["wall"]["pml"]]
    return ("- Goal, its metrics (R@k and mAP@R, `full_map=False`) in at most AccuracyCalculator's time on every "
            "kind of data (ratio ours / theirs <= 1): " + ("met at every N." if not missed else
                                                              "**missed** at " + "; ".join(missed) + "."))


def busy(load: float, cores: Optional[int] = None) -> str:
    """A caveat when the machine had more runnable jobs than cores: the ratios then hold for that load."""
    cores = cores or os.cpu_count()
    if load <= cores:
        return ""
    return (f"- The load ({load:.1f} on {cores} cores) exceeded the cores: every method waited for a core, "
            "and a method whose threads wait for each other (AccuracyCalculator's OpenMP k-NN, a 2-thread product) "
            "loses more than one whose threads each take whole pieces of work (ours since the chunk workers). "
            "On an idle machine the ratios differ: re-run `python -m bench.metrics` there before quoting them.\n")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the fastest is kept")
    parser.add_argument("--before", metavar="REV", help="also time the retrieval_metrics of this commit")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    before = lab_at(args.before) if args.before else None
    load_before = os.getloadavg()
    results = {(n, data): run(n, data, args.rounds, before) for n in args.sizes for data in args.kinds}
    load_after = os.getloadavg()
    revision = f" Before: `{args.before}`'s retrieval_metrics, in the same rounds." if args.before else ""
    text = (
        "## Evaluation: exact metrics at library speed (`python -m bench.metrics`)\n\n"
        f"N L2-normalised {DIM}-d embeddings, {PER_CLASS} per class, every image querying all the others "
        "(self-retrieval), four kinds of data: easy (images near their class centre, a trained model), "
        f"clustered (classes packed {FINE_PER_COARSE} by {FINE_PER_COARSE} in tight clusters), hard (images far "
        "from their class centre, early in training) and random (embeddings that ignore the labels). Wall-clock "
        f"time with the machine's threads, the methods interleaved in one process, the fastest of {args.rounds} "
        f"rounds: {machine()}. Load average (1, 5, 15 min) before: {', '.join(f'{x:.1f}' for x in load_before)}; "
        f"after: {', '.join(f'{x:.1f}' for x in load_after)}, on {os.cpu_count()} cores shared with other jobs "
        "(each row's own 1-min load in its last column: compare ratios within a row, absolute times less so).\n\n"
        "AccuracyCalculator is pytorch-metric-learning's (`k=\"max_bin_count\"`: precision_at_1, which is R@1, and "
        "mAP@R), its k-NN by faiss on the CPU. Ours, its metrics: R@1, 2, 4, 8 and mAP@R (`full_map=False`); ours, "
        "all: also the full mAP (every positive's exact rank, the default). Ratio = our time / AccuracyCalculator's "
        f"in the same round (below 1: ours is faster).{revision} Max abs diff: the largest difference of R@1 or "
        "mAP@R between any of ours and AccuracyCalculator.\n\n"
        + table(results) + "\n\n" + goals(results) + "\n" + busy(max(load_before[0], load_after[0]))
        + ("" if torch.cuda.is_available() else "\n" + CUDA_NOTE)
    )
    publish("metrics", text, dry_run=args.no_write)


if __name__ == "__main__":
    main()
