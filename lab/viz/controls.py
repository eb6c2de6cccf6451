"""The knobs of the notebooks: one spec per figure builder, turned into ipywidgets sliders.

A spec maps a keyword argument of a builder to ``Slider(min, max, step, value, log)``. The
notebooks call ``explore(builder, spec)``: the sliders above the figure, redrawn at each move.
The tests call the builder at the min / mid / max of every slider (``slider_points``), so what
a reader can reach with the mouse is exactly what is tested. The dashboard reads the same specs.
"""
from __future__ import annotations

import base64
import io
import math
import weakref
from typing import Any, Callable, Iterator, NamedTuple

EXPLORER_CLASS = "ranklab-explorer"  # CSS class of an explorer's box, for the tests and the browser
# model id of an explorer's box (what a cell's output names) -> the explorer, while its widgets live
_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Slider(NamedTuple):
    min: float
    max: float
    step: float  # in decades for log sliders
    value: float  # the default: the paper's setting where there is one
    log: bool = False  # log-spaced (temperatures, bin counts): min/max are the values, not exponents
    integer: bool = False
    description: str = ""
    help: str = ""  # a tooltip: what the knob is in the paper


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
    """The ipywidgets slider of one spec entry (ipywidgets is imported only here and in Explorer)."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    layout = {"width": "520px"}
    label = s.description or name
    if s.integer:
        return w.IntSlider(value=int(s.value), min=int(s.min), max=int(s.max), step=int(s.step),
                           description=label, continuous_update=False, style=style, layout=layout)
    if s.log:
        # FloatLogSlider takes exponents; the spec keeps values so tests read plain numbers.
        return w.FloatLogSlider(value=s.value, base=10, min=math.log10(s.min), max=math.log10(s.max),
                                step=s.step, description=label, continuous_update=False, style=style, layout=layout)
    return w.FloatSlider(value=s.value, min=s.min, max=s.max, step=s.step, description=label,
                         continuous_update=False, readout_format=".3f", style=style, layout=layout)


def display_bundle(figure: Any) -> tuple[dict[str, Any], int]:
    """(mime bundle, height in px) of what a builder returned, as a static cell would show it.

    A plotly figure gives plotly's own mime type (JupyterLab's plotly renderer draws it), a
    matplotlib figure a PNG; anything else its text.
    """
    import plotly.graph_objects as go
    from matplotlib.figure import Figure

    if isinstance(figure, go.Figure):
        import plotly.io as pio

        bundle = pio.renderers["plotly_mimetype"].to_mimebundle(figure.to_dict())
        title = figure.layout.title.text or "plotly figure"
        return {**bundle, "text/plain": title}, int(figure.layout.height or 450)
    if isinstance(figure, Figure):
        buf = io.BytesIO()
        figure.savefig(buf, format="png", bbox_inches="tight")  # as Jupyter's inline backend: no clipped title
        png = buf.getvalue()
        title = figure.get_suptitle() or "matplotlib figure"
        # The height in pixels is in the PNG's header (IHDR: width, then height, big-endian).
        return ({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": title},
                int.from_bytes(png[20:24], "big"))
    return {"text/plain": repr(figure)}, 0


class Explorer:
    """Sliders above the figure ``builder(**slider values, **fixed)``, redrawn at each move.

    ``sliders`` (name -> widget), ``output`` (the figure's area), ``widget`` (the whole block),
    ``figure`` (the last one drawn). The figure goes to ``output.outputs`` in one assignment,
    kernel-side: the frontend swaps it in one step, and headless runs see it too.
    """

    def __init__(self, builder: Callable[..., Any], spec: dict[str, Slider], **fixed: Any):
        import ipywidgets as w

        both = sorted(set(spec) & set(fixed))
        if both:
            raise ValueError(f"fixed arguments {both} are also sliders; sliders: {list(spec)}")
        self.builder, self.spec, self.fixed = builder, spec, fixed
        self.sliders = {name: make_widget(name, s) for name, s in spec.items()}
        self.output = w.Output()
        self.widget = w.VBox([*self.sliders.values(), self.output])
        self.widget.add_class(EXPLORER_CLASS)
        self.figure: Any = None
        self._holding, self._shown = False, False
        self.redraw(raise_errors=True)  # a bad builder or fixed argument fails in the cell, loudly
        for slider in self.sliders.values():
            slider.observe(lambda _: self.redraw(), names="value")
        _LIVE[self.widget.model_id] = self

    @property
    def values(self) -> dict[str, Any]:
        """The sliders' current values, by argument name."""
        return {name: slider.value for name, slider in self.sliders.items()}

    def set(self, **values: Any) -> None:
        """Move several sliders, then redraw once (a widget would clamp a value out of range)."""
        unknown = sorted(set(values) - set(self.sliders))
        if unknown:
            raise ValueError(f"no slider named {unknown}; sliders: {list(self.sliders)}")
        for name, value in values.items():
            s = self.spec[name]
            if not s.min <= value <= s.max:
                raise ValueError(f"{name} must be in [{s.min:g}, {s.max:g}], got {value!r}")
        self._holding = True
        try:
            for name, value in values.items():
                self.sliders[name].value = value
        finally:
            self._holding = False
        self.redraw()

    def redraw(self, raise_errors: bool = False) -> None:
        """Call the builder with the current values and show its figure in ``output``.

        A builder error after the first draw is shown in place of the figure: the slider's
        callback runs outside any cell, where an exception would only reach the kernel's log.
        """
        if self._holding:
            return
        try:
            figure = self.builder(**self.values, **self.fixed)
        except Exception as error:
            if raise_errors:
                raise
            text = f"{type(error).__name__}: {error}\n"
            self.output.outputs = ({"output_type": "stream", "name": "stderr", "text": text},)
            return
        bundle, height = display_bundle(figure)
        self.figure = figure
        # The box keeps the figure's height while the frontend swaps the figure: no jump, no blink.
        self.output.layout.min_height = f"{height}px" if height else None
        self.output.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)

    def _ipython_display_(self) -> None:
        # Shown once: explore() displays it, and a cell ending in explore(...) must not repeat
        # the block. display(explorer.widget) shows a second, synchronised view on purpose.
        if not self._shown:
            from IPython.display import display

            self._shown = True
            display(self.widget)

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.values.items())
        return f"Explorer({getattr(self.builder, '__name__', 'builder')}: {values})"


def live_explorers() -> dict[str, Explorer]:
    """The explorers of this kernel, by the model id of their box (a cell's widget view names it)."""
    return dict(_LIVE)


def explore(builder: Callable[..., Any], spec: dict[str, Slider], **fixed: Any) -> Explorer:
    """Display sliders for ``spec`` above the figure ``builder(**values, **fixed)`` and return
    the ``Explorer``; the cell's value does not show the block a second time."""
    from IPython.display import display

    explorer = Explorer(builder, spec, **fixed)
    display(explorer)
    return explorer
