"""HAPPIER vs SmoothAP trained on the glyphs' two label levels (SupRank Sec. V, VII-C, Tab. IX, Fig. 9).

Glyph labels are (glyph, script): a query's relevant items are its glyph in other fonts (level
2), then the other glyphs of its script or symbol group (level 1); the rest are negatives.

* :func:`hierarchical_study`: SmoothAP (fine labels only) and HAPPIER (Eq. 22: Sup-H-AP +
  L_DG*, both levels; the Trainer gives L_DG* one proxy per training class) from the same seed
  and the same hierarchical batches; test R@1, mAP@R,
  the AP at each level (Eq. 34), H-AP, NDCG, ASI (:func:`plot_level_metrics`).
* :func:`class_means`: SupRank Fig. 9 plots a t-SNE of each fine class's mean embedding,
  coloured by the coarse label; :func:`lab.viz.retrieval.same_group_neighbours` measures how
  much the means of one script sit together in the embedding space itself (a t-SNE map is
  only a picture of it).
* :func:`class_mean_map` / :func:`plot_class_mean_maps`: Fig. 9a / 9b side by side.

Runs go through :mod:`lab.viz.training` (cached, fast mode shrinks them).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from plotly.subplots import make_subplots
from torch import Tensor

from . import fast_mode
from .retrieval import chance_neighbours, same_group_neighbours, tsne_2d
from .style import CATEGORIES, NEUTRAL, TEMPLATE, floats
from .training import HIERARCHICAL, plot_metric_bars, train_and_evaluate, trained_model

HIERARCHICAL_LOSSES = ("smooth_ap", "happier")
LEVEL_METRICS = ("R@1", "mAP@R", *HIERARCHICAL)
# FastAP's hierarchical sampler for both losses (SupRank Sec. VII-A, SOP): each batch holds two
# scripts, so every query has same-script positives in its batch. In fast mode 120 classes x 4
# images: enough scripts with >= batch_size / (2m) = 4 classes to fill half-batches.
FAST_HIERARCHY = dict(sampler="hierarchical", dataset_kwargs={"num_classes": 120, "instances_per_class": 4})
FULL_HIERARCHY = dict(sampler="hierarchical")


def hierarchical_overrides(fast: Optional[bool] = None) -> dict[str, Any]:
    """TrainConfig fields that differ from :func:`lab.viz.training.run_settings` in these runs."""
    fast = fast_mode() if fast is None else fast
    return dict(FAST_HIERARCHY if fast else FULL_HIERARCHY)


def hierarchical_model(loss: str, fast: Optional[bool] = None):
    """The trained :class:`lab.train.Trainer` of one run of the study (cached)."""
    return trained_model(loss, fast=fast, **hierarchical_overrides(fast))


def hierarchical_study(losses: Sequence[str] = HIERARCHICAL_LOSSES, fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per loss, same seed and batches; rows as :func:`lab.viz.training.train_and_evaluate`
    (R@k and mAP@R on glyphs, AP@glyph, AP@script, H-AP, NDCG, ASI)."""
    return [train_and_evaluate(loss, fast=fast, **hierarchical_overrides(fast)) for loss in losses]


def plot_level_metrics(rows: list[dict[str, Any]]) -> go.Figure:
    """Fine-level (R@1, mAP@R, AP@glyph) and coarse / hierarchical metrics of each run, grouped."""
    steps = rows[0]["steps"] if rows else 0
    return plot_metric_bars(rows, LEVEL_METRICS, f"Two-level glyph labels, {steps} steps per loss: test metrics by level",
                            width=780)


def class_means(embeddings: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Mean of the L2-normalised embeddings of each fine class (SupRank Fig. 9 plots these).

    embeddings (N, D), labels (N,) or (N, L), finest level first. Returns (means (C, D), class
    labels (C, L)): classes in increasing fine label, each with its labels row (a class has one
    coarse label; the first item's row is kept).
    """
    labels = labels.view(len(labels), -1)
    classes, inverse = torch.unique(labels[:, 0], return_inverse=True)
    e = F.normalize(embeddings.detach().double(), dim=1)
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
    return {"points": points, "coarse": coarse, "num_classes": len(means),
            "embedding_agreement": same_group_neighbours(means, coarse, 5, "cosine"),
            "map_agreement": same_group_neighbours(points, coarse, 5, "euclidean"),
            "chance": chance_neighbours(coarse)}


def plot_class_mean_maps(maps: dict[str, dict[str, Any]], group_names: Optional[dict[int, str]] = None,
                         max_groups: int = 10) -> go.Figure:
    """One panel per model (SupRank Fig. 9a Smooth-AP, 9b HAPPIER): each dot a class mean,
    coloured by its coarse label. The ``max_groups`` largest groups (over all panels) get a
    colour, the same in every panel; the others are grey."""
    names = group_names or {}
    first = next(iter(maps.values()))
    values, counts = torch.unique(first["coarse"], return_counts=True)
    shown = values[counts.argsort(descending=True, stable=True)][:max_groups].tolist()
    fig = make_subplots(rows=1, cols=len(maps), horizontal_spacing=0.06,
                        subplot_titles=[f"{name}: same-script 5-NN {m['embedding_agreement']:.2f} "
                                        f"(chance {m['chance']:.2f})" for name, m in maps.items()])
    for col, m in enumerate(maps.values(), start=1):
        points, coarse = m["points"], m["coarse"]
        rest = ~torch.isin(coarse, torch.tensor(shown, dtype=coarse.dtype))
        fig.add_trace(go.Scatter(x=floats(points[rest, 0]), y=floats(points[rest, 1]), mode="markers",
                                 name="other groups", showlegend=col == 1,
                                 marker=dict(size=4, color=NEUTRAL, opacity=0.3)), row=1, col=col)
        for i, g in enumerate(shown):
            sel = coarse == g
            fig.add_trace(go.Scatter(x=floats(points[sel, 0]), y=floats(points[sel, 1]), mode="markers",
                                     name=names.get(int(g), str(g)), showlegend=col == 1,
                                     marker=dict(size=5, color=CATEGORIES[i], opacity=0.85)), row=1, col=col)
        fig.update_xaxes(showticklabels=False, title_text="t-SNE 1", row=1, col=col)
        fig.update_yaxes(showticklabels=False, title_text="t-SNE 2" if col == 1 else "", row=1, col=col)
    fig.update_layout(template=TEMPLATE, height=520, width=460 * len(maps) + 40, margin=dict(l=40, r=20, t=80, b=130),
                      legend=dict(orientation="h", y=-0.08),
                      title=f"t-SNE of the test class means, coloured by script ({first['num_classes']} classes)")
    return fig
