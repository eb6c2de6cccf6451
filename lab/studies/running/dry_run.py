"""``python -m lab study NAME --dry-run``: what a call would train, and what it should cost on a GPU; nothing runs
and no file is written. One line per run (its key, study, setting, seed, steps, GPU hours), then per study and in
all the runs with an estimate, the runs without one and why, and the measurement the estimates rest on
(:mod:`.gpu_hours`: measured step times only)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from .gpu_hours import SOURCE, basis_line, estimate
from .paper_studies import runs_of
from .runner import plan
from .spec import Seeds


def dry_run(names: list[str], out: Path, quick: bool = False, seeds: Seeds = None, protocol: str = "v1",
            methods: Optional[list[str]] = None, shard: Optional[tuple[int, int]] = None,
            base: Optional[Path] = None, log: Callable[[str], None] = print) -> dict[str, float]:
    """Print the runs the call would train (see the module); returns {study: estimated GPU hours of its runs
    to train that have an estimate}."""
    todo = plan(names, out, quick, seeds, protocol, methods, shard, base)
    hours: dict[str, float] = {}
    bases: dict[str, str] = {}
    without: dict[str, int] = {}
    seen: set[str] = set()  # a run two studies need is trained, and counted, once
    for n in names:
        specs = [s for specs in todo.wanted.values() for s in specs if s.study == n]
        log(f"{n}: {len(runs_of(n, quick, seeds, protocol, base))} runs, {len(specs)} to train "
            f"(into {todo.paths[n]})")
        hours[n] = 0.0
        for s in sorted(specs, key=lambda s: (s.params.get("setting", ""), s.seed, s.method)):
            e = estimate(s.config)
            steps = f"{e.steps:,} steps" if e.steps is not None else "steps unknown"
            cost = (f"{e.hours:.2f} GPU h" + (" (scaled)" if e.basis == "scaled" else "")) if e.hours is not None \
                else "no estimate"
            log(f"  {s.key}  {s.setting}, seed {s.seed}: {steps}, {cost}")
            if s.key in seen:
                continue
            seen.add(s.key)
            if e.hours is None:
                without[e.basis] = without.get(e.basis, 0) + 1
            else:
                hours[n] += e.hours
                bases.setdefault(basis_line(s.config), "")
    total = sum(hours.values())
    counted = len(seen) - sum(without.values())
    log(f"estimated: {total:,.1f} GPU hours for the {counted} runs with an estimate "
        + ", ".join(f"({n}: {h:,.1f} h)" for n, h in hours.items() if h)
        + "; training steps only, not the whole-split evaluations nor loading JPEGs from disk (not measured)")
    for why, count in sorted(without.items()):
        log(f"no estimate for {count} runs: {why}")
    if bases:
        log(f"measured step times ({SOURCE}): " + "; ".join(sorted(bases)))
    return hours
