"""The dashboard's training curves as SVG (lab.viz.svg_curves): the numbers each line draws, read back from the
SVG, against the history they come from; the axes, titles, legend and escaping."""
import math
import xml.etree.ElementTree as ET

import pytest

from lab.viz.style import SERIES
from lab.viz.svg_curves import MAX_POINTS, _nice_ticks, training_curves_svg

NS = {"s": "http://www.w3.org/2000/svg"}
HISTORY = [
    {"kind": "eval", "step": 0, "R@1": 0.2, "mAP@R": 0.1, "decomposability_gap": 0.3},
    {"kind": "train", "step": 1, "loss": 0.9, "batch_ap": 0.4},
    {"kind": "train", "step": 2, "loss": 0.7, "batch_ap": 0.5},
    {"kind": "eval", "step": 2, "R@1": 0.4, "mAP@R": 0.2, "decomposability_gap": 0.2},
]
OTHER = [dict(r, loss=r["loss"] + 1) if "loss" in r else r for r in HISTORY]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def lines(root: ET.Element) -> dict[tuple[str, str], ET.Element]:
    """{(run, metric): its group} of every drawn line."""
    return {(g.get("data-run"), g.get("data-metric")): g for g in root.iter(f"{{{NS['s']}}}g")
            if g.get("class") == "rl-line"}


def drawn(group: ET.Element) -> tuple[list[float], list[float]]:
    line = group.find("s:polyline", NS)
    return ([float(x) for x in line.get("data-x").split(",")], [float(y) for y in line.get("data-y").split(",")])


def test_every_line_draws_its_runs_history_exactly_in_the_runs_colour():
    root = parse(training_curves_svg({"A": HISTORY, "B": OTHER}))
    found = lines(root)
    assert set(found) == {(run, m) for run in "AB" for m in ("loss", "batch_ap", "R@1", "mAP@R", "decomposability_gap")}
    assert drawn(found[("A", "loss")]) == ([1.0, 2.0], [0.9, 0.7])
    assert drawn(found[("B", "loss")]) == ([1.0, 2.0], [1.9, 1.7])
    assert drawn(found[("A", "R@1")]) == ([0.0, 2.0], [0.2, 0.4])
    for (run, metric), group in found.items():
        line = group.find("s:polyline", NS)
        assert line.get("stroke") == SERIES["AB".index(run)]
        assert (line.get("stroke-dasharray") is not None) == (metric == "mAP@R")  # mAP@R dashed beside R@1
    assert found[("B", "loss")].find("s:title", NS).text == "B · loss: 1.700 at step 2"  # what hovering shows
    points = [c.find("s:title", NS).text for c in found[("A", "R@1")].findall("s:circle", NS)]
    assert points == ["A · R@1: 0.200 at step 0", "A · R@1: 0.400 at step 2"]  # each evaluation, on hover


def test_points_lie_inside_their_panel_and_keep_the_order_of_their_values():
    long = [{"kind": "train", "step": s, "loss": math.sin(s / 7), "batch_ap": s / 50} for s in range(1, 51)]
    root = parse(training_curves_svg({"A": long}))
    frames = [r for r in root.iter(f"{{{NS['s']}}}rect")]
    group = lines(root)[("A", "loss")]
    points = [tuple(map(float, p.split(","))) for p in group.find("s:polyline", NS).get("points").split()]
    frame = frames[0]
    x0, y0 = float(frame.get("x")), float(frame.get("y"))
    x1, y1 = x0 + float(frame.get("width")), y0 + float(frame.get("height"))
    assert all(x0 <= x <= x1 and y0 <= y <= y1 for x, y in points)
    xs, ys = zip(*points)
    assert list(xs) == sorted(xs)
    values = [r["loss"] for r in long]  # higher value, higher on screen (smaller y)
    for i, j in ((0, 10), (5, 30), (12, 40)):
        assert (values[i] > values[j]) == (ys[i] < ys[j])


def test_the_panel_titles_carry_each_runs_latest_value_in_its_colour():
    root = parse(training_curves_svg({"A": HISTORY, "B": OTHER}, rows=1))
    titles = [t for t in root.iter(f"{{{NS['s']}}}text") if t.get("class") == "rl-panel-title"]
    assert [t.text for t in titles] == ["training loss", "batch AP (train)", "held-out R@1 · mAP@R (dashed)",
                                        "decomp. gap (train probe)"]
    values = [[(span.get("fill"), span.text) for span in t.iter(f"{{{NS['s']}}}tspan") if span.get("fill")]
              for t in titles]
    assert values[0] == [(SERIES[0], "0.700"), (SERIES[1], "1.700")]
    assert values[2] == [(SERIES[0], "0.400 · 0.200"), (SERIES[1], "0.400 · 0.200")]
    # rows=1: four panels side by side, same height; rows=2: two rows
    ys = {float(t.get("y")) for t in titles}
    assert len(ys) == 1
    two = parse(training_curves_svg({"A": HISTORY}, rows=2))
    assert len({float(t.get("y")) for t in two.iter(f"{{{NS['s']}}}text") if t.get("class") == "rl-panel-title"}) == 2


def test_the_step_axis_is_whole_steps_from_zero_even_before_any_training_step():
    for history, last in ((HISTORY[:1], 1), (HISTORY, 2), ([{"kind": "train", "step": s, "loss": 1.0, "batch_ap": 0.5}
                                                          for s in range(1, 138)], 137)):
        root = parse(training_curves_svg({"A": history}))
        ticks = [t.text for t in root.iter(f"{{{NS['s']}}}text") if t.get("class") == "rl-xtick"]
        per_panel = [int(t) for t in ticks[:len(ticks) // 4]]
        assert per_panel[0] == 0 and per_panel == sorted(per_panel) and per_panel[-1] <= last
        assert len(ticks) == 4 * len(per_panel)  # every panel on the same axis
        assert last - per_panel[-1] < per_panel[1] - per_panel[0] if len(per_panel) > 1 else last == 1


@pytest.mark.parametrize("low, high", [(0.05, 0.93), (0.1, 0.2), (0.0, 1.0), (0.149, 0.151), (-3.0, 250.0),
                                       (0.3, 0.3001), (-0.02, 0.01), (0.3, 0.3 + 1e-11), (-1e30, 1e30)])
def test_y_ticks_are_3_to_5_round_values_inside_the_range(low, high):
    ticks, step = _nice_ticks(low, high)
    assert 2 <= len(ticks) <= 5 and all(low - 1e-12 <= t <= high + 1e-12 for t in ticks)
    assert all(b - a == pytest.approx(step) for a, b in zip(ticks, ticks[1:]))
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - n) for n in (1, 2, 5)) < 1e-9
    assert (high - low) / step < 6  # not finer than needed


def test_a_long_run_draws_at_most_max_points_and_always_its_last_step():
    history = [{"kind": "train", "step": s, "loss": 1 / s, "batch_ap": 0.5} for s in range(1, 5001)]
    steps, values = drawn(lines(parse(training_curves_svg({"A": history})))[("A", "loss")])
    assert len(steps) <= MAX_POINTS and steps[0] == 1 and steps[-1] == 5000 and values[-1] == 1 / 5000
    assert all(v == 1 / s for s, v in zip(steps, values))


def test_a_flat_or_non_finite_series_still_draws_finite_numbers():
    history = [{"kind": "train", "step": s, "loss": 0.0, "batch_ap": float("nan") if s == 2 else 0.5}
               for s in range(1, 4)]
    svg = training_curves_svg({"A": history})
    assert "nan" not in svg.lower() and "inf" not in svg.lower()
    steps, values = drawn(lines(parse(svg))[("A", "batch_ap")])
    assert steps == [1.0, 3.0] and values == [0.5, 0.5]  # the NaN left out, not drawn as a point


def test_labels_are_escaped_and_an_empty_history_draws_empty_panels():
    svg = training_curves_svg({"<b>A</b> & 'x'": HISTORY, "B": []}, title="<script>x</script>")
    root = parse(svg)
    assert "<script>" not in svg and "<b>" not in svg
    assert root.get("role") == "img" and root.get("aria-label") == "<script>x</script>"  # named for a screen reader
    assert {run for run, _ in lines(root)} == {"<b>A</b> & 'x'"}  # B has no line yet
    assert len([r for r in root.iter(f"{{{NS['s']}}}rect")]) == 4
