"""The dashboard's training curves as one inline SVG, drawn by the server: four panels (loss, batch AP,
held-out R@1 with mAP@R dashed, decomposability gap), one colour per run, on one axis of whole steps.

Why not plotly (issue 46): in the browser, the live curves were the dashboard's largest cost. A page's first
plotly chart cost chromium about 3 CPU seconds (loading plotly.js, then the first drawing) and every redraw
about 0.5; six pages on 2 cores, their browsers beside the server, left the trainings a fifth of the machine in
the 10 s after their Starts (docs/benchmarks.md). This SVG is a few hundred elements (a redraw, with the page's
tick, costs chromium 0.1-0.2 CPU seconds); hovering a line shows its run, metric
and latest value (its ``<title>``). Each line carries the steps and values it draws (``data-x``, ``data-y``,
Python's ``repr`` of each float), so a test can read them back exactly. Sized for one screen at a projector's
1280 x 720, as the plotly figure was (issue 36).
"""
from __future__ import annotations

import html
import math
from typing import Any, Callable, Mapping, Sequence

from .style import SERIES
from .training_curves import CURVES, DISPLAY, NICE_STEPS, latest_values, step_axis, training_series

WIDTH = 960  # the viewBox's width: the main column at 1280 px; the SVG scales to the column's width
MAX_POINTS = 800  # drawn per line: a long run's 20,000 records would cost the page, not the eye
FONT = "font-family='sans-serif'"
GRID, AXIS, TEXT = "#e5e5e5", "#aaaaaa", "#444444"


def _nice_ticks(low: float, high: float, most: int = 5) -> tuple[list[float], float]:
    """Round values covering [low, high], 1, 2 or 5 x 10^k apart: the finest spacing with at most ``most``
    of them (3 to 5), and that spacing."""
    scale = 10.0 ** math.floor(math.log10((high - low) / (10 * most)))
    while True:
        for n in NICE_STEPS:
            step = n * scale
            first = math.ceil(low / step - 1e-9)
            count = math.floor(high / step + 1e-9) - first + 1
            if count <= most:
                return [(first + i) * step for i in range(count)], step
        scale *= 10


def _y_range(values: Sequence[float]) -> tuple[float, float]:
    """The panel's y range: its values with 5 % of room; a flat line gets a range around it."""
    low, high = min(values), max(values)
    if high - low < 1e-12:
        half = max(abs(low) * 0.1, 0.05)
        return low - half, high + half
    pad = 0.05 * (high - low)
    return low - pad, high + pad


def _decimated(steps: list[float], values: list[float]) -> tuple[list[float], list[float]]:
    """At most ``MAX_POINTS`` points, evenly spaced in the list, the last one always kept."""
    if len(steps) <= MAX_POINTS:
        return steps, values
    stride = math.ceil(len(steps) / MAX_POINTS)
    keep = list(range(0, len(steps) - 1, stride)) + [len(steps) - 1]
    return [steps[i] for i in keep], [values[i] for i in keep]


def _label(value: float, step: float) -> str:
    digits = max(0, -int(math.floor(math.log10(step))) if step > 0 else 0)
    return f"{value:.{digits}f}"


def _y_grid(low: float, high: float, x0: float, w: float, sy: Callable[[float], float]) -> list[str]:
    """A panel's horizontal grid lines and y tick labels over [low, high] (:func:`_nice_ticks`)."""
    ticks, step = _nice_ticks(low, high)
    return [f"<line x1='{x0:.1f}' x2='{x0 + w:.1f}' y1='{sy(t):.1f}' y2='{sy(t):.1f}' stroke='{GRID}'/><text "
            f"x='{x0 - 4:.1f}' y='{sy(t) + 4:.1f}' font-size='11' text-anchor='end' fill='{TEXT}' {FONT}>"
            f"{_label(t, step)}</text>" for t in ticks]


def _panel_title(key: str, title: str, latest: Mapping[str, Mapping[str, float]], x: float, y: float) -> str:
    """Two lines: the panel's name, then each run's latest value in its colour (the plotly titles' text)."""
    values = []
    for i, last in enumerate(latest.values()):
        color = SERIES[i % len(SERIES)]
        if key == "R@1" and "R@1" in last:
            text = f"{last['R@1']:.3f} · {last.get('mAP@R', float('nan')):.3f}"
        elif key in last:
            text = f"{last[key]:.3f}"
        else:
            continue
        values.append(f"<tspan fill='{color}'>{text}</tspan>")
    second = f"<tspan x='{x:.1f}' dy='15'>{' | '.join(values)}</tspan>" if values else ""
    return (f"<text class='rl-panel-title' x='{x:.1f}' y='{y:.1f}' text-anchor='middle' font-size='13' "
            f"fill='{TEXT}' {FONT}>{html.escape(title)}{second}</text>")


def _legend(labels: Sequence[str], right: float) -> list[str]:
    """The runs' colours and labels on the figure title's row, right-aligned, in the runs' order."""
    parts, x = [], WIDTH - right
    for i, label in reversed(list(enumerate(labels))):
        color = SERIES[i % len(SERIES)]
        x -= 7.2 * len(label) + 26  # about the label's width at 12 px
        parts.append(f"<g class='rl-legend'><line x1='{x:.1f}' y1='13' x2='{x + 16:.1f}' y2='13' stroke='{color}' "
                     f"stroke-width='2'/><text x='{x + 20:.1f}' y='17' font-size='12' fill='{TEXT}' {FONT}>"
                     f"{html.escape(label)}</text></g>")
    return parts[::-1]


def training_curves_svg(histories: Mapping[str, Sequence[Mapping[str, Any]]], title: str = "", height: int = 470,
                        rows: int = 2) -> str:
    """The four panels of every run's history (``histories``: {run label: trainer history}) as an SVG
    string ``height`` px high and as wide as its container: 2 x 2 (``rows=2``) or 1 x 4 (``rows=1``),
    every panel on whole steps from 0 to the latest step (:func:`~lab.viz.training_curves.step_axis`),
    each panel titled with every run's latest value in the run's colour, a legend of the runs."""
    series = {label: training_series(history) for label, history in histories.items()}
    latest = {label: latest_values(s) for label, s in series.items()}
    last = max((steps[-1] for s in series.values() for steps, _ in s.values() if steps), default=1)
    axis = step_axis(last)
    (x_low, x_high), dtick = axis["range"], axis["dtick"]
    cols = 4 // rows
    top, left, right, bottom = 28, 48, 12, 6  # the figure title's row; the tick labels and "step" are in the cells
    gap_x, title_h, ticks_h = 44 if rows == 2 else 34, 34, 18
    cell_w = (WIDTH - left - right - gap_x * (cols - 1)) / cols
    cell_h = (height - top - bottom) / rows
    parts = [f"<svg class='rl-curves' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {height}' "
             f"width='100%' height='{height}' preserveAspectRatio='xMinYMin meet' role='img' "
             f"aria-label='{html.escape(title or 'Training')}'>",
             f"<text class='rl-title' x='4' y='18' font-size='15' fill='{TEXT}' {FONT}>"
             f"{html.escape(title or 'Training')}</text>"]
    parts += _legend(list(series), right)
    for panel, (key, name) in enumerate(CURVES):
        row, col = divmod(panel, cols)
        x0 = left + col * (cell_w + gap_x)
        y0 = top + row * cell_h + title_h
        w, h = cell_w, cell_h - title_h - ticks_h - (14 if row == rows - 1 else 0)
        parts.append(_panel_title(key, name, latest, x0 + w / 2, y0 - 20))
        lines = [(i, label, metric, *s[metric]) for i, (label, s) in enumerate(series.items())
                 for metric in ((key, "mAP@R") if key == "R@1" else (key,)) if s.get(metric, ([], []))[0]]
        values = [v for *_, vs in lines for v in vs if math.isfinite(v)]
        y_low, y_high = _y_range(values) if values else (0.0, 1.0)

        def sx(step: float) -> float:
            return x0 + (step - x_low) / (x_high - x_low) * w

        def sy(value: float) -> float:
            return y0 + h - (value - y_low) / (y_high - y_low) * h

        parts.append(f"<g class='rl-panel' data-metric='{key}'>")
        parts += _y_grid(y_low, y_high, x0, w, sy)
        step = 0.0
        while step <= x_high:
            parts.append(f"<line x1='{sx(step):.1f}' x2='{sx(step):.1f}' y1='{y0:.1f}' y2='{y0 + h:.1f}' "
                         f"stroke='{GRID}'/><text class='rl-xtick' x='{sx(step):.1f}' y='{y0 + h + 14:.1f}' "
                         f"font-size='11' text-anchor='middle' fill='{TEXT}' {FONT}>{int(step)}</text>")
            step += dtick
        parts.append(f"<rect x='{x0:.1f}' y='{y0:.1f}' width='{w:.1f}' height='{h:.1f}' fill='none' "
                     f"stroke='{AXIS}'/>")
        if row == rows - 1:
            parts.append(f"<text x='{x0 + w / 2:.1f}' y='{y0 + h + 30:.1f}' font-size='12' text-anchor='middle' "
                         f"fill='{TEXT}' {FONT}>step</text>")
        for i, label, metric, steps, vals in lines:
            finite = [(s, v) for s, v in zip(steps, vals) if math.isfinite(v)]
            if not finite:
                continue
            steps, vals = _decimated([s for s, _ in finite], [v for _, v in finite])
            color = SERIES[i % len(SERIES)]
            points = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in zip(steps, vals))
            dash = " stroke-dasharray='5 3'" if metric == "mAP@R" else ""
            hover = f"{label} · {DISPLAY.get(metric, metric)}: {vals[-1]:.3f} at step {int(steps[-1])}"
            parts.append(f"<g class='rl-line' data-run='{html.escape(label)}' data-metric='{metric}'>"
                         f"<title>{html.escape(hover)}</title><polyline points='{points}' fill='none' "
                         f"stroke='{color}' stroke-width='1.6'{dash} data-x='{','.join(map(repr, steps))}' "
                         f"data-y='{','.join(map(repr, vals))}'/>")
            if metric != "loss" and len(steps) <= 60:  # the evaluations' points, as plotly's markers were
                name = html.escape(f"{label} · {DISPLAY.get(metric, metric)}")
                parts.extend(f"<circle cx='{sx(s):.1f}' cy='{sy(v):.1f}' r='2.5' fill='{color}'><title>{name}: "
                             f"{v:.3f} at step {int(s)}</title></circle>"  # hovering a point shows its value
                             for s, v in zip(steps, vals))
            parts.append("</g>")
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["training_curves_svg"]
