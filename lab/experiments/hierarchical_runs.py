"""HAPPIER vs SmoothAP trained on the glyphs' two label levels (SupRank Sec. V, VII-C, Tab. IX, Fig. 9).

Glyph labels are (glyph, script): a query's relevant items are its glyph in other fonts (level
2), then the other glyphs of its script or symbol group (level 1); the rest are negatives.

* :func:`hierarchical_study`: SmoothAP (fine labels only) and HAPPIER (Eq. 22: Sup-H-AP +
  L_DG*, both levels; the Trainer gives L_DG* one proxy per training class) from the same seed
  and the same hierarchical batches; test R@1, mAP@R,
  the AP at each level (Eq. 34), H-AP, NDCG, ASI (drawn by :func:`lab.viz.comparisons.plot_level_metrics`).
* :func:`hierarchical_model`: a trained run, whose test embeddings
  :func:`lab.viz.retrieval_views.class_mean_map` maps as SupRank Fig. 9 does.
* :func:`tab_ix_claims`: SupRank Tab. IX's claims (HAPPIER vs Smooth-AP on SOP) next to the
  measured differences, each with whether its direction holds.

Runs go through :mod:`lab.experiments.runs` (cached, fast mode shrinks them).
"""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence

from ..core.env import fast_mode
from ..data.samplers import LeftOutCategories
from .runs import HIERARCHICAL, train_and_evaluate, trained_model

HIERARCHICAL_LOSSES = ("smooth_ap", "happier")
LEVEL_METRICS = ("R@1", "mAP@R", *HIERARCHICAL)
# FastAP's hierarchical sampler for both losses (SupRank Sec. VII-A, SOP): each batch holds two
# scripts, so every query has same-script positives in its batch. In fast mode 120 classes x 4
# images: enough scripts with >= batch_size / (2m) = 4 classes to fill half-batches. Full mode:
# 150 steps of 128 (~1.3 epochs), half the study's budget, so that notebook 05 trains both models
# in a few minutes on 2 cores (the reproduction study has no hierarchical runs to read).
FAST_HIERARCHY = dict(sampler="hierarchical", dataset_kwargs={"num_classes": 120, "instances_per_class": 4})
FULL_HIERARCHY = dict(sampler="hierarchical", steps=150)


def hierarchical_overrides(fast: Optional[bool] = None) -> dict[str, Any]:
    """TrainConfig fields that differ from :func:`lab.experiments.runs.run_settings` in these runs."""
    fast = fast_mode() if fast is None else fast
    return dict(FAST_HIERARCHY if fast else FULL_HIERARCHY)


def hierarchical_model(loss: str, fast: Optional[bool] = None, retrain: bool = False):
    """The trained :class:`lab.train.Trainer` of one run of the study (cached; in full mode the
    shipped checkpoint, :mod:`lab.experiments.checkpoints`, unless ``retrain``)."""
    return trained_model(loss, fast=fast, retrain=retrain, **hierarchical_overrides(fast))


def hierarchical_study(losses: Sequence[str] = HIERARCHICAL_LOSSES, fast: Optional[bool] = None,
                       retrain: bool = False) -> list[dict[str, Any]]:
    """One run per loss, same seed and batches; rows as :func:`lab.experiments.runs.train_and_evaluate`
    (R@k and mAP@R on glyphs, AP@glyph, AP@script, H-AP, NDCG, ASI). The sampler's warnings about
    scripts left out of the batches come out once each, naming the scripts (:func:`named_left_out`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LeftOutCategories)
        rows = [train_and_evaluate(loss, fast=fast, retrain=retrain, **hierarchical_overrides(fast)) for loss in losses]
    left_out = [w.message for w in caught if isinstance(w.message, LeftOutCategories)]
    for w in caught:  # any other warning, as it was
        if not isinstance(w.message, LeftOutCategories):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if left_out:
        train_set = hierarchical_model(losses[0], fast, retrain).train_set  # cached: trained above
        for text in dict.fromkeys(named_left_out(w, train_set) for w in left_out):
            warnings.warn(text, RuntimeWarning, stacklevel=2)
    return rows


def named_left_out(warning: LeftOutCategories, train_set) -> str:
    """The sampler's warning with the scripts' names, and which batches it is about: the training
    batches, or the batches that :func:`lab.experiments.runs.heldout_gap` cuts the evaluation subset
    into (a subset of whole test classes, where most scripts have too few classes for a half-batch;
    that held-out gap is not used by notebook 05)."""
    names = train_set.coarse_names
    listed = ", ".join(f"{names.get(c, c)} ({n} class{'es' if n != 1 else ''})"
                       for c, n in zip(warning.categories, warning.classes))
    which = ("the training batches" if len(train_set) == warning.items and
             _few_classes(train_set.labels, warning.needed) == warning.categories else
             f"the held-out gap's batches over the {warning.items:,}-image evaluation subset (a number this "
             "notebook does not use; training is not affected)")
    return (f"The hierarchical sampler leaves {listed} out of {which}: a half-batch needs {warning.needed} classes of "
            "one script (batch_size / (2m)).")


def _few_classes(labels, needed: int) -> list[int]:
    """The coarse labels with fewer than ``needed`` fine classes among ``labels`` (N, 2)."""
    per_script: dict[int, set] = {}
    for fine, coarse in labels[:, :2].tolist():
        per_script.setdefault(int(coarse), set()).add(int(fine))
    return sorted(c for c, classes in per_script.items() if len(classes) < needed)


# SupRank Tab. IX (SOP), HAPPIER vs Smooth-AP, in %: (our metric, the paper's name, Smooth-AP, HAPPIER).
# The paper's claim is the sign of each difference: a small loss at the fine level, large gains above.
TAB_IX = (("AP@glyph", "fine AP", 61.7, 60.4), ("AP@script", "coarse AP", 13.4, 58.4),
          ("R@1", "R@1", 81.3, 81.0))
# H-AP: +16.4 pt for HAPPIER over the best fine-level method on SOP (Tab. V).
HAP_GAIN = 16.4


def tab_ix_claims(smooth: dict[str, Any], happier: dict[str, Any]) -> list[dict[str, Any]]:
    """Each claim of SupRank Tab. IX / V: ``metric``, ``paper`` (HAPPIER - Smooth-AP in points),
    ``measured`` (the same difference of two result rows, in points) and ``holds`` (same sign)."""
    out = [{"metric": metric, "paper_name": name, "paper": happier_ap - smooth_ap,
            "measured": 100.0 * (float(happier[metric]) - float(smooth[metric]))}
           for metric, name, smooth_ap, happier_ap in TAB_IX]
    out.append({"metric": "H-AP", "paper_name": "H-AP", "paper": HAP_GAIN,
                "measured": 100.0 * (float(happier["H-AP"]) - float(smooth["H-AP"]))})
    for claim in out:
        claim["holds"] = (claim["measured"] > 0) == (claim["paper"] > 0) and claim["measured"] != 0
    return out
