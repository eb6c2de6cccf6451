"""Study 1's learning curves per loss (issue 33, item 6): the runs that evaluate along the way record
``curve`` (a point every ``curve_every`` steps on the whole test split, the pilot's point format). The budget
is the plateau of ROADMAP's pilot alone; these curves show, loss by loss, whether it is a plateau for each,
and the page says which losses have no curve yet rather than assuming theirs.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Sequence

from ...viz.render import save_png
from ..running import spec
from ..running.evaluated_then import EVALUATED
from ..running.rerun_curves import EXACT, ROUNDING
from ..running.spec import METHODS, PLATEAU_GAIN, PLATEAU_WINDOW, plateau_step
from .figures import plot_curves
from .stats import Records, table


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


def curves_section(records: Records, losses: Sequence[str], pilot: Optional[dict[str, Any]] = None,
                   held: Sequence[int] = (), held_note: str = "") -> tuple[str, Any]:
    """(Markdown, figure or None): which of ``losses`` have a learning curve and which do not, each curve's last
    value and its plateau by the pilot's rule; the figure of the curves, the pilot's too. The runs of the seeds
    ``held`` (a replication look not read yet) are left out, and ``held_note`` says so."""
    found = mean_curves([r for r in records if r["seed"] not in held])
    kept_back = [m for m in dict.fromkeys(r["method"] for r in records if r.get("curve") and r["seed"] in held)
                 if m not in found]
    curves = {m: found[m] for m in [*losses, *found] if m in found}  # the study's order of the losses
    pilot_curve = (pilot or {}).get("curve", [])
    lacking = [m for m in losses if m not in curves and m not in kept_back]
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
        f"Plateau by {rule}. " + " ".join(part for part in [
            f"No curve yet: {', '.join(lacking)}: their plateau is not measured." if lacking else "",
            f"Not shown: {', '.join(kept_back)}, whose curves were recorded by runs of the replication's seeds "
            f"{min(held)}-{max(held)} ({held_note}); a look's runs show no number before it is read."
            if kept_back else "",
            "Every loss of the study has a curve shown." if not lacking and not kept_back else "",
            _reruns_sentence(records).strip()] if part),
        table(["loss", "seeds with a curve (their ids)", "last step", "mAP@R there", "plateau from step"], rows),
        _budget_sentence(curves), pilot_comparison(curves, pilot_curve)])
    labels = {f"{loss} ({len(seeds)} seed{'' if len(seeds) == 1 else 's'})": points
              for loss, (seeds, points) in curves.items()}
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
                 "the losses at the budget the pilot chose (on the test split: see the deviations); a longer one "
                 "could change their order.")
    return text


def pilot_comparison(curves: dict[str, tuple[list[int], list[tuple[int, float]]]],
                     pilot: Sequence[dict[str, Any]]) -> str:
    """Whether a loss that ends above ROADMAP got there by learning faster early (which a budget chosen on
    ROADMAP's curve would favour) or stays above along the way: each loss's curve against the pilot's (ROADMAP,
    seed 0) at the steps both evaluated, and each one's gain over the budget's last window."""
    if not pilot or spec.V2_STEPS is None:
        return ""
    ref = {p["step"]: float(p["mAP@R"]) for p in pilot}
    end, start = spec.V2_STEPS, spec.V2_STEPS - PLATEAU_WINDOW
    parts = []
    for loss, (seeds, points) in curves.items():
        mine = dict(points)
        shared = [s for s in mine if s in ref and 0 < s <= end]
        if not shared or not all(mine[s] > ref[s] for s in shared):
            continue
        both = {start, end} <= set(mine) and {start, end} <= set(ref)
        mine_gain, ref_gain = (mine[end] - mine[start], ref[end] - ref[start]) if both else (math.nan, math.nan)
        gain = (f"; over steps {start:,}-{end:,} it gains {100 * mine_gain:+.2f} pt and the pilot "
                f"{100 * ref_gain:+.2f}, " + ("so it still gains more at the budget's end" if mine_gain > ref_gain
                                              else "so the pilot gains more there: whether a longer budget closes "
                                              "the gap is not measured") if both else "")
        parts.append(f"{loss} ({len(seeds)} seed{'' if len(seeds) == 1 else 's'}) is above the pilot at every one of "
                     f"the {len(shared)} steps both evaluated, from step {min(shared):,} on{gain}")
    if not parts:
        return "No loss's curve is above the pilot's (ROADMAP, seed 0) at every step both evaluated."
    return ("Against the pilot's curve (ROADMAP, seed 0, the curve the budget was read from): " + "; ".join(parts)
            + ". A lead held from the first evaluation on is not that of a loss that merely learns faster early.")


def _reruns_sentence(records: Records) -> str:
    """Which curves a re-run recorded (:func:`..running.rerun_curves.attach_rerun_curves`), and what each re-run
    reproduced of its run."""
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
                 f"(`python -m lab.studies.running.evaluated_then`, results/v2/rerun_checks.json).")
    return text + (" `python -m lab.studies.running.rerun_curves` refuses a curve otherwise." if text else "")


def curves_lines(records: Records, pilot: dict[str, Any], docs: Path, held: Sequence[int] = (),
                 held_note: str = "") -> list[str]:
    """The page's lines: the paragraph of study 1's curves and their figure (docs/figures/study_curves_v2.png);
    with no curve, no figure, and a stale one is removed. ``held``: seeds whose runs show no curve yet."""
    text, fig = curves_section(records, list(METHODS), pilot, held, held_note)
    target = docs / "figures" / "study_curves_v2.png"
    if fig is None:
        target.unlink(missing_ok=True)
        return [text, ""]
    path = save_png(fig, target)
    return [text, "", f"![Learning curves per loss]({path.relative_to(docs).as_posix()})", ""]
