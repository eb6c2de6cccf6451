"""What the dashboard shows about the held-out images: embeddings of a fixed subset, a query's
neighbours with graded relevance, similarity samples, per-query AP and 2-D projections.

The subset is the trainer's own evaluation subset (``class_subset``: whole classes, fixed by the
seed), so the pictures and the curves' R@1 / mAP@R speak about the same images.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from PIL import Image
from torch import Tensor

from ..core.normalize import unit_rows
from ..metrics import average_precision
from ..train import class_subset
from ..viz.retrieval_views import project_2d, retrieve

LEVELS = ("class", "coarse", "other")  # same fine class / same coarse class only / neither
MAX_PAIRS = 200_000  # similarity samples kept per kind (positives, negatives) for the histograms


@dataclass(eq=False)
class HeldOut:
    """The held-out subset at one training step: ``items[i]`` is the test-split index of row i.
    Equal only to itself: a snapshot stands for one model at one step (the page caches figures by it)."""

    step: int
    items: list[int]
    embeddings: Tensor  # (N, D) float32, L2-normalised by the model
    labels: Tensor  # (N, L) finest level first

    def __len__(self) -> int:
        return len(self.items)


def snapshot(trainer) -> HeldOut:
    """Embed the trainer's evaluation subset of the test split (eval mode, RNG untouched)."""
    cfg = trainer.config
    items = class_subset(trainer.test_set.labels, cfg.eval_max_items, cfg.seed)
    embeddings, labels = trainer.embed("test", cfg.eval_max_items)
    return HeldOut(trainer.step_count, list(range(len(labels))) if items is None else list(items), embeddings, labels)


def neighbours(h: HeldOut, query: int, k: int) -> dict[str, list]:
    """Top ``k`` of row ``query`` among the other rows: ``rows``, ``scores`` (cosine) and ``levels``
    (``LEVELS``: "coarse" only when the labels have a coarse level)."""
    k = max(1, min(int(k), len(h) - 1))
    found = retrieve(h.embeddings, h.labels, [query], k)
    rows = found["neighbours"][0]
    coarse = h.labels[:, 1] if h.labels.shape[1] > 1 else None
    levels = []
    for row, relevant in zip(rows, found["relevant"][0]):
        if relevant:
            levels.append("class")
        elif coarse is not None and bool(coarse[row] == coarse[query]):
            levels.append("coarse")
        else:
            levels.append("other")
    return {"rows": rows, "scores": found["scores"][0], "levels": levels}


def _scores(h: HeldOut) -> tuple[Tensor, Tensor, Tensor]:
    e = unit_rows(h.embeddings, torch.float32)
    fine = h.labels[:, 0]
    return e @ e.T, fine[:, None] == fine[None, :], ~torch.eye(len(e), dtype=torch.bool)


def pair_similarities(h: HeldOut, max_pairs: int = MAX_PAIRS, seed: int = 0) -> tuple[Tensor, Tensor]:
    """(positive, negative) cosine similarities of all (query, other item) pairs, each kind
    subsampled to ``max_pairs`` at most (fixed generator): what calibration acts on."""
    scores, same, not_self = _scores(h)
    g = torch.Generator().manual_seed(seed)
    out = []
    for keep in (same & not_self, ~same):
        values = scores[keep]
        if len(values) > max_pairs:
            values = values[torch.randperm(len(values), generator=g)[:max_pairs]]
        out.append(values)
    return out[0], out[1]


def per_query_ap(h: HeldOut) -> list[float]:
    """Exact AP of each held-out query against all other items (queries without positive left out)."""
    scores, same, not_self = _scores(h)
    has_pos = (same & not_self).any(1)
    if not has_pos.any():
        return []
    ap = average_precision(scores[has_pos], same[has_pos], not_self[has_pos])
    return [float(v) for v in ap]


def project(h: HeldOut, method: str = "pca", seed: int = 0) -> list[list[float]]:
    """(N, 2) points as lists: ``"pca"`` (exact, instant) or ``"tsne"`` (seconds: compute on demand)."""
    if method == "pca":
        return project_2d(h.embeddings).tolist()
    if method != "tsne":
        raise ValueError(f"method must be 'pca' or 'tsne', got {method!r}")
    from sklearn.manifold import TSNE  # imported on demand: seconds
    from threadpoolctl import threadpool_limits

    x = unit_rows(h.embeddings, torch.float64).numpy()
    perplexity = float(min(30.0, max(2.0, (len(x) - 1) / 3)))
    # One thread: OpenMP's spinning threads make a busy 2-core machine 10-20x slower, not faster.
    with threadpool_limits(limits=1):
        tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed, n_jobs=1)
        return tsne.fit_transform(x).tolist()


def selected_row(event: Any) -> Optional[int]:
    """The row of the point clicked in an embedding map (its ``customdata``), from a Streamlit
    plotly selection event (an object or dict with ``selection.points``); None if nothing is selected."""
    selection = _get(event, "selection")
    points = _get(selection, "points") or []
    for point in points:
        data = _get(point, "customdata")
        if isinstance(data, (list, tuple)):
            data = data[0] if data else None
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return int(data)
    return None


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def thumbnail(dataset, item: int, size: int = 64) -> Image.Image:
    """The untransformed image ``item`` of ``dataset`` as RGB, fitted in size x size (kept sharp)."""
    img = dataset.image(int(item)).convert("RGB")
    scale = size / max(img.size)
    resample = Image.Resampling.NEAREST if scale >= 1 else Image.Resampling.BILINEAR
    return img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), resample)



def describe_item(dataset, labels: Tensor) -> str:
    """"class name · coarse name" of an item from its label row (L,), for captions."""
    fine = int(labels[0])
    text = str(getattr(dataset, "class_names", {}).get(fine, f"class {fine}"))
    coarse_names = getattr(dataset, "coarse_names", {}) or {}
    if len(labels) > 1:
        text += f" · {coarse_names.get(int(labels[1]), f'group {int(labels[1])}')}"
    return text
