"""Every slider of the notebooks, driven headless across its range; fast mode switch."""
import base64
import inspect
import io
import json
import math
import re

import plotly.graph_objects as go
import pytest

from lab.viz.controls import Slider, explore, make_widget, slider_points
from lab.viz.registry import INTERACTIVE, caption

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

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


@pytest.mark.parametrize("name, kwargs", CASES,
                         ids=[f"{n}-{'-'.join(f'{k}={v:.3g}' for k, v in kw.items())}" for n, kw in CASES])
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
    spec = {"a": Slider(1.0, 3.0, 0.5, 2.0), "b": Slider(0.001, 0.1, 0.1, 0.01, log=True),
            "c": Slider(2, 9, 1, 4, integer=True)}
    points = list(slider_points(spec))
    assert [p["a"] for p in points[:3]] == [1.0, 2.0, 3.0]
    assert [p["b"] for p in points[3:6]] == pytest.approx([0.001, 0.01, 0.1])  # geometric mid
    assert [p["c"] for p in points[6:]] == [2, 6, 9] and all(isinstance(p["c"], int) for p in points)


def test_widgets_carry_the_spec():
    w = make_widget("tau", Slider(0.001, 0.1, 0.05, 0.01, log=True))
    assert w.value == pytest.approx(0.01) and w.min == pytest.approx(-3) and w.max == pytest.approx(-1)
    w = make_widget("num_bins", Slider(2, 40, 1, 10, integer=True))
    assert (w.min, w.max, w.value) == (2, 40, 10)


def plotly_outputs(explorer):
    """The figure specs shown in an explorer's output area (what the frontend draws)."""
    return [o["data"][PLOTLY] for o in explorer.output.outputs if o["output_type"] == "display_data"]


def test_explore_calls_the_builder_with_the_slider_values():
    ex = explore(lambda x, y: (x, y), {"x": Slider(0.0, 1.0, 0.1, 0.3)}, y="fixed")
    assert ex.figure == (pytest.approx(0.3), "fixed")
    ex.sliders["x"].value = 0.8  # what a drag in the browser does, kernel-side
    assert ex.figure == (pytest.approx(0.8), "fixed")
    assert [o["data"]["text/plain"] for o in ex.output.outputs] == [repr((0.8, "fixed"))]


@pytest.mark.parametrize("name", list(INTERACTIVE))
def test_explore_shows_every_registered_figure_in_its_output(name):
    builder, spec = INTERACTIVE[name]
    ex = explore(builder, spec)
    assert isinstance(ex.figure, go.Figure)
    assert list(ex.widget.children) == [*ex.sliders.values(), ex.output]
    assert [c.description for c in ex.sliders.values()] == [s.description or arg for arg, s in spec.items()]
    shown = plotly_outputs(ex)
    assert len(shown) == 1 and shown[0]["data"] == json.loads(ex.figure.to_json())["data"]
    json.dumps(ex.output.outputs)  # synced to the frontend as JSON


@pytest.mark.parametrize("name", list(INTERACTIVE))
def test_moving_any_slider_redraws_the_figure_in_one_step(name):
    builder, spec = INTERACTIVE[name]
    ex = explore(builder, spec)
    for arg, s in spec.items():
        before = plotly_outputs(ex)[0]["data"]
        changes = []
        ex.output.observe(changes.append, names="outputs")
        target = s.max if ex.sliders[arg].value != pytest.approx(s.max) else s.min
        ex.sliders[arg].value = target
        ex.output.unobserve(changes.append, names="outputs")
        after = plotly_outputs(ex)[0]["data"]
        assert len(changes) == 1, f"{name}: moving {arg} replaced the output {len(changes)} times"
        assert after != before, f"{name}: moving {arg} to {target} left the figure's traces unchanged"
        assert after == json.loads(builder(**ex.values).to_json())["data"]


def test_set_moves_several_sliders_and_redraws_once():
    builder, spec = INTERACTIVE["surrogates"]
    ex = explore(builder, spec)
    changes = []
    ex.output.observe(changes.append, names="outputs")
    ex.set(tau=0.1, rho=1000.0)
    assert len(changes) == 1 and ex.values == pytest.approx({"tau": 0.1, "rho": 1000.0, "delta": 0.05})
    assert "τ = 0.1, ρ = 1e+03" in ex.figure.layout.title.text


def test_explore_rejects_bad_arguments():
    builder, spec = INTERACTIVE["surrogates"]
    with pytest.raises(ValueError, match=r"fixed arguments \['tau'\] are also sliders"):
        explore(builder, spec, tau=0.1)
    ex = explore(builder, spec)
    with pytest.raises(ValueError, match=r"no slider named \['gamma'\]; sliders: \['tau', 'rho', 'delta'\]"):
        ex.set(gamma=1.0)
    with pytest.raises(ValueError, match=r"rho must be in \[1, 10000\], got 0.0"):
        ex.set(rho=0.0)  # a widget would clamp it to 1 silently


def test_a_builder_error_after_a_move_is_shown_in_place_of_the_figure():
    def builder(x: float = 0.5):
        if x > 0.9:
            raise ValueError("x too large")
        return x

    ex = explore(builder, {"x": Slider(0.0, 1.0, 0.1, 0.5)})
    ex.sliders["x"].value = 1.0
    assert ex.output.outputs == ({"output_type": "stream", "name": "stderr", "text": "ValueError: x too large\n"},)
    with pytest.raises(ValueError, match="x too large"):  # the first draw fails in the cell itself
        explore(builder, {"x": Slider(0.0, 1.0, 0.1, 1.0)})


def test_a_matplotlib_figure_is_shown_as_png():
    from matplotlib.figure import Figure

    def builder(n: int = 2):
        fig = Figure(figsize=(3, 2), dpi=50)
        fig.subplots().plot(range(n))
        return fig

    ex = explore(builder, {"n": Slider(2, 5, 1, 2, integer=True)})
    (out,) = ex.output.outputs
    png = base64.b64decode(out["data"]["image/png"])
    from PIL import Image

    assert png.startswith(b"\x89PNG")
    assert ex.output.layout.min_height == f"{Image.open(io.BytesIO(png)).height}px"  # the box keeps its height
    ex.sliders["n"].value = 5
    assert base64.b64decode(ex.output.outputs[0]["data"]["image/png"]) != png


def test_a_cell_ending_in_explore_shows_one_slider_block():
    """The defect: the block displayed by explore() and again as the cell's value (twice), with
    no figure. Run in a real IPython shell: one widget view, nothing from the cell's value."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    try:
        shell.user_ns.update(explore=explore, INTERACTIVE=INTERACTIVE)
        with capture_output() as captured:
            shell.run_cell('explore(*INTERACTIVE["surrogates"])', store_history=True)
        views = [o.data for o in captured.outputs if WIDGET_VIEW in o.data]
        assert len(views) == 1 and len(captured.outputs) == 1, [list(o.data) for o in captured.outputs]
        # The cell's value: the terminal shell prints its prompt, then nothing (a kernel sends
        # no execute_result at all); the old widget printed its repr here, a second block in Jupyter.
        assert re.sub(r"Out\[\d+\]:\s*", "", captured.stdout).strip() == ""
        explorer = shell.user_ns["_"]
        assert views[0][WIDGET_VIEW]["model_id"] == explorer.widget.model_id
    finally:
        InteractiveShell.clear_instance()


def test_rho_sliders_are_log_scale_with_the_paper_value_mid_track():
    specs = [spec["rho"] for _, spec in INTERACTIVE.values() if "rho" in spec]
    assert specs, "no rho slider: update this test"
    for s in specs:
        assert s.log and s.value == 100.0 and s.min > 0
        assert math.sqrt(s.min * s.max) == pytest.approx(100.0)  # geometric mid = the paper's rho
        w = make_widget("rho", s)
        assert (w.min + w.max) / 2 == pytest.approx(math.log10(w.value))  # the knob starts mid-track
    builder, spec = INTERACTIVE["surrogates"]
    rhos = [p["rho"] for p in slider_points(spec)][3:6]
    assert rhos == pytest.approx([1.0, 100.0, 10_000.0])


# Sphinx roles, backticks, constants (RECALL_KS) and argument names (num_bins, tau_star); plain
# maths such as L_AP, s_j or AP_b stays.
MARKUP = re.compile(r"`|:(func|mod|class|meth|attr):|\b[A-Z]{2,}_[A-Z_]{2,}\b|\b[a-z]{2,}_[a-z_]{2,}\b")


def shown_strings(spec):
    """The layout and trace text of a figure spec: titles, axis titles, annotations, names."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key not in ("template", "hovertemplate", "meta", "customdata") and not key.endswith("color"):
                yield from shown_strings(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from shown_strings(value)
    elif isinstance(spec, str):
        yield spec


@pytest.mark.parametrize("name", list(INTERACTIVE))
def test_what_students_read_is_plain_prose(name):
    builder, spec = INTERACTIVE[name]
    fig = json.loads(builder().to_json())
    texts = [caption(name)] + [s.description for s in spec.values()] + list(shown_strings(fig["layout"]))
    texts += [t for trace in fig["data"] for key in ("name", "text") for t in shown_strings(trace.get(key))]
    leaks = [t for t in texts if MARKUP.search(t)]
    assert not leaks, f"{name}: markup shown to students: {leaks}"
    assert caption(name) and "\n" not in caption(name)


def test_caption_rejects_an_unknown_name():
    with pytest.raises(ValueError, match="name must be one of"):
        caption("no such figure")
