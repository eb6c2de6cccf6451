"""The dashboard's figure builders (lab.viz.dashboard_figures): the numbers they draw and the specs."""
import base64
import io
import json

import pytest
from PIL import Image

from lab.viz.dashboard_figures import (LEVEL_COLORS, ap_histogram, plot_ap_histograms, plot_embedding_map,
                               plot_retrieval_strip, plot_score_histograms,
                               png_data_uri, score_histogram, spread_note, training_series)
from lab.viz.dashboard_figures import comparison_note, signed
from lab.viz.retrieval_views import QUERY
from lab.viz.svg_comparison import run_comparison_svg
from lab.viz.style import NEGATIVE, POSITIVE

HISTORY = [
    {"kind": "eval", "step": 0, "R@1": 0.2, "mAP@R": 0.1, "decomposability_gap": 0.3},
    {"kind": "train", "step": 1, "loss": 0.9, "batch_ap": 0.4},
    {"kind": "train", "step": 2, "loss": 0.7, "batch_ap": 0.5},
    {"kind": "eval", "step": 2, "R@1": 0.4, "mAP@R": 0.2, "decomposability_gap": 0.2},
]


def spec(fig) -> dict:
    text = json.dumps(fig.to_plotly_json(), default=str)
    assert "bdata" not in text, "figures must be built from lists (plotly 7 base64-encodes arrays)"
    return json.loads(text)


def test_training_series_splits_train_and_eval_records():
    s = training_series(HISTORY)
    assert s["loss"] == ([1.0, 2.0], [0.9, 0.7])
    assert s["batch_ap"] == ([1.0, 2.0], [0.4, 0.5])
    assert s["R@1"] == ([0.0, 2.0], [0.2, 0.4])
    assert s["decomposability_gap"] == ([0.0, 2.0], [0.3, 0.2])


def test_score_histogram_densities_and_calibration_fractions():
    pos, neg = [0.95, 0.5, 0.8, 0.99], [0.1, 0.7, -0.3]
    h = score_histogram(pos, neg, alpha=0.9, beta=0.6, bins=20)
    assert h["pos_below_alpha"] == pytest.approx(2 / 4)
    assert h["neg_above_beta"] == pytest.approx(1 / 3)
    assert sum(h["pos"]) * h["width"] == pytest.approx(1.0)
    assert sum(h["neg"]) * h["width"] == pytest.approx(1.0)
    lo, hi = h["range"]
    assert lo <= -0.3 and hi >= 0.99 and -1 <= lo and hi <= 1
    assert h["mean_pos"] == pytest.approx(sum(pos) / 4)


def test_score_histogram_zooms_on_collapsed_similarities_but_keeps_the_thresholds():
    h = score_histogram([0.999, 0.998], [0.997, 0.996], alpha=0.9, beta=0.6)
    lo, hi = h["range"]
    assert lo <= 0.6 and hi >= 0.999 and hi - lo < 0.5  # not the whole [-1, 1]


def test_score_histogram_figure_draws_alpha_beta_dashed_only_for_reference_values():
    samples = {"A": ([0.9, 0.8], [0.1, 0.2]), "B": ([0.7], [0.3])}
    fig = spec(plot_score_histograms(samples, {"A": (0.9, 0.6, True), "B": (0.85, 0.5, False)}))
    shapes = fig["layout"]["shapes"]
    lines = sorted((s["x0"], s["line"]["dash"]) for s in shapes)
    assert lines == [(0.5, "dash"), (0.6, "solid"), (0.85, "dash"), (0.9, "solid")]
    colours = {t["marker"]["color"] for t in fig["data"]}
    assert colours == {POSITIVE, NEGATIVE}
    assert fig["layout"]["meta"]["stats"]["A"]["pos_below_alpha"] == pytest.approx(0.5)
    titles = [a["text"] for a in fig["layout"]["annotations"] if a["text"].startswith(("A:", "B:"))]
    assert titles[0].startswith("A: 50% of positives < α")
    assert fig["layout"]["xaxis2"]["domain"][0] > fig["layout"]["xaxis"]["domain"][1]  # side by side: one screen


@pytest.mark.parametrize("thresholds, says, never", [
    ({"A · roadmap": (0.9, 0.6, True)}, "A · roadmap: solid lines", "dashed"),
    ({"A · smooth_ap": (0.9, 0.6, False)}, "A · smooth_ap has no calibration term: dashed lines", "solid"),
    ({"A · roadmap": (0.9, 0.6, True), "B · fast_ap": (0.9, 0.6, False)}, "B · fast_ap has no calibration", None),
])
def test_the_scores_caption_speaks_of_the_losses_shown(thresholds, says, never):
    # Issue 46: "dashed lines: the loss has no calibration term" under ROADMAP's solid lines read as about ROADMAP.
    from lab.viz.dashboard_figures import score_caption

    text = score_caption(thresholds)
    assert says in text and (never is None or never not in text), text


def test_ap_histogram_counts_every_query_and_the_mean():
    aps = [0.0, 0.25, 0.5, 1.0, 1.0]
    h = ap_histogram(aps, bins=4)
    assert sum(h["counts"]) == 5 and h["counts"][-1] == 2  # AP = 1 falls in the last bin
    assert h["mean"] == pytest.approx(0.55) and h["num_queries"] == 5
    fig = spec(plot_ap_histograms({"A": aps}, bins=4))
    assert fig["data"][0]["y"] == h["counts"]
    assert "mAP 0.550" in fig["data"][0]["name"]
    mean = fig["data"][1]  # the dotted line is a trace: it has a legend entry (issue 36, C-7)
    assert mean["x"] == [pytest.approx(0.55)] * 2 and mean["line"]["dash"] == "dot"
    assert mean["name"] == "A: mean AP (dotted line)" and mean.get("showlegend", True)


def test_the_threshold_labels_sit_above_the_tallest_bars():
    # Issue 36, C-7: "α = 0.90" ran into the tallest bars (the label sits at the top of the panel).
    samples = {"A": ([0.95] * 50 + [0.5], [0.1, 0.2, 0.3]), "B": ([0.7, 0.8], [0.3] * 40)}
    fig = spec(plot_score_histograms(samples, {"A": (0.9, 0.6, True), "B": (0.85, 0.5, False)}))
    stats = fig["layout"]["meta"]["stats"]
    for axis, label in (("yaxis", "A"), ("yaxis2", "B")):  # side by side: one y axis each
        tallest = max(stats[label]["pos"] + stats[label]["neg"])
        assert fig["layout"][axis]["range"][1] >= 1.25 * tallest, axis
    sides = {a["text"].split(" ")[0]: a for a in fig["layout"]["annotations"] if a["text"][0] in "αβ"}
    # Both inside the band between the lines (not cut at the panel's edge), β's a line below α's.
    assert sides["α"]["xanchor"] == "right" and sides["β"]["xanchor"] == "left" and sides["β"]["yshift"] < 0


def test_embedding_map_points_carry_their_row_and_the_selection_is_drawn():
    points = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    fig = spec(plot_embedding_map(points, [0, 1, 0, 1], {0: "Latin", 1: "Greek"}, ["a", "b", "c", "d"], "t",
                                  selected=2, neighbours={"rows": [0, 1], "levels": ["class", "other"]}))
    groups = [t for t in fig["data"] if t["name"] in ("Latin", "Greek")]
    rows = sorted(r for t in groups for r in t["customdata"])
    assert rows == [0, 1, 2, 3]
    latin = next(t for t in groups if t["name"] == "Latin")
    assert latin["customdata"] == [0, 2] and latin["x"] == [0.0, 0.0] and latin["y"] == [0.0, 1.0]
    query = next(t for t in fig["data"] if t["name"] == "query")
    assert query["customdata"] == [2] and query["marker"]["color"] == QUERY
    ring = next(t for t in fig["data"] if t["name"] == "neighbours")
    assert ring["marker"]["line"]["color"] == [LEVEL_COLORS["class"], LEVEL_COLORS["other"]]


def test_embedding_map_gives_each_of_16_scripts_its_own_colour_and_marker():
    groups = [g for g in range(16) for _ in range(3)]
    points = [[float(i), float(i % 5)] for i in range(len(groups))]
    fig = spec(plot_embedding_map(points, groups, {g: f"script {g}" for g in range(16)}, [""] * len(groups), "map"))
    styles = [(t["marker"]["color"], t["marker"]["symbol"]) for t in fig["data"]]
    assert len(styles) == 16 and len(set(styles)) == 16  # before: 14 colours for 16 scripts, two shared
    assert not {c.lower() for c, _ in styles} & {c.lower() for c in LEVEL_COLORS.values()}  # no ring colour


def test_retrieval_strip_frames_by_relevance_level_with_scores():
    img = Image.new("RGB", (8, 6), "white")
    fig = spec(plot_retrieval_strip(img, [img, img, img], [0.9, 0.8, 0.7], ["class", "coarse", "other"]))
    meta = fig["layout"]["meta"]
    assert meta["frames"] == [QUERY, POSITIVE, LEVEL_COLORS["coarse"], NEGATIVE]
    assert [s["line"]["color"] for s in fig["layout"]["shapes"]] == meta["frames"]
    assert meta["scores"] == [0.9, 0.8, 0.7]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["query", "#1 · 0.900", "#2 · 0.800", "#3 · 0.700"]
    assert len(fig["data"]) == 4 and fig["layout"]["shapes"][0]["x1"] == 7.5  # frame around the 8 px image
    decoded = Image.open(io.BytesIO(base64.b64decode(fig["data"][0]["source"].split(",", 1)[1])))
    assert decoded.size == (8, 6)


def test_png_data_uri_round_trips():
    img = Image.new("L", (3, 2), 200)
    uri = png_data_uri(img)
    assert uri.startswith("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).getpixel((0, 0)) == 200


def comparison(summaries, **kwargs) -> dict:
    """What the comparison SVG draws: {"points": [(run, metric, value, std)], "ranges", "differences", "titles"}."""
    import xml.etree.ElementTree as ET

    svg = ET.fromstring(run_comparison_svg(summaries, **kwargs))
    tag = "{http://www.w3.org/2000/svg}"
    out = {"points": [], "ranges": {}, "differences": {}, "titles": [], "legend": []}
    for panel in svg.iter(f"{tag}g"):
        if panel.get("class") == "rl-panel":
            metric = panel.get("data-metric")
            out["ranges"][metric] = [float(x) for x in panel.get("data-range").split(",")]
            if panel.get("data-difference") is not None:
                out["differences"][metric] = float(panel.get("data-difference"))
            out["titles"].append(panel.find(f"{tag}text").text)
            out["points"] += [(p.get("data-run"), metric, float(p.get("data-value")), float(p.get("data-std")))
                              for p in panel.iter(f"{tag}g") if p.get("class") == "rl-point"]
        elif panel.get("class") == "rl-legend":
            out["legend"].append(panel.find(f"{tag}text").text)
    out["title"] = next(t.text for t in svg.iter(f"{tag}text") if t.get("class") == "rl-title")
    return out


def test_run_comparison_holds_each_runs_numbers_one_panel_per_metric():
    drawn = comparison({"A": {"R@1": 0.5, "mAP@R": 0.2}, "B": {"R@1": 0.6, "mAP@R": 0.3, "kind": 1}})
    assert drawn["points"] == [("A", "R@1", 0.5, 0.0), ("B", "R@1", 0.6, 0.0), ("A", "mAP@R", 0.2, 0.0),
                               ("B", "mAP@R", 0.3, 0.0)]
    assert drawn["legend"] == ["A", "B"]  # one legend entry per run


def test_run_comparison_zooms_to_the_values_and_shows_the_difference():
    # The case: 0.673 against 0.646 looked identical on a fixed 0-1.1 axis.
    runs = {"A · roadmap": {"R@1": 0.80, "mAP@R": 0.673, "decomposability_gap": 0.012},
            "B · smooth_ap": {"R@1": 0.81, "mAP@R": 0.646, "decomposability_gap": -0.009}}
    drawn = comparison(runs)
    for metric, (a, b) in {m: (runs["A · roadmap"][m], runs["B · smooth_ap"][m]) for m in drawn["ranges"]}.items():
        lo, hi = drawn["ranges"][metric]
        assert lo < min(a, b) and max(a, b) < hi, metric  # both values inside their panel
        assert abs(b - a) >= (hi - lo) / 3, metric  # and their difference is a third of it or more
        assert drawn["differences"][metric] == pytest.approx(b - a)
    assert drawn["ranges"]["decomposability_gap"][0] < -0.009  # a negative gap is not cut at 0
    titles = drawn["titles"]
    assert "mAP@R: B − A = -0.027" in titles and "R@1: B − A = +0.010" in titles
    # Issue 36, D-9: a display name, not the raw key, and enough digits (+0.012 read "+0" when cut).
    assert "decomp. gap: B − A = -0.021" in titles and not any("decomposability_gap" in t for t in titles)
    assert all(len(t) <= 28 for t in titles)  # fits a quarter of the chart at 1280 px (13 px font)
    assert len(drawn["title"]) <= 50  # the figure's title too: the note is a caption


def test_a_difference_keeps_its_digits():
    assert [signed(v) for v in (0.012, -0.1, 0.0, 3.2e-4, -1e-5)] == ["+0.012", "-0.100", "+0.000", "+3.2e-04",
                                                                      "-1.0e-05"]


def test_run_comparison_error_bars_are_the_seed_spread_it_is_given():
    spread = {"single": {"mAP@R": 0.013}, "paired": {"mAP@R": 0.008}, "settings": 9, "seeds": 3, "steps": [300],
              "batch_size": [128], "source": "results/methods.json"}
    drawn = comparison({"A": {"R@1": 0.8, "mAP@R": 0.67}, "B": {"R@1": 0.8, "mAP@R": 0.65}}, spread=spread)
    bars = {(run, metric): std for run, metric, _, std in drawn["points"]}
    assert bars[("A", "mAP@R")] == 0.013
    assert bars[("A", "R@1")] == 0.0  # no spread known for R@1: no bar
    svg = run_comparison_svg({"A": {"R@1": 0.8, "mAP@R": 0.67}, "B": {"R@1": 0.8, "mAP@R": 0.65}}, spread=spread)
    assert svg.count("<path") == 2  # the error bars: mAP@R's, one per run
    lo, hi = drawn["ranges"]["mAP@R"]
    assert lo < 0.65 - 0.013 and 0.67 + 0.013 < hi
    note = spread_note(spread)
    assert "mAP@R by 1.3 points" in note and "by 0.8 points" in note and "results/methods.json" in note
    assert spread_note({}) == ""
    # Issue 36, D-10: why v1's spread (short runs) is the yardstick of a dashboard run; none for v2's.
    assert "Why protocol v1's short runs" in note and "dashboard run is as short" in note
    assert "Why" not in spread_note(dict(spread, source="results/v2/methods.json"))
    assert "error bars: ±1 seed-to-seed std" in comparison_note(spread) and "error" not in comparison_note({})


def test_run_comparison_points_are_drawn_higher_for_higher_values_inside_their_panel():
    import xml.etree.ElementTree as ET

    tag = "{http://www.w3.org/2000/svg}"
    runs = {"A <x>": {"R@1": 0.62, "mAP@R": 0.40}, "B": {"R@1": 0.60, "mAP@R": 0.45}}
    svg = run_comparison_svg(runs, spread={"single": {"R@1": 0.01}})
    assert "<x>" not in svg  # a label is escaped
    for panel in ET.fromstring(svg).iter(f"{tag}g"):
        if panel.get("class") != "rl-panel":
            continue
        axis = next(line for line in panel.iter(f"{tag}line") if line.get("x1") == line.get("x2"))
        top, bottom = float(axis.get("y1")), float(axis.get("y2"))
        points = [(float(p.get("data-value")), float(p.find(f"{tag}circle").get("cy")))
                  for p in panel.iter(f"{tag}g") if p.get("class") == "rl-point"]
        assert all(top <= y <= bottom for _, y in points)
        (a, ya), (b, yb) = points
        assert (a > b) == (ya < yb), panel.get("data-metric")
