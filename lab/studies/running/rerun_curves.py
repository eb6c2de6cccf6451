"""A re-run's learning curve onto its stored run (issue 33, item 6), only where the re-run is that run:
``python -m lab.studies.running.rerun_curves RERUNS STORED [--checked CHECKS]``.

A stored run trained without ``--curve-every`` has no curve; a re-run of its key (same seed, same config) with
one may give it its curve when the re-run reproduced the stored run's numbers (:data:`EXACT` bit for bit,
:data:`ROUNDING` within the evaluation's rounding change), or when :mod:`.evaluated_then` showed that its final
weights, evaluated by the stored run's code, give the stored numbers bit for bit.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional, Sequence

from .evaluated_then import EVALUATED, verified
from .results_file import load_results, results_lock, save_results

# What a re-run must reproduce before its curve joins the stored run. The numbers its weights decide through
# ranks alone, bit for bit: the same trajectory gives the same ranks.
EXACT = ("R@1", "R@2", "R@4", "R@8", "mAP", "num_queries", "steps")
# Two float reductions of the evaluation changed after the first v2 runs (44a7127, 2026-11-26): retrieval_metrics
# sums per-query values in query order (mAP@R's last bits) and decomposability_gap counts through per-query
# metrics ("same values to 2e-8"). The same weights evaluated before and after differ by this much, no more.
ROUNDING = {"mAP@R": 1e-12, "gap_heldout": 2e-8, "gap_train_probe": 2e-8}
REPRODUCED = (*EXACT, *ROUNDING)


def _differences(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str], dict[str, float]]:
    """(numbers the re-run did not reproduce, one line each; what its curve does not end on; {number: re-run
    minus stored} within ROUNDING)."""
    differ = [f"{f}: stored {old.get(f)!r}, re-run {new.get(f)!r}" for f in EXACT if old.get(f) != new.get(f)]
    within = {}
    for f, bound in ROUNDING.items():
        if old.get(f) == new.get(f):
            continue
        if old.get(f) is None or new.get(f) is None or not abs(new[f] - old[f]) <= bound:
            differ.append(f"{f}: stored {old.get(f)!r}, re-run {new.get(f)!r} (more than {bound:g} apart)")
        else:
            within[f] = new[f] - old[f]
    end, curve = new["curve"][-1], []
    if end["step"] != new["steps"]:
        curve.append(f"curve ends at step {end['step']}, not {new['steps']}")
    curve += [f"curve end {f}" for f in REPRODUCED if f in end and end[f] != new[f]]
    return differ, curve, within


def attach_rerun_curves(stored: dict[str, Any], reruns: dict[str, Any], checks: Optional[dict[str, Any]] = None
                        ) -> tuple[list[str], list[str]]:
    """Give stored runs without a curve the curve of a re-run of the same key (same seed, same config), in
    place, only where the re-run reproduced the stored run: ``EXACT`` bit for bit and ``ROUNDING`` within its
    bounds, or else a check in ``checks`` ({key: a :func:`.evaluated_then.check` record}) showing that
    the re-run's final weights, evaluated by the stored run's code, give the stored numbers bit for bit; and in
    both cases the curve ending on the re-run's own numbers. The stored run keeps its own numbers;
    ``curve_rerun`` says where the curve comes from (the re-run's provenance), the differences within
    rounding or the check. Returns (keys given a curve, one line per re-run refused: its key and why)."""
    given, refused = [], []
    for key, new in reruns["runs"].items():
        old = stored["runs"].get(key)
        if old is None or old.get("curve") or not new.get("curve"):
            continue
        differ, curve, within = _differences(old, new)
        checked = (checks or {}).get(key)
        if differ and checked is not None and not curve:
            why = verified(checked, old, new)
            if why:
                differ = [f"{differ[0]}; its check: {why[0]}"]
            else:
                differ, within = [], {}
        else:
            checked = None
        if differ or curve:
            refused.append(f"{old['method']} seed {old['seed']} ({key}): {(differ + curve)[0]}")
            continue
        old["curve"], old["curve_every"] = new["curve"], new["curve_every"]
        old["curve_rerun"] = {"provenance": new.get("provenance"), "exact": list(EXACT), "within_rounding": within,
                              "started": new.get("started"), "finished": new.get("finished")}
        if checked is not None:
            old["curve_rerun"].update(exact=[], within_rounding={}, checked={
                "evaluated_then_at": checked["evaluated_then_at"], "train_at": checked["train_at"],
                "differences": {f: new[f] - old[f] for f in EVALUATED if old.get(f) != new.get(f)}})
        given.append(key)
    return given, refused


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m lab.studies.running.rerun_curves RERUNS STORED``: the curves of RERUNS' runs (results of the
    same study re-run with ``--curve-every``) onto STORED's runs that reproduced bit for bit; STORED is rewritten
    atomically, under its lock (a study adding runs to it meanwhile keeps them)."""
    p = argparse.ArgumentParser(prog="python -m lab.studies.running.rerun_curves", description=main.__doc__)
    p.add_argument("reruns", type=Path)
    p.add_argument("stored", type=Path)
    p.add_argument("--checked", type=Path, help="checks of re-runs whose numbers differ from the stored run's "
                   "(python -m lab.studies.running.evaluated_then; results/v2/rerun_checks.json)")
    args = p.parse_args(argv)
    checks = json.loads(args.checked.read_text()) if args.checked else None
    with results_lock(args.stored):
        stored = load_results(args.stored)
        given, refused = attach_rerun_curves(stored, load_results(args.reruns), checks)
        if given:
            save_results(args.stored, stored)
    for line in refused:
        print(f"not reproduced, no curve: {line}")
    names = {k: f"{stored['runs'][k]['method']} seed {stored['runs'][k]['seed']}" for k in given}
    print(f"{len(given)} curve(s) attached" + (": " + ", ".join(names.values()) if given else ""))
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
