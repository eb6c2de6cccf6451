"""The "Lada #2" example of SupRank (Fig. 4, Appendix B Fig. 13-14) through lab.metrics."""
import pytest

from lab.viz.hierarchical_ap import LADA_RANKINGS, lada_example, lada_relevance, plot_lada


def test_numbers_of_suprank_fig_14():
    ex = lada_example(alpha=1.0)
    top, bottom = ex["top row"], ex["bottom row"]
    assert top["ap"] == pytest.approx(0.45) and bottom["ap"] == pytest.approx(0.45)  # AP: same for both
    assert round(top["h_ap"], 2) == 0.78 and round(bottom["h_ap"], 2) == 0.67  # H-AP: the milder error wins
    assert top["h_rank_plus"][1] == pytest.approx(5 / 3) and bottom["h_rank_plus"][1] == pytest.approx(4 / 3)  # Fig. 4


def test_relevances_of_appendix_b():
    assert lada_relevance([3, 2, 1, 0]) == pytest.approx([1, 2 / 3, 1 / 3, 0])


def test_alpha_limits():
    far = lada_example(alpha=40.0)  # only "Lada #2" stays relevant: H-AP -> AP
    assert far["top row"]["h_ap"] == pytest.approx(far["top row"]["ap"], abs=1e-6)
    flat = lada_example(alpha=0.0)  # every car as relevant as the query's model: the two rows tie
    assert flat["top row"]["h_ap"] == pytest.approx(flat["bottom row"]["h_ap"])


def test_figure_shows_each_rankings_h_rank_plus():
    fig = plot_lada()
    ex = lada_example()
    for trace, (name, levels) in zip(fig.data, LADA_RANKINGS.items()):
        assert trace.name == name and list(trace.customdata) == pytest.approx(ex[name]["h_rank_plus"])
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "H-rank⁺ = 5/3" in texts and "H-rank⁺ = 4/3" in texts and "H-AP = 0.78" in texts and "H-AP = 0.67" in texts


def test_h_ap_is_the_area_under_the_hierarchical_pr_curve():
    from lab.viz.hierarchical_ap import hierarchical_pr

    for alpha in (0.5, 1.0, 3.0):
        ex = lada_example(alpha)
        for name, levels in LADA_RANKINGS.items():
            pr = hierarchical_pr(levels, alpha)
            steps = [r - p for r, p in zip(pr["h_recall"], [0.0] + pr["h_recall"][:-1])]
            area = sum(s * p for s, p in zip(steps, pr["h_precision"]))  # SupRank Eq. 32
            assert area == pytest.approx(ex[name]["h_ap"])
