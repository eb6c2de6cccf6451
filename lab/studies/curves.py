"""Study 1's learning curves per loss (issue 33, item 6): the runs that evaluate along the way record
``curve`` (a point every ``curve_every`` steps on the whole test split, the pilot's point format). The budget
is the plateau of ROADMAP's pilot alone; these curves show, loss by loss, whether it is a plateau for each,
and the page says which losses have no curve yet rather than assuming theirs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from .claims import table
from .evaluated_then import EVALUATED, verified
from .spec import PLATEAU_GAIN, PLATEAU_WINDOW, plateau_step
from .stats import Records


def mean_curves(records: Records, metric: str = "mAP@R") -> dict[str, tuple[list[int], list[tuple[int, float]]]]:
    """{loss: (the seeds whose run has a curve, [(step, mean of ``metric`` over those seeds)])}, in the order the
    losses first appear; a step is kept only where every one of those seeds has a point."""
    by_loss: dict[str, dict[int, dict[int, float]]] = {}
    for r in records:
        if r.get("curve"):
            by_loss.setdefault(r["method"], {})[r["seed"]] = {p["step"]: float(p[metric]) for p in r["curve"]}
    out = {}
    for loss, seeds in by_loss.items():
        steps = sorted(set.intersection(*(set(c) for c in seeds.values())))
        out[loss] = (sorted(seeds), [(s, sum(c[s] for c in seeds.values()) / len(seeds)) for s in steps])
    return out


def curves_section(records: Records, losses: Sequence[str], pilot: Optional[dict[str, Any]] = None
                   ) -> tuple[str, Any]:
    """(Markdown, figure or None): which of ``losses`` have a learning curve and which do not, each curve's last
    value and its plateau by the pilot's rule; the figure of the curves, the pilot's too."""
    found = mean_curves(records)
    curves = {m: found[m] for m in [*losses, *found] if m in found}  # the study's order of the losses
    pilot_curve = (pilot or {}).get("curve", [])
    lacking = [m for m in losses if m not in curves]
    rule = (f"the pilot's rule: the first evaluated step after which mAP@R never gains more than "
            f"{100 * PLATEAU_GAIN:.1f} point within the next {PLATEAU_WINDOW:,} steps")
    if not curves:
        return (f"**Learning curves per loss.** No run of study 1 has recorded a learning curve yet: the budget's "
                f"plateau is ROADMAP's alone (the pilot), for the other losses it is not measured. No curve yet: "
                f"{', '.join(lacking)}.", None)
    rows = []
    for loss, (seeds, points) in curves.items():
        plateau = plateau_step(points)
        rows.append([loss, f"{len(seeds)}: seed{'' if len(seeds) == 1 else 's'} {', '.join(map(str, seeds))}",
                     f"{points[-1][0]:,}", f"{100 * points[-1][1]:.2f}",
                     f"{plateau:,}" if plateau is not None else "none yet"])
    every = sorted({r["curve_every"] for r in records if r.get("curve") and "curve_every" in r})
    text = "\n\n".join([
        "**Learning curves per loss** (mAP@R on the whole test split, recorded by the runs themselves"
        + (f" every {', '.join(map(str, every))} steps" if every else "") + f"; the mean over the seeds with a curve). "
        f"Plateau by {rule}. "
        + (f"No curve yet: {', '.join(lacking)}: their plateau is not measured." if lacking
           else "Every loss of the study has a curve.") + _reruns_sentence(records),
        table(["loss", "seeds with a curve (their ids)", "last step", "mAP@R there", "plateau from step"], rows),
        _budget_sentence(curves)])
    from .figures import plot_curves

    labels = {f"{loss} ({len(seeds)} seed{'' if len(seeds) == 1 else 's'})": points
              for loss, (seeds, points) in curves.items()}
    from . import spec

    return text, plot_curves(labels, pilot_curve, spec.V2_STEPS)


def _budget_sentence(curves: dict[str, tuple[list[int], list[tuple[int, float]]]]) -> str:
    """What the curves say of the budget: which losses reached a plateau by the pilot's rule, and how much the
    others still gained in the last window the rule can judge."""
    flat = [loss for loss, (_, points) in curves.items() if plateau_step(points) is not None]
    rising = {}
    for loss, (_, points) in curves.items():
        if loss in flat:
            continue
        last = points[-1][0] - PLATEAU_WINDOW  # the last step the rule can judge
        at = dict(points).get(last)
        if at is not None:
            rising[loss] = max(v for st, v in points if last < st <= last + PLATEAU_WINDOW) - at
    text = (f"By that rule, {len(flat)} of the {len(curves)} losses with a curve reached a plateau within their "
            f"curve{': ' + ', '.join(flat) if flat else ''}.")
    if rising:
        lo, hi = min(rising.values()), max(rising.values())
        ends = {curves[loss][1][-1][0] for loss in rising}
        span = (f"between step {min(ends) - PLATEAU_WINDOW:,} and {min(ends):,}" if len(ends) == 1 else
                f"in the last {PLATEAU_WINDOW:,} steps of their curve")
        text += (f" The other {len(rising)} ({', '.join(rising)}) still gained {100 * lo:+.2f} to {100 * hi:+.2f} "
                 f"point of mAP@R {span} (their best in that span minus their value at its start), at least the "
                 f"rule's {100 * PLATEAU_GAIN:.1f}: whether they level off after it is not measured. Study 1 compares "
                 f"the losses at the budget fixed in advance; a longer one could change their order.")
    return text


def _reruns_sentence(records: Records) -> str:
    """Which curves a re-run recorded (``attach_rerun_curves``), and what each re-run reproduced of its run."""
    rerun = [r for r in records if r.get("curve_rerun") and not r["curve_rerun"].get("checked")]
    checked = [r for r in records if r.get("curve_rerun", {}).get("checked")]
    text = ""
    if rerun:
        names = ", ".join(f"{r['method']} seed {r['seed']}" for r in rerun)
        one = len(rerun) == 1
        rounding = {f: max(abs(r["curve_rerun"].get("within_rounding", {}).get(f, 0.0)) for r in rerun)
                    for f in ROUNDING}
        largest = "; ".join(f"{f} {d:.1e}" for f, d in rounding.items() if d) or "none"
        text += (f" The curve{'' if one else 's'} of {names} {'was' if one else 'were'} recorded by re-running "
                 f"{'that' if one else 'each'} stored run with the same seed and config: {'it' if one else 'each'} "
                 f"reproduced {', '.join(EXACT)} bit for bit, and {', '.join(ROUNDING)} within the rounding of the "
                 f"evaluation's summation change (44a7127; largest difference: {largest}).")
    if checked:
        names = ", ".join(f"{r['method']} seed {r['seed']}" for r in checked)
        one = len(checked) == 1
        moved = sorted({f for r in checked for f in r["curve_rerun"]["checked"]["differences"]},
                       key=list(EVALUATED).index)
        gaps = [r["curve_rerun"]["checked"]["differences"] for r in checked]
        largest = "; ".join(f"{f} {max(abs(d.get(f, 0.0)) for d in gaps):.1e}" for f in moved)
        then = sorted({r["curve_rerun"]["checked"]["evaluated_then_at"][:7] for r in checked})
        text += (f" The re-run{'' if one else 's'} of {names} differed from the stored "
                 f"run{'' if one else 's'} in the last bits of the evaluation (largest difference: {largest}), "
                 f"beyond those bounds: {'its' if one else 'each'} config trained again by the re-run's code gave "
                 f"the re-run's numbers bit for bit, and the same final weights evaluated by the stored runs' code "
                 f"({', '.join(then)}) gave the stored run's numbers bit for bit: one set of weights, two evaluations "
                 f"(`python -m lab.studies.evaluated_then`, results/v2/rerun_checks.json).")
    return text + (" `python -m lab.studies.curves` refuses a curve otherwise." if text else "")


def curves_lines(records: Records, pilot: dict[str, Any], docs: Path) -> list[str]:
    """The page's lines: the paragraph of study 1's curves and their figure (docs/figures/study_curves_v2.png);
    with no curve, no figure, and a stale one is removed."""
    from .spec import METHODS

    text, fig = curves_section(records, list(METHODS), pilot)
    target = docs / "figures" / "study_curves_v2.png"
    if fig is None:
        target.unlink(missing_ok=True)
        return [text, ""]
    from ..viz.render import save_png

    path = save_png(fig, target)
    return [text, "", f"![Learning curves per loss]({path.relative_to(docs).as_posix()})", ""]


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
    bounds, or else a check in ``checks`` ({key: a ``lab.studies.evaluated_then.check`` record}) showing that
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
    """``python -m lab.studies.curves RERUNS STORED``: the curves of RERUNS' runs (results of the same study
    re-run with ``--curve-every``) onto STORED's runs that reproduced bit for bit; STORED is rewritten atomically,
    under its lock (a study adding runs to it meanwhile keeps them)."""
    import argparse

    from .results_file import load_results, results_lock, save_results

    p = argparse.ArgumentParser(prog="python -m lab.studies.curves", description=main.__doc__)
    p.add_argument("reruns", type=Path)
    p.add_argument("stored", type=Path)
    p.add_argument("--checked", type=Path, help="checks of re-runs whose numbers differ from the stored run's "
                   "(python -m lab.studies.evaluated_then; results/v2/rerun_checks.json)")
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
