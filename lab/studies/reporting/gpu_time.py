"""The results page's GPU runs beside the same runs on the CPU: their time, and their numbers.

Study runs trained again with ``--device cuda`` (``results/gpu/v2/*.json``, read by
``compute.gpu_runs``) are the same config and seed as a stored CPU run (their key is the same: the
device is not part of it), so each gives a measured ratio of run times. It is not the same run bit for
bit: another device runs other kernels that sum in other orders, so the metrics differ. The page shows
both, and how that difference compares with the spread over seeds of the same loss on the CPU, so a
reader can tell whether the device could move a verdict.
"""
from __future__ import annotations

import statistics
from typing import Any, Sequence

from ..running.spec import record_key

METRICS = ("mAP@R", "R@1")


def _run_but_seed(rec: dict[str, Any]) -> str:
    """The key of the run ``rec`` trained, at seed 0: equal for the seeds of one run. Not its config dict:
    a record from a later commit states fields an older one left at their default (``amp``), the same run."""
    unseeded = {**rec, "config": {**rec["config"], "seed": 0}}
    if "trained_config" in rec:
        unseeded["trained_config"] = {**rec["trained_config"], "seed": 0}
    return record_key(unseeded)


def gpu_rows(gpu: Sequence[dict[str, Any]], cpu_runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per GPU run that has a CPU twin in ``cpu_runs`` (same key): run seconds on each device,
    their ratio, each metric on each device and the GPU's minus the CPU's (in points), and that metric's
    std over the CPU runs of the same config at every seed (None below two seeds). Sorted by method.
    A pair without the metrics (a timing-only record, as tests build) has no row."""
    rows = []
    for run in gpu:
        cpu = cpu_runs.get(run["key"])
        if cpu is None or not all(m in cpu and m in run for m in METRICS):
            continue
        run_key = _run_but_seed(cpu)
        seeds = [r for r in cpu_runs.values() if "config" in r and _run_but_seed(r) == run_key]
        row: dict[str, Any] = {"method": run["method"], "seed": run["seed"], "cpu_s": cpu["seconds"],
                               "gpu_s": run["seconds"], "ratio": cpu["seconds"] / run["seconds"],
                               "seeds": len(seeds)}
        for m in METRICS:
            row[m] = (100 * cpu[m], 100 * run[m], 100 * (run[m] - cpu[m]),
                      100 * statistics.stdev(r[m] for r in seeds) if len(seeds) > 1 else None)
        rows.append(row)
    return sorted(rows, key=lambda r: (r["method"], r["seed"]))


def _span(values: Sequence[float], fmt: str) -> str:
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low} to {high}" if "+" in fmt else f"{low}-{high}"


def _code(gpu: Sequence[dict[str, Any]]) -> str:
    if all(r.get("provenance") for r in gpu):
        return "code " + "; ".join(sorted({f"{(r['provenance'].get('commit') or 'no git')[:7]}, torch "
                                           f"{r['provenance'].get('torch', '?')}" for r in gpu}))
    return "their records carry no code version: results/gpu/README.md gives it"


def gpu_time(gpu: Sequence[dict[str, Any]], cpu_runs: dict[str, dict[str, Any]]) -> str:
    """The paragraph and table comparing ``gpu`` runs with their CPU twins in ``cpu_runs``; '' if none has one."""
    rows = gpu_rows(gpu, cpu_runs)
    if not rows:
        return ""
    names = ", ".join(sorted({r.get("accelerator") or r["device"] for r in gpu}))
    seeds = sorted({r["seed"] for r in rows})
    methods = sorted({r["method"] for r in rows})
    text = (f"**The same runs on a GPU.** Seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} of "
            f"{', '.join(methods[:-1]) + ' and ' if len(methods) > 1 else ''}{methods[-1]} trained again on {names} "
            f"({_code(gpu)}): {_span([r['gpu_s'] for r in rows], ',.0f')} s a run against "
            f"{_span([r['cpu_s'] for r in rows], ',.0f')} s on one CPU core, "
            f"{_span([r['ratio'] for r in rows], '.0f')}x "
            "faster (run time, evaluation included). "
            "Same config and seed on another device is not the same run bit for bit (its kernels sum in other "
            "orders): the GPU's minus the CPU's value is "
            + ", ".join(f"{_span([r[m][2] for r in rows], '+.2f')} pt of {m}" for m in METRICS) + ".")
    spread = [(abs(r["mAP@R"][2]), r["mAP@R"][3]) for r in rows if r["mAP@R"][3] is not None]
    if spread:
        within = sum(d <= s for d, s in spread)
        text += (f" {within} of {len(spread)} mAP@R differences are within one std of that loss's CPU runs over "
                 f"{_span([r['seeds'] for r in rows], 'd')} seeds ({_span([s for _, s in spread], '.2f')} pt).")
    header = ("| run | CPU s | GPU s | CPU / GPU | " + " | ".join(f"{m} CPU | {m} GPU | Δ {m} (pt)" for m in METRICS)
              + " |")
    lines = [text, "", header, "|" + "---|" * (4 + 3 * len(METRICS))]
    for r in rows:
        cells = [f"{r['method']}, seed {r['seed']}", f"{r['cpu_s']:,.0f}", f"{r['gpu_s']:,.0f}", f"{r['ratio']:.1f}x"]
        for m in METRICS:
            cells += [f"{r[m][0]:.2f}", f"{r[m][1]:.2f}", f"{r[m][2]:+.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
