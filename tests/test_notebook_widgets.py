"""What every notebook shows, run in a real kernel (nbclient, fast mode from conftest).

This is where the notebooks of notebooks/ run (once: nbmake runs only assignments/): each runs to its
end, a cell's error fails its tests, and its kernel stays alive so the tests can ask it what a student
would see: every cell that draws shows an image or a plot
(not a figure's repr such as "<Figure size 850x760 with 42 Axes>"), no plot has a fixed width
(cut off in a narrow JupyterLab window), one slider block per ``explore(`` cell (not the block
twice, not an empty output), a figure in the block's output area, and a figure that changes when
a slider moves (set through the widget's Python API, as a frontend's message does). The browser
side (JupyterLab draws that output) is tests/test_notebook_browser.py.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import nbformat
import pytest
from nbclient import NotebookClient

from lab.viz.controls import EXPLORER_CLASS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PLOTLY = "application/vnd.plotly.v1+json"
EXPLORE_CALL = re.compile(r"(?<![\w.])explore\(")
DRAWING_CALL = re.compile(r"(?<![\w.])(plot_\w+|explore)\(")  # the lab's figure builders and slider blocks
FIGURE_MIMES = {"image/png", PLOTLY, WIDGET_VIEW}
FIGURE_REPR = re.compile(r"<(matplotlib\.figure\.)?\w*Figure\b|Figure\(")  # a figure shown as text

pytestmark = pytest.mark.slow

# Runs in the notebook's kernel: for each explorer named by a cell's output, what its output area
# holds, then each slider moved to the other end of its track (and back) and whether the shown
# figure changed. Prints one JSON line.
PROBE = """
import json as _json
from lab.viz.controls import live_explorers as _live

def _shown(ex):
    return [{"output_type": o["output_type"], "mimes": sorted(o.get("data", {}))} for o in ex.output.outputs]

def _figure(ex):
    data = ex.output.outputs[-1].get("data", {}) if ex.output.outputs else {}
    return _json.dumps(data.get(%(plotly)r, {}).get("data")) + data.get("image/png", "")

def _other_end(value, s):
    return s.max if abs(value - s.min) <= 1e-9 * max(1.0, abs(s.min)) else s.min

_KINDS = ("plotly.graph_objs._figure.Figure", "matplotlib.figure.Figure")  # or a subclass of one
_report = {}
for _mid in %(model_ids)r:
    _ex = _live().get(_mid)
    if _ex is None:
        _report[_mid] = None
        continue
    _kinds = [c.__module__ + "." + c.__name__ for c in type(_ex.figure).__mro__]
    _entry = {"figure_type": next((k for k in _kinds if k in _KINDS), _kinds[0]),
              "shown": _shown(_ex), "moves": {}}
    for _name, _slider in _ex.sliders.items():
        _before, _old = _figure(_ex), _slider.value
        _slider.value = _other_end(_old, _ex.spec[_name])
        _entry["moves"][_name] = {"from": _old, "to": _slider.value, "changed": _figure(_ex) != _before,
                                  "shown_after": _shown(_ex)}
        _slider.value = _old
        _entry["moves"][_name]["restored"] = _figure(_ex) == _before
    _report[_mid] = _entry
print(_json.dumps({"live": len(_live()), "report": _report}))
"""


class Run(NamedTuple):
    path: Path
    nb: Any
    client: NotebookClient


def explore_calls(source: str) -> int:
    """``explore(`` calls in a cell's code (the import line has no parenthesis after the name)."""
    return len(EXPLORE_CALL.findall(source))


def slider_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and explore_calls(c.source)]


def widget_views(cell) -> list[str]:
    return [o["data"][WIDGET_VIEW]["model_id"] for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]


def in_kernel(run: Run, code: str) -> dict:
    """Execute ``code`` as an extra cell in the notebook's live kernel; the JSON it printed."""
    cell = nbformat.v4.new_code_cell(code)
    run.nb.cells.append(cell)
    run.client.execute_cell(cell, len(run.nb.cells) - 1)
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
    return json.loads(text.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=[p.stem[:2] for p in NOTEBOOKS])
def run(request):
    """The notebook executed cell by cell in its folder, to its end, its kernel kept alive."""
    path = request.param
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(path.parent)}})
    client.reset_execution_trackers()
    with client.setup_kernel():
        for index, cell in enumerate(list(nb.cells)):
            client.execute_cell(cell, index)
        yield Run(path, nb, client)


@pytest.fixture(scope="module")
def probe(run):
    model_ids = [m for cell in slider_cells(run.nb) for m in widget_views(cell)]
    return in_kernel(run, PROBE % {"plotly": PLOTLY, "model_ids": model_ids})


def drawing_cells(nb) -> list:
    """The code cells that call a figure builder of the lab or ``explore``: by their code, not by
    what they show (the defect showed text)."""
    return [c for c in nb.cells if c.cell_type == "code" and DRAWING_CALL.search(c.source)]


def test_every_drawing_cell_shows_an_image_or_a_plot(run):
    cells = drawing_cells(run.nb)
    assert cells, f"{run.path.name}: no drawing cell found: update DRAWING_CALL"
    for cell in cells:
        mimes = {m for o in cell.outputs for m in o.get("data", {})}
        assert mimes & FIGURE_MIMES, f"{run.path.name}: {cell.source[-200:]!r} shows only {sorted(mimes)}"


# What a saved notebook shows that a student should not meet (issue 36): a warning the notebook's
# own code causes (C-2: float() of a tensor that requires grad), a progress bar saved at its start
# (C-5: tqdm's widget keeps the text it was first drawn with), a label id for a named script (C-3).
NOT_SHOWN = re.compile(r"Converting a tensor with requires_grad=True to a scalar|\b0%\||coarse categories .*: \[?\d")


def shown_text(cell) -> str:
    return "\n".join(o.get("text", "") if o.get("output_type") == "stream" else o.get("data", {}).get("text/plain", "")
                     for o in cell.outputs)


def test_no_cell_shows_a_warning_of_its_own_code_or_a_bar_frozen_at_0_percent(run):
    found = [(c.source[:80], m.group(0)) for c in run.nb.cells if c.cell_type == "code"
             for m in [NOT_SHOWN.search(shown_text(c))] if m]
    assert not found, f"{run.path.name}: {found}"


def test_no_cell_shows_a_figure_as_text(run):
    for cell in (c for c in run.nb.cells if c.cell_type == "code"):
        for o in cell.outputs:
            data = o.get("data", {})
            text = data.get("text/plain", "")
            if FIGURE_REPR.search(text):
                assert data.keys() & FIGURE_MIMES, f"{run.path.name}: {cell.source[-200:]!r} shows {text!r}"


def shown_plots(run) -> list[dict]:
    """The plotly figures a student sees: cell outputs and the slider blocks' output areas."""
    areas = [m for m in run.client.widget_state.values() if m.get("_model_name") == "OutputModel"]
    outputs = [o for c in run.nb.cells if c.cell_type == "code" for o in c.outputs]
    outputs += [o for area in areas for o in area.get("outputs", [])]
    return [o["data"][PLOTLY] for o in outputs if PLOTLY in o.get("data", {})]


def test_no_plot_has_a_fixed_width(run):
    plots = shown_plots(run)
    assert plots, f"{run.path.name}: no plotly figure shown"
    for plot in plots:
        layout = plot.get("layout", {})
        assert layout.get("width") is None, f"{run.path.name}: {layout.get('title')} is {layout['width']} px wide"


def test_every_slider_cell_shows_one_slider_block_and_nothing_else(run):
    cells = slider_cells(run.nb)
    for cell in cells:
        calls = explore_calls(cell.source)
        kinds = [(o["output_type"], sorted(o.get("data", {}))) for o in cell.outputs]
        assert len(widget_views(cell)) == calls, f"{run.path.name}: {cell.source!r} shows {kinds}"
        # The defect: the cell's value repeated the block (an execute_result widget view).
        assert len(cell.outputs) == calls and all(o["output_type"] == "display_data" for o in cell.outputs), \
            f"{run.path.name}: {cell.source!r} shows {kinds}"


def test_every_explore_call_made_one_live_explorer(run, probe):
    source = nbformat.read(run.path, as_version=4)  # the whole notebook, not only the cells run
    calls = sum(explore_calls(c.source) for c in source.cells if c.cell_type == "code")
    assert calls == sum(explore_calls(c.source) for c in slider_cells(run.nb))
    # Every explorer of the kernel is one that a cell shows: none escapes the other tests.
    assert probe["live"] == calls, f"{run.path.name}: {probe['live']} explorers for {calls} explore( calls"
    assert all(probe["report"][m] is not None for m in probe["report"]), "a shown block is not an explorer"


def test_every_slider_block_receives_a_figure(run):
    """Read from the widget state the kernel sent over its comms: what a frontend is given to draw."""
    state = run.client.widget_state
    for cell in slider_cells(run.nb):
        for mid in widget_views(cell):
            children = [c.removeprefix("IPY_MODEL_") for c in state[mid]["children"]]
            area = state[children[-1]]
            assert area["_model_name"] == "OutputModel", f"{run.path.name}: {cell.source!r}: no output area last"
            shown = [(o["output_type"], sorted(o.get("data", {}))) for o in area["outputs"]]
            assert len(shown) == 1 and shown[0][0] == "display_data", \
                f"{run.path.name}: {cell.source!r}: the output area holds {shown}, not one figure"
            data = area["outputs"][0]["data"]
            assert data.get(PLOTLY, {}).get("data") or data.get("image/png"), f"{run.path.name}: {shown}"
            assert EXPLORER_CLASS in state[mid]["_dom_classes"]
            assert all(state[c]["_model_name"] in ("IntSliderModel", "FloatSliderModel", "FloatLogSliderModel")
                       for c in children[:-1])


def test_every_explorer_shows_its_kind_of_figure(run, probe):
    for mid, entry in probe["report"].items():
        mime = "image/png" if entry["figure_type"].startswith("matplotlib.") else PLOTLY
        assert entry["figure_type"] in ("plotly.graph_objs._figure.Figure", "matplotlib.figure.Figure")
        assert [o["output_type"] for o in entry["shown"]] == ["display_data"], f"{run.path.name}: {entry}"
        assert mime in entry["shown"][0]["mimes"], f"{run.path.name}: {entry['shown']}"


def test_moving_any_slider_changes_the_figure(run, probe):
    for mid, entry in probe["report"].items():
        assert entry["moves"], f"{run.path.name}: an explorer without sliders"
        for name, move in entry["moves"].items():
            where = f"{run.path.name}, explorer of {entry['figure_type']}: {name} {move['from']} -> {move['to']}"
            assert move["from"] != move["to"], where
            assert move["changed"], f"{where} left the figure unchanged"
            assert [o["output_type"] for o in move["shown_after"]] == ["display_data"], where
            assert move["restored"], f"{where} and back did not restore the figure"
