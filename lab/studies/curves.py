"""Study 1's learning curves per loss (issue 33, item 6): the runs that evaluate along the way record
``curve`` (a point every ``curve_every`` steps on the whole test split, the pilot's point format). The budget
is the plateau of ROADMAP's pilot alone; these curves show, loss by loss, whether it is a plateau for each,
and the page says which losses have no curve yet rather than assuming theirs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .claims import table
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
           else "Every loss of the study has a curve."),
        table(["loss", "seeds with a curve (their ids)", "last step", "mAP@R there", "plateau from step"], rows)])
    from .figures import plot_curves

    labels = {f"{loss} ({len(seeds)} seed{'' if len(seeds) == 1 else 's'})": points
              for loss, (seeds, points) in curves.items()}
    from . import spec

    return text, plot_curves(labels, pilot_curve, spec.V2_STEPS)


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
