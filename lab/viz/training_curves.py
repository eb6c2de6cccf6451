"""The dashboard's Training view: what its training curves plot (:func:`training_series`, drawn as an SVG by
:mod:`lab.viz.svg_curves`) and, in compare mode, what differs in the latest held-out evaluation of both runs
(:func:`run_differences`, drawn by :mod:`lab.viz.svg_comparison`), with the notes that say how to read them.
Pure functions, re-exported by :mod:`lab.viz.dashboard_figures`.

Sized for one screen at a projector's 1280 x 720 (issue 36): panel titles carry the latest values
(the metrics row they replace cost the held-out panels' height) under the metrics' display names.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import plotly.graph_objects as go

from .style import SERIES, TEMPLATE


CURVES = (("loss", "training loss"), ("batch_ap", "batch AP (train)"), ("R@1", "held-out R@1 · mAP@R (dashed)"),
          ("decomposability_gap", "decomp. gap (train probe)"))
# The metrics' names in panel titles: the raw key "decomposability_gap" is a code name, not a title.
DISPLAY = {"R@1": "R@1", "mAP@R": "mAP@R", "mAP": "mAP", "decomposability_gap": "decomp. gap", "loss": "loss",
           "batch_ap": "batch AP"}


def sized_layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    """The dashboard's template, title, height and margins (every figure of the dashboard)."""
    fig.update_layout(template=TEMPLATE, title=title, height=height, margin=dict(l=50, r=20, t=70, b=40))
    return fig



# ------------------------------------------------------------------------- training curves
def training_series(history: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """{metric: (steps, values)} from a trainer's history: train records give ``loss`` and
    ``batch_ap``; eval records ``R@1``, ``mAP@R`` and ``decomposability_gap``."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for record in history:
        keys = ("loss", "batch_ap") if record.get("kind") == "train" else ("R@1", "mAP@R", "decomposability_gap")
        for key in keys:
            if key in record:
                steps, values = out.setdefault(key, ([], []))
                steps.append(float(record["step"]))
                values.append(float(record[key]))
    return out


def latest_values(series: Mapping[str, tuple[list[float], list[float]]]) -> dict[str, float]:
    """{metric: its last value} of :func:`training_series`'s output (the metrics row of the panel titles)."""
    return {key: values[-1] for key, (_, values) in series.items() if values}


def signed(value: float) -> str:
    """A difference with enough digits to read: +0.012, -0.100, +3.2e-04 (never a bare +0)."""
    return f"{value:+.3f}" if value == 0 or abs(value) >= 5e-4 else f"{value:+.1e}"


NICE_STEPS = (1, 2, 5)


def step_axis(last: float, ticks: int = 6) -> dict[str, Any]:
    """An x axis of whole steps from 0 to ``last`` (at least 1), as plotly's axis settings: ticks on whole
    numbers, about ``ticks`` of them. Plotly's own range around a single point (the held-out panels before
    the first evaluation after step 0) went from -1 to 1 in half steps."""
    top = max(1.0, float(last))
    raw, scale = top / ticks, 1
    while True:  # the smallest 1, 2, 5 x 10^k at least raw (and at least 1)
        found = next((n * scale for n in NICE_STEPS if n * scale >= raw), None)
        if found is not None:
            break
        scale *= 10
    pad = 0.03 * top  # the markers at step 0 and at the last step whole, not cut by the frame
    return dict(range=[-pad, top + pad], dtick=found, tick0=0, tickformat="d")


CURVES_TITLE = "Training curves (held-out: a fixed subset of test classes)"
LATEST_PX = 26  # the latest held-out numbers: read from the back of a room (issue 46: the panel titles' 13 px were not)


def latest_numbers_html(latest: Mapping[str, Mapping[str, Any]]) -> str:
    """The latest held-out R@1 and mAP@R of each run (``latest``: {label: its last eval record}) as HTML:
    a small line naming the step, then each metric once with every run's value at ``LATEST_PX`` in the
    run's colour (the curves' colours); "" before any evaluation."""
    runs = [(SERIES[i % len(SERIES)], last) for i, last in enumerate(latest.values()) if "R@1" in last]
    if not runs:
        return ""
    step = max(int(last.get("step", 0)) for _, last in runs)
    cells = []
    for key in ("R@1", "mAP@R"):
        values = " ".join(f'<span class="rl-value" style="color:{color}">{float(last[key]):.3f}</span>'
                          for color, last in runs if key in last)
        cells.append(f'<span class="rl-key">{key}</span> {values}')
    return (f'<div class="rl-latest"><div class="rl-key">held-out, step {step}</div>'
            f'<div class="rl-numbers">{" ".join(cells)}</div></div>')


LATEST_STYLE = ("<style>.rl-latest {line-height: 1.1; text-align: right; white-space: nowrap;} "
                f".rl-latest .rl-value {{font-size: {LATEST_PX}px; font-weight: 700; margin: 0 0.15em; "
                "font-variant-numeric: tabular-nums;} .rl-latest .rl-key {font-size: 14px; color: #555;}</style>")


COMPARED = ("R@1", "mAP@R", "mAP", "decomposability_gap")
COMPARISON_TITLE = "Latest held-out evaluation: B − A per panel"


def run_differences(summaries: Mapping[str, Mapping[str, float]],
                    metrics: Sequence[str] = COMPARED) -> dict[str, float]:
    """{metric: last run's value - first run's} for the metrics every run has (B - A in compare
    mode); {} for a single run."""
    values = list(summaries.values())
    if len(values) < 2:
        return {}
    return {m: float(values[-1][m]) - float(values[0][m]) for m in metrics if all(m in v for v in values)}


def comparison_note(spread: Optional[Mapping[str, Any]]) -> str:
    """What the comparison's axes and bars mean (a caption under the chart: its title stays short)."""
    single = (spread or {}).get("single", {})
    return "Each panel is zoomed to its values" + (
        f"; error bars: ±1 seed-to-seed std of the reproduction study ({', '.join(single)})." if single else ".")


def spread_note(spread: Mapping[str, Any]) -> str:
    """A sentence for a one-seed comparison: how much the reproduction study's results moved from
    seed to seed (:func:`lab.experiments.cached.seed_spread`); "" without study results."""
    if not spread:
        return ""
    single, paired = spread["single"], spread.get("paired", {})
    metrics = [m for m in ("R@1", "mAP@R") if m in single]
    one = " and ".join(f"{m} by {100 * single[m]:.1f}" for m in metrics)
    text = (f"One seed at this scale: in the reproduction study ({spread['source']}, {spread['settings']} losses × "
            f"{spread['seeds']} seeds, {'/'.join(map(str, spread['steps']))} steps of "
            f"{'/'.join(map(str, spread['batch_size']))}) one run's {one} points from seed to seed (std)")
    both = [m for m in metrics if m in paired]
    if both:
        text += (", and the difference between two losses trained from the same seed by "
                 + " and ".join(f"{100 * paired[m]:.1f}" for m in both) + " points")
    return (text + ". These two runs share one seed: a difference of less than about twice that may be this "
            "seed's luck, not the loss. This page evaluates fewer images than the study, so its numbers vary at "
            "least as much." + scale_note(spread))


def scale_note(spread: Mapping[str, Any]) -> str:
    """Why a short study's spread is the yardstick of a dashboard run (issue 36, D-10): a page's run
    is hundreds of steps ranked on a few hundred held-out images, as short as protocol v1's runs;
    protocol v2's long runs on the whole test split measure nearly converged models, whose numbers
    vary less from seed to seed. "" for a spread read from v2."""
    if str(spread.get("source", "")).startswith("results/v2/"):
        return ""
    return (" Why protocol v1's short runs: a dashboard run is as short (hundreds of steps, a few hundred held-out "
            "images); protocol v2's runs are far longer and rank the whole test split, where one run varies less "
            "from seed to seed — a yardstick for converged models, not for this page's.")


__all__ = ["training_series", "latest_values", "signed", "step_axis", "run_differences",
           "comparison_note", "spread_note", "scale_note", "sized_layout", "CURVES", "DISPLAY",
           "COMPARED"]
