"""Retrieval grid, PCA and t-SNE maps, neighbour agreement, the retrieval browser's sliders (notebook 04)."""
import itertools

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from lab.viz.controls import slider_points
from lab.viz.retrieval_views import (NEGATIVE, POSITIVE, QUERY, RETRIEVAL_SLIDERS, chance_neighbours,
                                     class_mean_neighbours, class_means, class_tsne, coarse_neighbours, leading_classes,
                                     plot_embedding_2d, plot_retrieval, project_2d, retrieval_browser, retrieve,
                                     same_group_neighbours, tsne_2d)
from lab.viz.style import CATEGORIES, CATEGORY_MARKERS, NEUTRAL


def data(n=60, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.stack([torch.arange(n) // 4, torch.arange(n) // 20], 1)
    return torch.randn(n, d, generator=g), labels, [torch.rand(1, 12, 12, generator=g) for _ in range(n)]


def test_retrieve_is_brute_force_top_k_without_the_query():
    emb, labels, _ = data()
    queries = [0, 5, 59]
    found = retrieve(emb, labels, queries, k=5)
    e = F.normalize(emb, dim=1)
    for q, neighbours, scores, relevant in zip(queries, found["neighbours"], found["scores"], found["relevant"]):
        sims = e @ e[q]
        sims[q] = -2
        assert neighbours == sims.argsort(descending=True)[:5].tolist()
        assert scores == pytest.approx(sims[neighbours].tolist(), abs=1e-6)
        assert relevant == [bool(labels[n, 0] == labels[q, 0]) for n in neighbours]


def test_grid_frames_say_relevant_or_not():
    emb, labels, images = data()
    emb[1] = emb[0] + 1e-3  # item 1 (same class as 0) becomes 0's nearest neighbour
    found = retrieve(emb, labels, [0], k=3)
    fig = plot_retrieval(images, [0], found)
    colors = [ax.spines["left"].get_edgecolor() for ax in fig.axes]
    from matplotlib.colors import to_rgba
    assert colors[0] == to_rgba(QUERY) and colors[1] == to_rgba(POSITIVE)
    assert colors[1:] == [to_rgba(POSITIVE if r else NEGATIVE) for r in found["relevant"][0]]


def test_pca_is_orthogonal_and_ordered():
    emb, labels, _ = data(d=16)
    p = project_2d(emb)
    assert p.shape == (60, 2)
    assert abs(float(p[:, 0] @ p[:, 1])) < 1e-9  # uncorrelated components
    assert p[:, 0].var() >= p[:, 1].var()
    e = F.normalize(emb.double(), dim=1)
    top = torch.linalg.svdvals(e - e.mean(0))[0]
    assert float(p[:, 0].norm()) == pytest.approx(float(top))
    fig = plot_embedding_2d(p, labels[:, 1], {0: "a", 1: "b", 2: "c"}, max_groups=2)
    assert sum(len(t.x) for t in fig.data) == 60 and fig.data[0].name == "other groups"


@pytest.mark.parametrize("kwargs", list(slider_points(RETRIEVAL_SLIDERS)))
def test_browser_sliders_across_their_range(kwargs):
    emb, labels, images = data()
    fig = retrieval_browser(emb, labels, images, [str(i) for i in range(60)])(**kwargs)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 4 * (kwargs["k"] + 1)  # 4 queries, clamped to the data


def test_leading_classes_takes_whole_first_classes():
    labels = torch.tensor([[5, 0], [5, 0], [2, 1], [9, 1], [2, 1], [9, 1], [7, 0]])
    assert leading_classes(labels, 4) == [0, 1, 2, 4]  # classes 5 and 2 (first seen), all their items
    assert leading_classes(labels, 5) == [0, 1, 2, 4]  # class 9 would make 6
    assert leading_classes(labels, 1) == [0, 1]  # at least one class
    assert leading_classes(labels[:, 0], 100) == list(range(7))


def test_highlighted_groups_get_their_colours_in_order():
    emb, labels, _ = data()
    p = project_2d(emb)
    fine = labels[:, 0]  # 15 classes of 4
    fig = plot_embedding_2d(p, fine, {3: "three"}, highlight=[7, 3], axis_title="t-SNE")
    assert [t.name for t in fig.data] == ["other groups", "7", "three"]
    assert fig.data[0].marker.color == NEUTRAL and len(fig.data[0].x) == 60 - 8
    assert list(fig.data[1].x) == p[fine == 7, 0].tolist() and list(fig.data[2].y) == p[fine == 3, 1].tolist()
    assert fig.layout.xaxis.title.text == "t-SNE 1" and fig.layout.legend.x > 1  # legend right of the plot
    many = plot_embedding_2d(p, fine, highlight=list(range(12)))
    assert [t.marker.color for t in many.data[1:]] == CATEGORIES[:12]  # the 20-colour palette, in order
    assert [t.marker.symbol for t in many.data[1:]] == CATEGORY_MARKERS[:12]  # a shape per block of colours
    assert len({(t.marker.color, t.marker.symbol) for t in many.data[1:]}) == 12
    with pytest.raises(ValueError, match="at most 20"):
        plot_embedding_2d(p, torch.arange(60), highlight=list(range(21)))


def test_largest_groups_by_default_ties_in_label_order():
    p = torch.zeros(7, 2)
    groups = torch.tensor([4, 4, 1, 1, 1, 2, 2])
    fig = plot_embedding_2d(p, groups, max_groups=2)
    assert [t.name for t in fig.data] == ["other groups", "1", "2"]  # 1 is largest; 2 and 4 tie: 2 first



def test_the_grey_points_are_named_as_what_they_are():
    # Issue 36, C-6: notebook 04's class t-SNE called its grey points "other groups"; they are classes.
    fig = plot_embedding_2d(torch.zeros(7, 2), torch.tensor([4, 4, 1, 1, 1, 2, 2]), highlight=[1],
                            rest_name="other classes")
    assert [t.name for t in fig.data] == ["other classes", "1"]


def test_notebook_04_names_the_grey_points_of_its_class_map_other_classes():
    source = (Path(__file__).resolve().parents[1] / "notebooks" / "04_train_retrieve_visualise.py").read_text()
    call = source[source.index('plot_embedding_2d(tsne["points"], tsne["fine"]'):].split("\n\n", 1)[0]
    assert 'rest_name="other classes"' in call


def test_tsne_is_seeded_and_keeps_clusters():
    g = torch.Generator().manual_seed(3)
    centres = torch.randn(4, 16, generator=g) * 5
    groups = torch.arange(40) % 4
    emb = centres[groups] + 0.1 * torch.randn(40, 16, generator=g)
    a, b = tsne_2d(emb, seed=0), tsne_2d(emb, seed=0)
    assert a.shape == (40, 2) and torch.equal(a, b)
    assert same_group_neighbours(a, groups, 5, "euclidean") == 1.0  # tight clusters stay clusters


def test_class_tsne_maps_the_first_classes():
    emb, labels, _ = data(n=80, d=8)  # 20 classes of 4; coarse = id // 20
    names = {c: f"x U+{c:04X} SOME LONG NAME" for c in range(20)}
    m = class_tsne(emb, labels, names, max_items=40, num_coloured=3)
    assert m["index"] == list(range(40)) and m["points"].shape == (40, 2)
    assert m["fine"].tolist() == labels[:40, 0].tolist() and m["coarse"].tolist() == labels[:40, 1].tolist()
    assert m["coloured"] == [0, 1, 2] and m["names"] == {0: "x U+0000", 1: "x U+0001", 2: "x U+0002"}
    assert m["chance"] == pytest.approx(3 / 39)
    assert m["map_agreement"] == pytest.approx(same_group_neighbours(m["points"], m["fine"], 5, "euclidean"))
    assert m["embedding_agreement"] == pytest.approx(same_group_neighbours(emb[:40], labels[:40, 0], 5))


def brute_agreement(points, groups, k, metric):
    total = 0.0
    for i in range(len(points)):
        others = [j for j in range(len(points)) if j != i]

        def distance(j):
            if metric == "cosine":
                return -float(F.cosine_similarity(points[i], points[j], dim=0))
            return float((points[i] - points[j]).norm())

        nearest = sorted(others, key=distance)[:k]
        total += sum(int(groups[j] == groups[i]) for j in nearest) / k
    return total / len(points)


@pytest.mark.parametrize("k, metric", list(itertools.product((1, 3), ("cosine", "euclidean"))))
def test_neighbour_agreement_matches_brute_force(k, metric):
    g = torch.Generator().manual_seed(1)
    points, groups = torch.randn(15, 3, generator=g, dtype=torch.float64), torch.arange(15) % 4
    assert same_group_neighbours(points, groups, k, metric) == pytest.approx(brute_agreement(points, groups, k, metric))


def test_agreement_is_one_for_separate_clusters_and_chance_on_average():
    centres = torch.tensor([[10.0, 0.0], [0.0, 10.0], [-10.0, -10.0]])
    groups = torch.arange(30) % 3
    g = torch.Generator().manual_seed(2)
    clustered = centres[groups] + 0.1 * torch.randn(30, 2, generator=g)
    assert same_group_neighbours(clustered, groups, 5, "euclidean") == 1.0
    assert chance_neighbours(groups) == pytest.approx(9 / 29)
    shuffled = [same_group_neighbours(torch.randn(30, 2, generator=g), groups, 5, "euclidean") for _ in range(200)]
    assert sum(shuffled) / len(shuffled) == pytest.approx(9 / 29, abs=0.02)


def brute_coarse(points, labels, k):
    """Plain loops: each item's k nearest others (cosine), split into same class / other class."""
    same, own, other, other_same, expected = 0, 0, 0, 0, 0.0
    n = len(points)
    for i in range(n):
        others = sorted((j for j in range(n) if j != i),
                        key=lambda j: -float(F.cosine_similarity(points[i], points[j], dim=0)))
        rest = [j for j in range(n) if labels[j, 0] != labels[i, 0]]
        p = sum(int(labels[j, 1] == labels[i, 1]) for j in rest) / len(rest)  # a random other-class item
        for j in others[:k]:
            same += int(labels[j, 1] == labels[i, 1])
            if labels[j, 0] == labels[i, 0]:
                own += 1
            else:
                other += 1
                other_same += int(labels[j, 1] == labels[i, 1])
                expected += p
    return same / (n * k), own / (n * k), other_same / other, expected / other


def test_coarse_neighbours_split_the_own_class_off_as_plain_loops_do():
    g = torch.Generator().manual_seed(3)
    labels = torch.stack([torch.arange(24) // 3, torch.arange(24) // 9], 1)  # 8 classes of 3, coarse groups 9/9/6
    points = torch.randn(24, 4, generator=g, dtype=torch.float64) + 2.0 * labels[:, 1:].double()
    got = coarse_neighbours(points, labels, k=4)
    same, own, other_same, expected = brute_coarse(points, labels, 4)
    assert got["same_coarse"] == pytest.approx(same) and got["same_class"] == pytest.approx(own)
    assert got["other_class_same_coarse"] == pytest.approx(other_same)
    assert got["other_class_chance"] == pytest.approx(expected)
    assert got["chance"] == pytest.approx(chance_neighbours(labels[:, 1]))


def test_clustered_classes_alone_inflate_the_raw_number_not_the_others():
    # Classes in tight clusters placed at random: the raw same-coarse fraction is high (own class),
    # the other-class one stays at its chance on average, and so do the class means.
    g = torch.Generator().manual_seed(4)
    labels = torch.stack([torch.arange(400) // 4, torch.arange(400) % 40 // 4 % 5], 1)  # 100 classes of 4, 5 groups
    raw, other, chance, mean_agree, mean_chance = [], [], [], [], []
    for _ in range(20):
        centres = torch.randn(100, 16, generator=g, dtype=torch.float64)
        points = centres[labels[:, 0]] + 0.01 * torch.randn(400, 16, generator=g, dtype=torch.float64)
        r = coarse_neighbours(points, labels, k=5)
        m = class_mean_neighbours(points, labels, k=5)
        raw.append(r["same_coarse"])
        other.append(r["other_class_same_coarse"])
        chance.append(r["other_class_chance"])
        mean_agree.append(m["same_coarse"])
        mean_chance.append(m["chance"])
    assert min(raw) >= 0.6 > 2 * sum(other) / 20  # 3 of 5 neighbours are the own class, all of its group
    assert sum(other) / 20 == pytest.approx(sum(chance) / 20, abs=0.03)
    assert sum(mean_agree) / 20 == pytest.approx(mean_chance[0], abs=0.03)


def test_class_mean_neighbours_is_the_agreement_of_the_class_means():
    points, labels, _ = data()
    means, rows = class_means(points, labels)
    got = class_mean_neighbours(points, labels, k=3)
    assert got["num_classes"] == len(means) == 15
    assert got["same_coarse"] == pytest.approx(brute_agreement(means, rows[:, 1], 3, "cosine"))
    assert got["chance"] == pytest.approx(chance_neighbours(rows[:, 1]))


def test_agreement_rejects_bad_arguments():
    with pytest.raises(ValueError, match="k must be"):
        same_group_neighbours(torch.zeros(3, 2), torch.zeros(3), k=3)
    with pytest.raises(ValueError, match="metric"):
        same_group_neighbours(torch.randn(4, 2), torch.zeros(4), k=1, metric="manhattan")


