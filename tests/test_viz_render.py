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
        assert im.size == (fig.layout.meta["static_width"], fig.layout.height)  # no fixed width: its static one
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
    fig = go.Figure([go.Bar(x=["R@1", "mAP@R"], y=[0.5, 0.2], name="a"),
                     go.Bar(x=["R@1", "mAP@R"], y=[0.6, 0.3], name="b")])
    fig.update_layout(barmode="group")
    ax = to_matplotlib(fig).axes[0]
    bars = sorted(ax.patches, key=lambda r: r.get_x())
    centres = [round(r.get_x() + r.get_width() / 2, 6) for r in bars]
    assert centres == [-0.2, 0.2, 0.8, 1.2]  # category 0 then 1, trace a left of trace b
    assert [r.get_height() for r in bars] == [0.5, 0.6, 0.2, 0.3]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["R@1", "mAP@R"]


def test_error_bars_and_marker_shapes_are_drawn():
    fig = go.Figure([go.Scatter(x=[0.0, 1.0], y=[0.5, 0.7], mode="markers",
                                marker=dict(symbol="diamond", color="#0072B2"),
                                error_y=dict(type="data", array=[0.05, 0.1])),
                     go.Scatter(x=[2.0], y=[0.6], mode="markers", marker=dict(symbol="square"))])
    ax = to_matplotlib(fig).axes[0]
    bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(bars) == 1  # the second trace has no error_y
    (segments,) = bars[0].lines[2]
    drawn = [[float(v) for point in s for v in point] for s in segments.get_segments()]
    assert drawn == [pytest.approx([0.0, 0.45, 0.0, 0.55]), pytest.approx([1.0, 0.6, 1.0, 0.8])]  # mean ± the array
    from matplotlib.markers import MarkerStyle

    shapes = [c.get_paths()[0].vertices.round(6).tolist() for c in ax.collections
              if type(c).__name__ == "PathCollection"]
    want = [MarkerStyle(m).get_path().transformed(MarkerStyle(m).get_transform()).vertices.round(6).tolist()
            for m in "Ds"]
    assert shapes == want  # a diamond, then a square (not two circles)
    with pytest.raises(NotImplementedError, match="hexagram"):  # a plotly symbol with no matplotlib twin here
        to_matplotlib(go.Figure(go.Scatter(x=[0], y=[0], mode="markers", marker=dict(symbol="hexagram"))))


def test_a_log_axis_with_tick_values_shows_only_those():
    fig = go.Figure(go.Scatter(x=[2.0, 5.0, 10.0, 20.0, 40.0], y=[1, 2, 3, 4, 5]))
    fig.update_xaxes(type="log", tickvals=[2.0, 5.0, 10.0, 20.0, 40.0], ticktext=["2", "5", "10", "20", "40"])
    ax = to_matplotlib(fig).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "5", "10", "20", "40"]
    assert ax.xaxis.get_minorticklocs().size == 0  # no 3x10^1 labels overlapping the explicit ones


def test_figures_have_no_fixed_width_but_keep_their_static_one_and_their_meta():
    flow = plot_gradient_flow()
    assert flow.layout.width is None and flow.layout.meta["static_width"] == 760
    assert "arrow_scales" in flow.layout.meta  # the builder's own meta survives
    assert to_matplotlib(flow).get_size_inches()[0] * 100 == pytest.approx(760)


def test_a_shown_figure_is_a_png_where_a_bare_figure_is_only_text():
    from IPython.core.formatters import DisplayFormatter
    from matplotlib.figure import Figure

    from lab.viz.style import ShownFigure

    formatter = DisplayFormatter()  # no pyplot, no inline backend: what a kernel has before either
    shown, bare = ShownFigure(figsize=(2, 1)), Figure(figsize=(2, 1))
    for fig in (shown, bare):
        fig.subplots().plot([0, 1], [0, 1])
    data, _ = formatter.format(shown)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert "image/png" not in formatter.format(bare)[0]  # the defect: "<Figure size 200x100 with 1 Axes>"
