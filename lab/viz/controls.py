"""The knobs of the notebooks: one spec per figure builder, turned into ipywidgets sliders.

A spec maps a keyword argument of a builder to ``Slider(min, max, step, value, log)``. The
notebooks call :func:`explore` (``interact`` with these sliders); the tests call the builder
at the min / mid / max of every slider (:func:`slider_points`), so what a reader can reach
with the mouse is exactly what is tested. The dashboard can read the same specs.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Iterator, NamedTuple


class Slider(NamedTuple):
    min: float
    max: float
    step: float
    value: float  # the default: the paper's setting where there is one
    log: bool = False  # log-spaced (temperatures, bin counts): min/max are the values, not exponents
    integer: bool = False
    description: str = ""


def slider_points(spec: dict[str, Slider]) -> Iterator[dict[str, float]]:
    """Keyword sets that move one slider at a time to its min, mid and max (others at default).

    The mid point is geometric for log sliders; integer sliders stay integers.
    """
    defaults = {name: s.value for name, s in spec.items()}
    for name, s in spec.items():
        mid = math.sqrt(s.min * s.max) if s.log else (s.min + s.max) / 2
        for v in (s.min, mid, s.max):
            yield {**defaults, name: int(round(v)) if s.integer else float(v)}


def make_widget(name: str, s: Slider):
    """The ipywidgets slider of one spec entry (ipywidgets is imported only here)."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    label = s.description or name
    if s.integer:
        return w.IntSlider(value=int(s.value), min=int(s.min), max=int(s.max), step=int(s.step),
                           description=label, continuous_update=False, style=style)
    if s.log:
        # FloatLogSlider takes exponents; the spec keeps values so tests read plain numbers.
        return w.FloatLogSlider(value=s.value, base=10, min=math.log10(s.min), max=math.log10(s.max),
                                step=s.step, description=label, continuous_update=False, style=style)
    return w.FloatSlider(value=s.value, min=s.min, max=s.max, step=s.step, description=label,
                         continuous_update=False, readout_format=".3f", style=style)


def explore(builder: Callable[..., Any], spec: dict[str, Slider], **fixed: Any):
    """Sliders for ``spec`` above the figure ``builder(**values)``, redrawn at each move (ipywidgets'
    ``interactive``, displayed). ``fixed`` arguments are passed unchanged. Returns the widget,
    whose ``children[:-1]`` are the sliders and ``result`` the last figure."""
    import ipywidgets as w
    from IPython.display import display

    controls = {name: make_widget(name, s) for name, s in spec.items()}
    # interactive() would make a slider of every other numeric default too (untested ranges):
    # pin those at their defaults.
    pinned = {name: p.default for name, p in inspect.signature(builder).parameters.items()
              if name not in spec and p.default is not inspect.Parameter.empty}
    pinned.update(fixed)
    widget = w.interactive(builder, **controls, **{k: w.fixed(v) for k, v in pinned.items()})
    display(widget)
    return widget
