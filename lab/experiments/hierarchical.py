"""HAPPIER vs SmoothAP trained on the glyphs' two label levels (SupRank Sec. V, VII-C, Tab. IX, Fig. 9).

Glyph labels are (glyph, script): a query's relevant items are its glyph in other fonts (level
2), then the other glyphs of its script or symbol group (level 1); the rest are negatives.

* :func:`hierarchical_study`: SmoothAP (fine labels only) and HAPPIER (Eq. 22: Sup-H-AP +
  L_DG*, both levels; the Trainer gives L_DG* one proxy per training class) from the same seed
  and the same hierarchical batches; test R@1, mAP@R,
  the AP at each level (Eq. 34), H-AP, NDCG, ASI (drawn by :func:`lab.viz.comparisons.plot_level_metrics`).
* :func:`hierarchical_model`: a trained run, whose test embeddings
  :func:`lab.viz.hierarchical.class_mean_map` maps as SupRank Fig. 9 does.

Runs go through :mod:`lab.experiments.runs` (cached, fast mode shrinks them).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..core.env import fast_mode
from .runs import HIERARCHICAL, train_and_evaluate, trained_model

HIERARCHICAL_LOSSES = ("smooth_ap", "happier")
LEVEL_METRICS = ("R@1", "mAP@R", *HIERARCHICAL)
# FastAP's hierarchical sampler for both losses (SupRank Sec. VII-A, SOP): each batch holds two
# scripts, so every query has same-script positives in its batch. In fast mode 120 classes x 4
# images: enough scripts with >= batch_size / (2m) = 4 classes to fill half-batches.
FAST_HIERARCHY = dict(sampler="hierarchical", dataset_kwargs={"num_classes": 120, "instances_per_class": 4})
FULL_HIERARCHY = dict(sampler="hierarchical")


def hierarchical_overrides(fast: Optional[bool] = None) -> dict[str, Any]:
    """TrainConfig fields that differ from :func:`lab.experiments.runs.run_settings` in these runs."""
    fast = fast_mode() if fast is None else fast
    return dict(FAST_HIERARCHY if fast else FULL_HIERARCHY)


def hierarchical_model(loss: str, fast: Optional[bool] = None):
    """The trained :class:`lab.train.Trainer` of one run of the study (cached)."""
    return trained_model(loss, fast=fast, **hierarchical_overrides(fast))


def hierarchical_study(losses: Sequence[str] = HIERARCHICAL_LOSSES, fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per loss, same seed and batches; rows as :func:`lab.experiments.runs.train_and_evaluate`
    (R@k and mAP@R on glyphs, AP@glyph, AP@script, H-AP, NDCG, ASI)."""
    return [train_and_evaluate(loss, fast=fast, **hierarchical_overrides(fast)) for loss in losses]
