"""HAPPIER vs SmoothAP helpers (notebook 05): class means, neighbour agreement, the figures."""
import pytest
import torch
import torch.nn.functional as F

from lab.experiments import hierarchical_runs as ht
from lab.viz import comparisons, retrieval_views
from lab.viz.retrieval_views import same_group_neighbours


def toy(seed=0, classes=12, per_class=5, dim=6):
    g = torch.Generator().manual_seed(seed)
    fine = torch.arange(classes).repeat_interleave(per_class)
    labels = torch.stack([fine, fine % 3], 1)  # 3 coarse groups of 4 classes
    perm = torch.randperm(len(fine), generator=g)  # classes interleaved, not in blocks
    return torch.randn(len(fine), dim, generator=g)[perm], labels[perm]


def test_class_means_are_plain_loop_means_of_normalised_embeddings():
    emb, labels = toy()
    means, rows = retrieval_views.class_means(emb, labels)
    e = F.normalize(emb.double(), dim=1)
    assert means.shape == (12, 6) and rows.shape == (12, 2)
    for c in range(12):
        members = [i for i in range(len(labels)) if int(labels[i, 0]) == c]
        assert torch.allclose(means[c], e[members].mean(0))
        assert rows[c].tolist() == [c, c % 3]


def test_class_means_accept_flat_labels_and_keep_label_order():
    emb = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    means, rows = retrieval_views.class_means(emb, torch.tensor([7, 2, 7]))
    assert rows.view(-1).tolist() == [2, 7]
    assert means.tolist() == [[0.0, 1.0], [1.0, 0.0]]  # normalised first: [1, 0] and [1, 0] for class 7


def test_class_mean_map_and_its_figure():
    emb, labels = toy(classes=24, per_class=3)
    maps = {name: retrieval_views.class_mean_map(emb * scale, labels) for name, scale in (("a", 1.0), ("b", 2.0))}
    m = maps["a"]
    assert m["points"].shape == (24, 2) and m["num_classes"] == 24
    assert m["coarse"].tolist() == [c % 3 for c in range(24)]
    means, _ = retrieval_views.class_means(emb, labels)
    assert m["embedding_agreement"] == pytest.approx(same_group_neighbours(means, m["coarse"], 5))
    assert m["chance"] == pytest.approx(7 / 23)
    assert torch.equal(maps["b"]["points"], m["points"])  # t-SNE of normalised means: scale-free, seeded
    fig = retrieval_views.plot_class_mean_maps(maps, {0: "Latin", 1: "Greek", 2: "Arrows"}, max_groups=2)
    by_panel = {}
    for t in fig.data:
        by_panel.setdefault(t.xaxis, []).append(t)
    assert len(by_panel) == 2
    for traces in by_panel.values():
        assert sum(len(t.x) for t in traces) == 24
        assert [t.name for t in traces] == ["other groups", "Latin", "Greek"]  # equal sizes: label order
        latin = traces[1]
        assert sorted(zip(latin.x, latin.y)) == sorted(zip(m["points"][0::3, 0].tolist(),
                                                           m["points"][0::3, 1].tolist()))
    assert [t.showlegend for t in fig.data] == [True] * 3 + [False] * 3  # one legend for both panels
    assert f"(chance {7 / 23:.2f})" in fig.layout.annotations[0].text  # chance level in the panel title


def test_level_metrics_figure_draws_the_rows():
    rows = [{"loss": loss, "steps": 5, "seed": 0, **{m: v + i / 10 for i, m in enumerate(ht.LEVEL_METRICS)}}
            for loss, v in (("smooth_ap", 0.1), ("happier", 0.2))]
    fig = comparisons.plot_level_metrics(rows)
    assert [a.text for a in fig.layout.annotations] == list(ht.LEVEL_METRICS)  # one panel per metric
    happier = [t for t in fig.data if t.name == "happier"]
    assert len(happier) == len(ht.LEVEL_METRICS) and [t.showlegend for t in happier].count(True) == 1
    assert [t.y[0] for t in happier] == pytest.approx([0.2 + i / 10 for i in range(len(ht.LEVEL_METRICS))])


def test_tab_ix_claims_compare_signs_with_the_paper():
    metrics = ("R@1", "AP@glyph", "AP@script", "H-AP")
    smooth = dict(zip(metrics, (0.90, 0.78, 0.25, 0.59)))
    happier = dict(zip(metrics, (0.87, 0.72, 0.30, 0.566)))
    claims = {c["metric"]: c for c in ht.tab_ix_claims(smooth, happier)}
    assert claims["AP@script"]["paper"] == pytest.approx(58.4 - 13.4)  # SupRank Tab. IX, SOP coarse AP
    assert claims["AP@script"]["measured"] == pytest.approx(5.0) and claims["AP@script"]["holds"]
    assert claims["AP@glyph"]["paper"] == pytest.approx(60.4 - 61.7) and claims["AP@glyph"]["holds"]  # both lower
    assert claims["H-AP"]["measured"] == pytest.approx(-2.4) and not claims["H-AP"]["holds"]  # paper: +16.4
    assert claims["R@1"]["holds"]  # -3.0 here, -0.3 in the paper


def test_both_losses_use_the_hierarchical_sampler():
    samplers = [ht.hierarchical_overrides(fast=fast)["sampler"] for fast in (True, False)]
    assert samplers == ["hierarchical", "hierarchical"]
    assert ht.hierarchical_overrides(fast=True)["dataset_kwargs"]["num_classes"] == 120


def test_a_left_out_warning_names_the_scripts_and_says_which_batches():
    # Issue 36, C-3: notebook 05 showed "[6]" for Currency, and a second warning nobody explained.
    from lab.data.samplers import LeftOutCategories

    labels = torch.tensor([[0, 0], [1, 0], [2, 1], [3, 2], [3, 2]])  # script 0: 2 classes, 1 and 2: 1 each
    train = type("Split", (), {"coarse_names": {0: "Latin", 1: "Currency", 2: "Greek"}, "labels": labels,
                               "__len__": lambda self: 5})()
    text = ht.named_left_out(LeftOutCategories([1, 2], [1, 1], 2, 5), train)
    assert text.startswith("The hierarchical sampler leaves Currency (1 class), Greek (1 class) out of the "
                           "training batches")
    held = ht.named_left_out(LeftOutCategories([0], [2], 3, 2000), train)
    assert "Latin (2 classes)" in held and "held-out gap's batches over the 2,000-image evaluation subset" in held


@pytest.mark.slow
def test_the_study_warns_once_per_left_out_set_by_name(recwarn):
    from lab.experiments import runs as training

    training._run.cache_clear()
    training._trained.cache_clear()  # the warnings come with a run's first training
    ht.hierarchical_study(fast=True)
    texts = [str(w.message) for w in recwarn if "hierarchical sampler" in str(w.message)]
    assert len(texts) == 2 and "Currency" in texts[0] and "training batches" in texts[0], texts
    assert "held-out gap" in texts[1]
    assert not [w for w in recwarn if "coarse categories" in str(w.message)]  # no bare label ids left


@pytest.mark.slow
def test_one_tiny_hierarchical_run_reports_every_level():
    from lab.experiments import runs as training

    kw = ht.hierarchical_overrides(fast=True)
    row = training.train_and_evaluate("happier", fast=True, steps=1, **kw)
    assert row["loss"] == "happier" and row["steps"] == 1
    for key in ht.LEVEL_METRICS:
        assert 0 <= row[key] <= 1
    trainer = training.trained_model("happier", fast=True, steps=1, **kw)
    proxies = trainer.loss_fn.decomposability_loss.proxies
    assert proxies.shape == (120, 64)  # one L_DG* proxy per training class
