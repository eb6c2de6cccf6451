"""The matplotlib rendering of plotly figures used for docs/figures draws the same data."""
import matplotlib.patches
import plotly.graph_objects as go
import pytest
from PIL import Image

from lab.viz.gradient_flow import plot_gradient_flow
from lab.viz.render import save_png, to_matplotlib
from lab.viz.surrogates import plot_surrogates


def test_lines_are_the_traces():
    fig = plot_surrogates(0.02, 50.0, 0.03)
    out = to_matplotlib(fig)
    lines = [line for ax in out.axes for line in ax.lines]
    assert len(lines) == len(fig.data) + len(fig.layout.shapes)  # traces, then the dotted delta lines
    drawn = {(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in lines}
    assert all((tuple(t.x), tuple(t.y)) in drawn for t in fig.data)
    assert [ax.get_xlim() for ax in out.axes] == [tuple(fig.layout.xaxis.range)] * 2


def test_one_arrow_per_plotly_arrow():
    fig = plot_gradient_flow()
    out = to_matplotlib(fig)
    arrows = [a for a in out.artists if isinstance(a, matplotlib.patches.FancyArrowPatch)]
    assert len(arrows) == sum(1 for a in fig.layout.annotations if a.showarrow) == 5


def test_png_size_and_weight(tmp_path):
    fig = plot_surrogates()
    path = save_png(fig, tmp_path / "f.png")
    with Image.open(path) as im:
        assert im.size == (fig.layout.width, fig.layout.height)
    assert path.stat().st_size < 300_000


def test_unsupported_traces_raise():
    with pytest.raises(NotImplementedError, match="heatmap"):
        to_matplotlib(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])))


def test_a_legend_right_of_the_plot_stays_there():
    fig = go.Figure([go.Scatter(x=[0, 1], y=[0, 1], mode="markers", name=f"group {i}") for i in range(12)])
    fig.update_layout(width=800, height=400, margin=dict(l=50, r=200, t=40, b=40), legend=dict(x=1.02, y=1.0))
    out = to_matplotlib(fig)
    legend = out.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [f"group {i}" for i in range(12)]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(out).get_renderer()
    lefts = {round(t.get_window_extent(renderer).x0) for t in legend.get_texts()}
    assert len(lefts) == 1  # one column
    box = legend.get_window_extent(renderer)
    assert box.x0 >= (800 - 200) * out.dpi / 100 - 1  # right of the plot area, not under it


def test_grouped_bars_over_categories_sit_side_by_side():
    fig = go.Figure([go.Bar(x=["R@1", "mAP@R"], y=[0.5, 0.2], name="a"), go.Bar(x=["R@1", "mAP@R"], y=[0.6, 0.3], name="b")])
    fig.update_layout(barmode="group")
    ax = to_matplotlib(fig).axes[0]
    bars = sorted(ax.patches, key=lambda r: r.get_x())
    centres = [round(r.get_x() + r.get_width() / 2, 6) for r in bars]
    assert centres == [-0.2, 0.2, 0.8, 1.2]  # category 0 then 1, trace a left of trace b
    assert [r.get_height() for r in bars] == [0.5, 0.6, 0.2, 0.3]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["R@1", "mAP@R"]
