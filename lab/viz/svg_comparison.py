"""Compare mode's second chart as one inline SVG, drawn by the server: each run's latest held-out metrics, one
panel per metric, the y axis zoomed to the values (:func:`lab.viz.comparisons.zoomed_range`), so that two losses
a point apart do not look alike; each panel titled with the difference B - A; an error bar of one seed-to-seed
std of the reproduction study on each value where the study has that metric.

An SVG for the reason of :mod:`lab.viz.svg_curves`: as the one plotly chart left on a compare page, it cost the
page's browser the loading of plotly.js at its first Start (one page, chromium's CPU in the 2 s after Start:
2.3-2.6 CPU seconds with it, 0.6 without; docs/benchmarks.md). Each point carries its
value and std (``data-value``, ``data-std``), each panel its y range and difference (``data-range``,
``data-difference``), as Python's ``repr``: a test reads them back exactly.
"""
from __future__ import annotations

import html
from typing import Any, Mapping, Optional, Sequence

from .comparisons import zoomed_range
from .style import SERIES
from .svg_curves import AXIS, FONT, TEXT, WIDTH, _legend, _y_grid
from .training_curves import COMPARED, COMPARISON_TITLE, DISPLAY, run_differences, signed


def run_comparison_svg(summaries: Mapping[str, Mapping[str, float]], metrics: Sequence[str] = COMPARED,
                       spread: Optional[Mapping[str, Any]] = None, height: int = 215) -> str:
    """The panels of every run's latest metrics (``summaries``: {run label: its last eval record}) for the
    ``metrics`` every run has, as an SVG string ``height`` px high and as wide as its container. ``spread``
    (:func:`lab.experiments.cached.seed_spread`): the error bars, for the metrics its ``single`` has."""
    shown = [m for m in metrics if all(m in s for s in summaries.values())]
    differences = run_differences(summaries, shown)
    single = dict((spread or {}).get("single", {}))
    top, left, right, bottom, gap, title_h = 28, 48, 12, 8, 40, 24
    cols = max(1, len(shown))
    cell_w = (WIDTH - left - right - gap * (cols - 1)) / cols
    parts = [f"<svg class='rl-comparison' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {height}' "
             f"width='100%' height='{height}' preserveAspectRatio='xMinYMin meet' role='img' "
             f"aria-label='{html.escape(COMPARISON_TITLE)}'>",
             f"<text class='rl-title' x='4' y='18' font-size='15' font-weight='bold' fill='{TEXT}' {FONT}>"
             f"{html.escape(COMPARISON_TITLE)}</text>", *_legend(list(summaries), right)]
    n = len(summaries)
    for col, m in enumerate(shown):
        x0, y0 = left + col * (cell_w + gap), top + title_h
        w, h = cell_w, height - top - title_h - bottom
        values = [float(s[m]) for s in summaries.values()]
        std = float(single.get(m, 0.0))
        low, high = zoomed_range([v - std for v in values], [v + std for v in values])

        def sx(i: float) -> float:
            return x0 + (i + 0.5) / (n + 0.3) * w  # x from -0.5 to n - 0.2, as the plotly panels had it

        def sy(value: float) -> float:
            return y0 + h - (value - low) / (high - low) * h

        title = f"{DISPLAY.get(m, m)}: B − A = {signed(differences[m])}" if m in differences else DISPLAY.get(m, m)
        parts.append(f"<g class='rl-panel' data-metric='{m}' data-range='{low!r},{high!r}'"
                     + (f" data-difference='{differences[m]!r}'" if m in differences else "") + ">"
                     f"<text class='rl-panel-title' x='{x0 + w / 2:.1f}' y='{y0 - 10:.1f}' text-anchor='middle' "
                     f"font-size='13' fill='{TEXT}' {FONT}>{html.escape(title)}</text>")
        parts += _y_grid(low, high, x0, w, sy)
        parts.append(f"<line x1='{x0:.1f}' x2='{x0:.1f}' y1='{y0:.1f}' y2='{y0 + h:.1f}' stroke='{AXIS}'/>")
        for i, (label, value) in enumerate(zip(summaries, values)):
            color, x, y = SERIES[i % len(SERIES)], sx(i), sy(value)
            bar = ""
            if m in single:
                y_low, y_high = sy(value - std), sy(value + std)
                bar = (f"<path d='M{x:.1f},{y_low:.1f}V{y_high:.1f}M{x - 5:.1f},{y_low:.1f}h10M{x - 5:.1f},"
                       f"{y_high:.1f}h10' stroke='{color}' stroke-width='1.6' fill='none'/>")
            hover = f"{label} · {DISPLAY.get(m, m)}: {value:.3f}" + (f" ± {std:.3f}" if m in single else "")
            parts.append(f"<g class='rl-point' data-run='{html.escape(label)}' data-value='{value!r}' "
                         f"data-std='{std if m in single else 0.0!r}'><title>{html.escape(hover)}</title>{bar}"
                         f"<circle cx='{x:.1f}' cy='{y:.1f}' r='6' fill='{color}'/><text x='{x + 10:.1f}' "
                         f"y='{y + 4:.1f}' font-size='11' fill='{TEXT}' {FONT}>{value:.3f}</text></g>")
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["run_comparison_svg"]
