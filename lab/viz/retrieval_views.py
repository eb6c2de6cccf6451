"""What a trained model retrieves, and where it puts the images (ROADMAP Fig. 6 / supp. Fig. 13-15,
SupRank Fig. 9).

* :func:`retrieve`: the k nearest gallery items of some queries (cosine similarity, the query
  itself excluded), with their relevance (same finest label).
* :func:`plot_retrieval`: a grid, one row per query (purple frame), its neighbours framed
  green (relevant) or red. A matplotlib figure: it shows images.
* :func:`project_2d` (PCA), :func:`tsne_2d` / :func:`plot_embedding_2d`: 2-D maps of the
  embeddings, coloured by a label level (plotly, lists); :func:`leading_classes` picks the
  whole first classes of a split for the slower t-SNE; :func:`same_group_neighbours` (vs
  :func:`chance_neighbours`) says how much a group's points sit together, in either space, and
  :func:`coarse_neighbours` / :func:`class_mean_neighbours` whether a coarse group (a script)
  does beyond its classes.
* :func:`class_means`, :func:`class_mean_map`, :func:`plot_class_mean_maps`: SupRank Fig. 9, a
  t-SNE of each fine class's mean embedding coloured by the coarse label; the neighbour
  agreement of the means in the embedding space itself says what the map only pictures.
"""
from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from typing import Any, Optional, Sequence

import plotly.graph_objects as go
import torch
from matplotlib.figure import Figure
from plotly.subplots import make_subplots
from torch import Tensor

from ..core.env import fast_mode
from ..core.normalize import unit_rows
from .controls import Slider
from .style import (CATEGORIES, CATEGORY_MARKERS, NEGATIVE, NEUTRAL, POSITIVE, TEMPLATE, ShownFigure, floats,
                    responsive)

QUERY = "#9467bd"  # purple, as the papers frame their queries


def retrieve(embeddings: Tensor, labels: Tensor, queries: Sequence[int], k: int = 8) -> dict[str, list]:
    """k nearest neighbours of each query among all other items (cosine similarity).

    embeddings (N, D), labels (N,) or (N, L) (finest level used). Returns lists of length
    len(queries): ``neighbours`` (k indices each, best first), ``scores`` and ``relevant``
    (same finest label as the query).
    """
    if not 1 <= k < len(embeddings):
        raise ValueError(f"k must be in [1, {len(embeddings) - 1}], got {k}")
    fine = labels.view(len(labels), -1)[:, 0]
    e = unit_rows(embeddings.detach(), torch.float32)
    q = torch.as_tensor(list(queries), dtype=torch.long)
    scores = e[q] @ e.T
    scores[torch.arange(len(q)), q] = float("-inf")  # a query does not retrieve itself
    top, idx = scores.topk(k, dim=1)
    return {"neighbours": idx.tolist(), "scores": top.tolist(), "relevant": (fine[idx] == fine[q][:, None]).tolist()}


def plot_retrieval(images: Sequence, queries: Sequence[int], found: dict[str, list],
                   names: Optional[Sequence[str]] = None, title: str = "") -> Figure:
    """Grid: query (purple frame) then its neighbours, green frame = relevant, red = not.

    ``images[i]``: a PIL image or an array / (C, H, W) tensor for item i; ``found`` from
    :func:`retrieve`; ``names[i]`` (optional) captions the query.
    """
    k = len(found["neighbours"][0])
    # Not pyplot's: nothing is left open; a ShownFigure shows as a PNG where a cell returns it.
    fig = ShownFigure(figsize=(1.1 * (k + 1) + 0.8, 1.2 * len(queries) + 0.4), dpi=100)
    axes = fig.subplots(len(queries), k + 1, squeeze=False)
    for row, (q, neighbours, relevant) in enumerate(zip(queries, found["neighbours"], found["relevant"])):
        cells = [(q, QUERY)] + [(n, POSITIVE if r else NEGATIVE) for n, r in zip(neighbours, relevant)]
        for col, (item, color) in enumerate(cells):
            ax = axes[row][col]
            img = images[item]
            if isinstance(img, Tensor):
                img = img.detach().cpu().permute(1, 2, 0).squeeze(-1).numpy()
            ax.imshow(img, cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_edgecolor(color)
                spine.set_linewidth(3)
        if names is not None:
            # STIX has glyphs DejaVu Sans lacks (some arrows, math symbols): a fallback, not a warning.
            axes[row][0].set_ylabel(names[q], fontsize=7, rotation=0, ha="right", va="center",
                                    fontfamily=["DejaVu Sans", "STIXGeneral"])
    for col in range(k + 1):
        axes[0][col].set_title("query" if col == 0 else f"#{col}", fontsize=8)
    fig.suptitle(title or f"Top {k} neighbours (green: same class, red: other)", fontsize=10)
    fig.tight_layout()
    return fig


def project_2d(embeddings: Tensor) -> Tensor:
    """(N, D) -> (N, 2): the two principal components of the L2-normalised embeddings (exact SVD)."""
    e = unit_rows(embeddings.detach(), torch.float64)
    centred = e - e.mean(0)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return centred @ vh[:2].T


class _IterationLines(io.TextIOBase):
    """A stdout for scikit-learn's verbose t-SNE that passes on, as one short line, its iteration
    reports at least ``every`` seconds apart (a map of seconds prints nothing) and drops the rest."""

    def __init__(self, out: Any, total: int, every: float = 2.0) -> None:
        self.out, self.total, self.every = out, total, every
        self.start = self.last = time.perf_counter()
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            found = re.match(r"\[t-SNE\] Iteration (\d+):", line)
            now = time.perf_counter()
            if found and now - self.last >= self.every:
                self.last = now
                self.out.write(f"t-SNE: iteration {found.group(1)} of at most {self.total}, {now - self.start:.0f} s\n")
                self.out.flush()
        return len(text)


def tsne_2d(embeddings: Tensor, seed: int = 0, perplexity: float = 30.0, progress: Optional[bool] = None) -> Tensor:
    """(N, D) -> (N, 2): scikit-learn's Barnes-Hut t-SNE of the L2-normalised embeddings, cosine
    metric, PCA initialisation, seeded (same input and seed -> same map), single-threaded. Slow:
    ~15 s for 2k points, so callers cache it and subsample (a few hundred points in fast mode).
    ``progress`` (default: outside fast mode) prints a line every 2 s or more while it runs: a
    notebook cell over 5 s shows progress (issue 36, N-6); the map is the same either way."""
    from sklearn.manifold import TSNE  # imported here: sklearn is slow to import
    from threadpoolctl import threadpool_limits

    e = unit_rows(embeddings.detach(), torch.float64).numpy()
    if len(e) < 5:
        raise ValueError(f"t-SNE needs at least 5 points, got {len(e)}")
    progress = not fast_mode() if progress is None else progress
    tsne = TSNE(n_components=2, perplexity=min(perplexity, (len(e) - 1) / 3), metric="cosine", init="pca",
                random_state=seed, verbose=2 if progress else 0)
    lines = _IterationLines(sys.stdout, int(getattr(tsne, "max_iter", None) or 1000))
    # One OpenMP thread: on a shared 2-core machine the spinning threads of Barnes-Hut made 120
    # points take 21 s instead of 0.6 s (2,000 points: 46 s vs 15 s). Same map either way.
    with threadpool_limits(limits=1), contextlib.redirect_stdout(lines) if progress else contextlib.nullcontext():
        return torch.from_numpy(tsne.fit_transform(e))


def leading_classes(labels: Tensor, max_items: int) -> list[int]:
    """Indices of every item of the first fine classes (in order of first appearance), as many
    classes as fit in ``max_items`` items (at least one class). labels (N,) or (N, L).

    A fixed, readable subset for slow maps (t-SNE): the first classes of a split, all their items.
    """
    fine = labels.view(len(labels), -1)[:, 0].tolist()
    order = list(dict.fromkeys(fine))  # classes in order of first appearance
    counts = {c: 0 for c in order}
    for c in fine:
        counts[c] += 1
    chosen, total = set(), 0
    for c in order:
        if chosen and total + counts[c] > max_items:
            break
        chosen.add(c)
        total += counts[c]
    return [i for i, c in enumerate(fine) if c in chosen]


def nearest_others(points: Tensor, k: int = 5, metric: str = "cosine") -> Tensor:
    """(C, k) indices of each point's k nearest other points. points (C, d); metric "cosine"
    (embedding space) or "euclidean" (a 2-D map)."""
    if not 1 <= k < len(points):
        raise ValueError(f"k must be in [1, {len(points) - 1}], got {k}")
    p = points.detach().double()
    if metric == "cosine":
        p = unit_rows(p, torch.float64)
        dist = -(p @ p.T)
    elif metric == "euclidean":
        dist = torch.cdist(p, p)
    else:
        raise ValueError(f"metric must be 'cosine' or 'euclidean', got {metric!r}")
    dist.fill_diagonal_(float("inf"))  # a point is not its own neighbour
    return dist.topk(k, dim=1, largest=False).indices


def same_group_neighbours(points: Tensor, groups: Tensor, k: int = 5, metric: str = "cosine") -> float:
    """Mean fraction of each point's k nearest other points that share its group.

    points (C, d), groups (C,). metric "cosine" (embedding space) or "euclidean" (a 2-D map).
    1: groups are separate clusters; :func:`chance_neighbours`: groups placed at random.
    """
    nearest = nearest_others(points, k, metric)
    return float((groups[nearest] == groups[:, None]).double().mean())


def coarse_neighbours(points: Tensor, labels: Tensor, k: int = 5, metric: str = "cosine") -> dict[str, float]:
    """Do the items of one coarse group (a script) sit together beyond their own class? Of each
    item's k nearest other items (points (N, d), labels (N, 2): fine, coarse):

    * ``same_coarse``: the fraction sharing its coarse label (:func:`same_group_neighbours`), with
      ``chance`` (:func:`chance_neighbours`). It counts the item's own class, whose images share
      the coarse label by definition: a model that only clusters classes scores high on it;
    * ``same_class``: the fraction of the same fine class;
    * ``other_class_same_coarse``: of the neighbours of another class, the fraction sharing the
      coarse label (pooled over all such neighbours), with ``other_class_chance``: the same for
      neighbours drawn at random among the other classes' items ((n_coarse - n_class) / (N - n_class)
      for the item, weighted like its other-class neighbours).
    """
    labels = labels.view(len(labels), -1)
    fine, coarse = labels[:, 0], labels[:, -1]
    nearest = nearest_others(points, k, metric)
    same_fine = fine[nearest] == fine[:, None]
    same_coarse = coarse[nearest] == coarse[:, None]
    other = (~same_fine).double()
    _, fine_inv, fine_counts = torch.unique(fine, return_inverse=True, return_counts=True)
    _, coarse_inv, coarse_counts = torch.unique(coarse, return_inverse=True, return_counts=True)
    n_class, n_coarse = fine_counts[fine_inv].double(), coarse_counts[coarse_inv].double()
    at_random = (n_coarse - n_class) / (len(labels) - n_class).clamp(min=1)
    return {"same_coarse": float(same_coarse.double().mean()), "chance": chance_neighbours(coarse),
            "same_class": float(same_fine.double().mean()),
            "other_class_same_coarse": float((same_coarse & ~same_fine).sum() / other.sum().clamp(min=1)),
            "other_class_chance": float((other.sum(1) * at_random).sum() / other.sum().clamp(min=1))}


def class_mean_neighbours(embeddings: Tensor, labels: Tensor, k: int = 5) -> dict[str, float]:
    """Notebook 05's measure (SupRank Fig. 9): the fraction of each class mean's k nearest class
    means (cosine) that share its coarse label (``same_coarse``), with ``chance``, and
    ``num_classes``. One point per class: a class's own images cannot inflate it."""
    means, rows = class_means(embeddings, labels)
    coarse = rows[:, -1]
    return {"same_coarse": same_group_neighbours(means, coarse, min(k, len(means) - 1), "cosine"),
            "chance": chance_neighbours(coarse), "num_classes": len(means)}


def chance_neighbours(groups: Tensor) -> float:
    """Expected :func:`same_group_neighbours` when the points are shuffled: for a point of a group
    of size n, (n - 1) / (C - 1) of the others share its group, whatever k."""
    _, inverse, counts = torch.unique(groups, return_inverse=True, return_counts=True)
    return float(((counts[inverse] - 1).double() / (len(groups) - 1)).mean())


FAST_TSNE_ITEMS, FULL_TSNE_ITEMS = 400, 2000


def class_tsne(embeddings: Tensor, labels: Tensor, class_names: Optional[dict[int, str]] = None,
               max_items: Optional[int] = None, num_coloured: int = 16, seed: int = 0) -> dict[str, Any]:
    """A t-SNE of the first classes of a split (all their items) for a map coloured by class.

    embeddings (N, D), labels (N, L). ``max_items`` (default: 400 in fast mode, 2,000 otherwise)
    bounds the items mapped (:func:`leading_classes`). Returns ``points`` (n, 2), ``index`` (n,
    rows of the input), ``fine`` / ``coarse`` (n,) labels, ``coloured`` (the first
    ``num_coloured`` classes), ``names`` (short names of those: "ա U+0561"), and the 5-NN
    same-class fraction on the map (``map_agreement``), in the embedding space (cosine,
    ``embedding_agreement``) and by chance (``chance``).
    """
    max_items = max_items or (FAST_TSNE_ITEMS if fast_mode() else FULL_TSNE_ITEMS)
    labels = labels.view(len(labels), -1)
    index = leading_classes(labels, max_items)
    fine = labels[index, 0]
    points = tsne_2d(embeddings[index], seed=seed)
    coloured = list(dict.fromkeys(fine.tolist()))[:num_coloured]
    names = {c: " ".join((class_names or {}).get(c, str(c)).split()[:2]) for c in coloured}
    k = min(5, len(index) - 1)
    return {"points": points, "index": index, "fine": fine, "coarse": labels[index, -1], "coloured": coloured,
            "names": names, "map_agreement": same_group_neighbours(points, fine, k, "euclidean"),
            "embedding_agreement": same_group_neighbours(embeddings[index], fine, k, "cosine"),
            "chance": chance_neighbours(fine)}


def plot_embedding_2d(points: Tensor, groups: Tensor, group_names: Optional[dict[int, str]] = None,
                      max_groups: int = len(CATEGORIES), title: str = "PCA of the test embeddings",
                      highlight: Optional[Sequence[int]] = None, axis_title: str = "PC",
                      rest_name: str = "other groups") -> go.Figure:
    """Scatter of (N, 2) points coloured by group (N,) (a class, a coarse label).

    ``highlight``: the groups that get a colour and marker each (``CATEGORIES``,
    ``CATEGORY_MARKERS``), in this order (at most 20); default: the ``max_groups`` largest groups
    (all the glyphs' 20 scripts). Every other point is grey, drawn first (underneath), named
    ``rest_name`` in the legend ("other classes" when the groups are classes).
    ``axis_title``: "PC" (PCA) or "t-SNE", numbered 1 and 2.
    """
    names = group_names or {}
    if highlight is None:
        values, counts = torch.unique(groups, return_counts=True)
        # stable sort: equal-sized groups keep their label order
        highlight = values[counts.argsort(descending=True, stable=True)][:max_groups].tolist()
    highlight = [int(g) for g in highlight]
    if len(highlight) > len(CATEGORIES):
        raise ValueError(f"at most {len(CATEGORIES)} groups can get a colour each, got {len(highlight)}")
    fig = go.Figure()
    rest = ~torch.isin(groups, torch.tensor(highlight, dtype=groups.dtype))
    if rest.any():
        fig.add_trace(go.Scatter(x=floats(points[rest, 0]), y=floats(points[rest, 1]), mode="markers", name=rest_name,
                                 marker=dict(size=5, color=NEUTRAL, opacity=0.3)))
    for i, g in enumerate(highlight):
        sel = groups == g
        fig.add_trace(go.Scatter(x=floats(points[sel, 0]), y=floats(points[sel, 1]), mode="markers",
                                 name=names.get(g, str(g)), marker=dict(size=6, color=CATEGORIES[i], opacity=0.85,
                                                                        symbol=CATEGORY_MARKERS[i])))
    # Legend right of the plot: up to 21 entries, some long (script names, glyph names).
    responsive(fig, 840, template=TEMPLATE, height=500, margin=dict(l=60, r=230, t=70, b=60), title=title,
                      legend=dict(x=1.02, y=1.0, xanchor="left", yanchor="top"),
                      xaxis=dict(title=f"{axis_title} 1"), yaxis=dict(title=f"{axis_title} 2"))
    return fig


RETRIEVAL_SLIDERS = {
    "first_query": Slider(0, 200, 1, 0, integer=True, description="first query"),
    "k": Slider(1, 10, 1, 6, integer=True, description="k neighbours"),
}


def retrieval_browser(embeddings: Tensor, labels: Tensor, images: Sequence, names: Optional[Sequence[str]] = None,
                      num_queries: int = 4):
    """A ``(first_query, k) -> Figure`` callback for the sliders of ``RETRIEVAL_SLIDERS``:
    ``num_queries`` consecutive queries from ``first_query`` (clamped to the data) and their top k."""
    def show(first_query: int = 0, k: int = 6) -> Figure:
        first = max(0, min(int(first_query), len(embeddings) - num_queries))
        queries = list(range(first, first + num_queries))
        return plot_retrieval(images, queries, retrieve(embeddings, labels, queries, int(k)), names)

    return show


def class_means(embeddings: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Mean of the L2-normalised embeddings of each fine class (SupRank Fig. 9 plots these).

    embeddings (N, D), labels (N,) or (N, L), finest level first. Returns (means (C, D), class
    labels (C, L)): classes in increasing fine label, each with its labels row (a class has one
    coarse label; the first item's row is kept).
    """
    labels = labels.view(len(labels), -1)
    classes, inverse = torch.unique(labels[:, 0], return_inverse=True)
    e = unit_rows(embeddings.detach(), torch.float64)
    sums = torch.zeros(len(classes), e.shape[1], dtype=e.dtype).index_add_(0, inverse, e)
    counts = torch.bincount(inverse, minlength=len(classes)).to(e.dtype)
    first = torch.full((len(classes),), len(labels), dtype=torch.long).scatter_reduce(
        0, inverse, torch.arange(len(labels)), reduce="amin")
    return sums / counts[:, None], labels[first]


def class_mean_map(embeddings: Tensor, labels: Tensor, seed: int = 0) -> dict[str, Any]:
    """t-SNE of the class means: points (C, 2), coarse (C,) and the neighbour agreement of the
    means (k = 5) in the embedding space (cosine) and on the map (euclidean), with chance."""
    means, rows = class_means(embeddings, labels)
    coarse = rows[:, 1]
    points = tsne_2d(means, seed=seed)
    space = class_mean_neighbours(embeddings, labels)
    return {"points": points, "coarse": coarse, "num_classes": len(means), "embedding_agreement": space["same_coarse"],
            "map_agreement": same_group_neighbours(points, coarse, 5, "euclidean"), "chance": space["chance"]}


def plot_class_mean_maps(maps: dict[str, dict[str, Any]], group_names: Optional[dict[int, str]] = None,
                         max_groups: int = len(CATEGORIES)) -> go.Figure:
    """One panel per model (SupRank Fig. 9a Smooth-AP, 9b HAPPIER): each dot a class mean,
    coloured by its coarse label. The ``max_groups`` largest groups of the first panel get a
    colour and marker (the same in every panel); the others are grey."""
    names = group_names or {}
    first = next(iter(maps.values()))
    values, counts = torch.unique(first["coarse"], return_counts=True)
    shown = values[counts.argsort(descending=True, stable=True)][:min(max_groups, len(CATEGORIES))].tolist()
    fig = make_subplots(rows=1, cols=len(maps), horizontal_spacing=0.06,
                        subplot_titles=[f"{name}: same-script 5-NN {m['embedding_agreement']:.2f} "
                                        f"(chance {m['chance']:.2f})" for name, m in maps.items()])
    for col, m in enumerate(maps.values(), start=1):
        points, coarse = m["points"], m["coarse"]
        rest = ~torch.isin(coarse, torch.tensor(shown, dtype=coarse.dtype))
        if rest.any():  # every group coloured (up to 20): no grey "other groups"
            fig.add_trace(go.Scatter(x=floats(points[rest, 0]), y=floats(points[rest, 1]), mode="markers",
                                     name="other groups", showlegend=col == 1,
                                     marker=dict(size=4, color=NEUTRAL, opacity=0.3)), row=1, col=col)
        for i, g in enumerate(shown):
            sel = coarse == g
            fig.add_trace(go.Scatter(x=floats(points[sel, 0]), y=floats(points[sel, 1]), mode="markers",
                                     name=names.get(int(g), str(g)), showlegend=col == 1,
                                     marker=dict(size=6, color=CATEGORIES[i], opacity=0.85,
                                                 symbol=CATEGORY_MARKERS[i])), row=1, col=col)
        fig.update_xaxes(showticklabels=False, title_text="t-SNE 1", row=1, col=col)
        fig.update_yaxes(showticklabels=False, title_text="t-SNE 2" if col == 1 else "", row=1, col=col)
    responsive(fig, 460 * len(maps) + 40, template=TEMPLATE, height=520, margin=dict(l=40, r=20, t=80, b=130),
                      legend=dict(orientation="h", y=-0.08),
                      title=f"t-SNE of the test class means, coloured by script ({first['num_classes']} classes)")
    return fig
