"""Every slider of the notebooks, driven headless across its range; fast mode switch."""
import inspect
import json
import math

import plotly.graph_objects as go
import pytest

from lab.core.env import fast_mode
from lab.viz.controls import Slider, explore, make_widget, slider_points
from lab.viz.registry import INTERACTIVE

CASES = [(name, kwargs) for name, (_, spec) in INTERACTIVE.items() for kwargs in slider_points(spec)]


def numbers(obj):
    """Every number in a JSON spec."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


@pytest.mark.parametrize("name, kwargs", CASES, ids=[f"{n}-{'-'.join(f'{k}={v:.3g}' for k, v in kw.items())}" for n, kw in CASES])
def test_every_slider_position_draws_a_finite_figure(name, kwargs):
    builder, _ = INTERACTIVE[name]
    fig = builder(**kwargs)
    assert isinstance(fig, go.Figure) and len(fig.data) > 0
    spec = json.loads(fig.to_json())
    assert all(math.isfinite(v) for v in numbers(spec["data"]))
    assert not any("bdata" in json.dumps(t) for t in spec["data"])  # lists, not base64 arrays


def test_specs_match_the_builders_signatures():
    for name, (builder, spec) in INTERACTIVE.items():
        params = inspect.signature(builder).parameters
        for arg, s in spec.items():
            assert arg in params, f"{name}: slider {arg} is not an argument of {builder.__name__}"
            assert s.min <= s.value <= s.max
            assert params[arg].default == s.value, f"{name}: the slider's default differs from the builder's"


def test_slider_points_cover_min_mid_max():
    spec = {"a": Slider(1.0, 3.0, 0.5, 2.0), "b": Slider(0.001, 0.1, 0.1, 0.01, log=True), "c": Slider(2, 9, 1, 4, integer=True)}
    points = list(slider_points(spec))
    assert [p["a"] for p in points[:3]] == [1.0, 2.0, 3.0]
    assert [p["b"] for p in points[3:6]] == pytest.approx([0.001, 0.01, 0.1])  # geometric mid
    assert [p["c"] for p in points[6:]] == [2, 6, 9] and all(isinstance(p["c"], int) for p in points)


def test_widgets_carry_the_spec():
    w = make_widget("tau", Slider(0.001, 0.1, 0.05, 0.01, log=True))
    assert w.value == pytest.approx(0.01) and w.min == pytest.approx(-3) and w.max == pytest.approx(-1)
    w = make_widget("num_bins", Slider(2, 40, 1, 10, integer=True))
    assert (w.min, w.max, w.value) == (2, 40, 10)


def test_explore_calls_the_builder_with_the_slider_values():
    widget = explore(lambda x, y: (x, y), {"x": Slider(0.0, 1.0, 0.1, 0.3)}, y="fixed")
    assert widget.result == (pytest.approx(0.3), "fixed")
    widget.children[0].value = 0.8
    assert widget.result == (pytest.approx(0.8), "fixed")


@pytest.mark.parametrize("name", list(INTERACTIVE))
def test_explore_builds_every_registered_figure(name):
    builder, spec = INTERACTIVE[name]
    widget = explore(builder, spec)
    assert isinstance(widget.result, go.Figure)
    assert [c.description for c in widget.children[:-1]] == [s.description or arg for arg, s in spec.items()]


@pytest.mark.parametrize("value, expected", [("1", True), ("yes", True), ("", False), ("0", False), ("false", False)])
def test_fast_mode_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("LAB_FAST", value)
    assert fast_mode() is expected


def test_fast_mode_off_without_the_variable(monkeypatch):
    monkeypatch.delenv("LAB_FAST", raising=False)
    assert fast_mode() is False
