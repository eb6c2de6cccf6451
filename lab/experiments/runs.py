"""Short training runs behind the notebooks' experiments; their figures are in :mod:`lab.viz.comparisons`.

* ROADMAP Fig. 5 / supp. Table 9: SupAP vs ROADMAP (SupAP + L_calibr.) across batch sizes:
  the decomposability gap of the trained models and the relative mAP@R gain of ROADMAP.
* FastAP Fig. 4b: R@1 against the number of histogram bins.
* ROADMAP Table 2: SmoothAP, SupAP and ROADMAP trained from the same seed (:func:`loss_comparison`).
* SupRank Tab. II: the recall losses against ROADMAP (:func:`recall_study`).

Runs use :class:`lab.train.Trainer` on the glyphs dataset. In fast mode (``LAB_FAST=1``, see
:func:`lab.core.env.fast_mode`) they are a few steps on a 24-class subset: the notebooks execute,
the numbers mean nothing. Full mode trains long enough for the docs' figures. Results are
cached per process, so a notebook can show one run in several figures.
"""
from __future__ import annotations

import contextlib
import functools
import json
import time
from typing import Any, Optional, Sequence

from ..core.env import fast_mode
from ..metrics import RETRIEVAL_KEYS

# The two sizes of every run. Fast: seconds on 2 CPU cores. Full: ~2-3 min per run at batch 128
# on 2 shared cores (300 steps, ~2.6 epochs); with 3 batch sizes and 5 bin counts the whole
# `bench/figures.py --training` (15 runs) stays under ~30 min.
FAST_RUN = dict(steps=3, batch_size=32, dataset_kwargs={"num_classes": 24, "instances_per_class": 8},
                probe_batches=2, eval_max_items=None)
# Full: evaluation on a fixed ~2,000-image subset of the test classes (whole classes): the exact
# metrics sort N x N scores (H-AP, NDCG, ASI too), ~4x cheaper than 4,000 on 2 busy cores.
FULL_RUN = dict(steps=300, batch_size=128, dataset_kwargs={}, probe_batches=8, eval_max_items=2000)
COMMON = dict(dataset="glyphs", model="small_cnn", eval_every=0, progress=False, log_every=10_000, m=4, seed=0)
FAST_BATCH_SIZES, FULL_BATCH_SIZES = (16, 32), (32, 64, 128)
FAST_BINS, FULL_BINS = (4, 20), (2, 5, 10, 20, 40)
RETRIEVAL = RETRIEVAL_KEYS
# Extra keys of a run on two-level labels (lab.metrics.retrieval_metrics with the glyphs' level names).
HIERARCHICAL = ("AP@glyph", "AP@script", "H-AP", "NDCG", "ASI")
ABLATION = ("smooth_ap", "sup_ap", "roadmap")  # ROADMAP Table 2's rows: + H⁻ (SupAP), + L_calibr. (ROADMAP)


def run_settings(fast: Optional[bool] = None) -> dict[str, Any]:
    """The TrainConfig fields the notebooks' runs share (fast or full)."""
    fast = fast_mode() if fast is None else fast
    return {**COMMON, **(FAST_RUN if fast else FULL_RUN)}


def notebook_config(loss: str = "roadmap", loss_kwargs: Optional[dict] = None, fast: Optional[bool] = None,
                    **overrides: Any):
    """A :class:`lab.train.TrainConfig` for one notebook run (``overrides`` win)."""
    from ..train import TrainConfig  # the trainer is imported only by the runs that need it

    return TrainConfig.from_dict({**run_settings(fast), "loss": loss, "loss_kwargs": dict(loss_kwargs or {}), **overrides})


@contextlib.contextmanager
def fast_threads():
    """In fast mode, one torch thread while a run trains or evaluates, then back. Batches of 32
    images gain nothing from a second thread, and on a shared 2-core machine the spinning
    threads made the four runs of notebook 04 take 15 s instead of 7 s. Full mode: unchanged."""
    if not fast_mode():
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.lru_cache(maxsize=16)
def _trained(key: str):
    from ..train import TrainConfig, Trainer

    cfg = TrainConfig.from_dict(json.loads(key))
    start = time.perf_counter()
    with fast_threads():
        trainer = Trainer(cfg)
        trainer.step(cfg.steps)
    trainer.train_seconds = time.perf_counter() - start
    return trainer


@functools.lru_cache(maxsize=64)
def _run(key: str) -> dict[str, Any]:
    trainer = _trained(key)
    cfg = trainer.config
    start = time.perf_counter()
    with fast_threads():
        result = trainer.evaluate()
    return {"loss": cfg.loss, "loss_kwargs": cfg.loss_kwargs, "batch_size": cfg.batch_size, "steps": cfg.steps,
            "seed": cfg.seed, **{k: result[k] for k in RETRIEVAL + HIERARCHICAL if k in result},
            "gap": result["decomposability_gap"], "seconds": trainer.train_seconds + time.perf_counter() - start}


def _key(loss: str, loss_kwargs: Optional[dict], fast: Optional[bool], overrides: dict[str, Any]) -> str:
    return json.dumps(notebook_config(loss, loss_kwargs, fast, **overrides).to_dict(), sort_keys=True)


def trained_model(loss: str = "roadmap", loss_kwargs: Optional[dict] = None, fast: Optional[bool] = None,
                  **overrides: Any):
    """The :class:`lab.train.Trainer` of one notebook run, trained (cached: the same object each call)."""
    return _trained(_key(loss, loss_kwargs, fast, overrides))


@functools.lru_cache(maxsize=8)
def _untrained(key: str) -> dict[str, Any]:
    from ..train import TrainConfig, Trainer

    with fast_threads():
        result = Trainer(TrainConfig.from_dict(json.loads(key))).evaluate()
    return {k: result[k] for k in ("R@1", "R@2", "R@4", "R@8", "mAP@R")}


def untrained_metrics(fast: Optional[bool] = None, **overrides: Any) -> dict[str, float]:
    """R@1/2/4/8 and mAP@R of the randomly initialised model of the notebook runs (the "before")."""
    return dict(_untrained(_key("roadmap", None, fast, overrides)))


def loss_comparison(losses: Sequence[str] = ABLATION, fast: Optional[bool] = None, **overrides: Any) -> list[dict[str, Any]]:
    """One run per loss from the same seed: same initial weights, same batches, same augmentations,
    same steps, so only the loss differs (ROADMAP Table 2 setting). Rows as :func:`train_and_evaluate`."""
    return [train_and_evaluate(loss, fast=fast, **overrides) for loss in losses]


def train_and_evaluate(loss: str = "roadmap", loss_kwargs: Optional[dict] = None, fast: Optional[bool] = None,
                       **overrides: Any) -> dict[str, Any]:
    """Train one model, evaluate it on the test split: loss, loss_kwargs, batch_size, steps, seed,
    R@1/2/4/8, mAP@R, the per-level APs, H-AP, NDCG and ASI (glyphs have two label levels), gap
    (the decomposability gap, ROADMAP Eq. 6, on the trainer's probe of train batches), seconds."""
    return dict(_run(_key(loss, loss_kwargs, fast, overrides)))


def batch_size_study(batch_sizes: Optional[Sequence[int]] = None, losses: Sequence[str] = ("sup_ap", "roadmap"),
                     fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per (loss, batch size), the same number of steps each (ROADMAP Fig. 5 setting)."""
    fast = fast_mode() if fast is None else fast
    sizes = batch_sizes or (FAST_BATCH_SIZES if fast else FULL_BATCH_SIZES)
    return [train_and_evaluate(loss, fast=fast, batch_size=int(b)) for b in sizes for loss in losses]


def bins_study(num_bins: Optional[Sequence[int]] = None, loss: str = "fast_ap",
               fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per bin count (FastAP Fig. 4b analogue); rows as :func:`train_and_evaluate`'s plus num_bins."""
    fast = fast_mode() if fast is None else fast
    counts = num_bins or (FAST_BINS if fast else FULL_BINS)
    return [{**train_and_evaluate(loss, {"num_bins": int(n)}, fast=fast), "num_bins": int(n)} for n in counts]


def recall_study(losses: Sequence[str] = ("smooth_recall", "sup_recall", "roadmap"),
                 fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per loss with the same settings: the recall surrogates against ROADMAP (SupRank Tab. II setting)."""
    return [train_and_evaluate(loss, fast=fast) for loss in losses]
