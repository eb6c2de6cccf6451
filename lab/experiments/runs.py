"""Short training runs behind the notebooks' experiments; their figures are in :mod:`lab.viz.comparisons`.

* ROADMAP Fig. 5 / supp. Table 9: SupAP vs ROADMAP (SupAP + L_calibr.) across batch sizes:
  the decomposability gap of the trained models (held-out, :func:`heldout_gap`, and on the
  trainer's probe of training batches) and the relative mAP@R gain of ROADMAP; one model's gap
  cut both ways at several batch sizes (:func:`gap_by_batch_size`).
* FastAP Fig. 4b: R@1 against the number of histogram bins.
* ROADMAP Table 2: SmoothAP, SupAP and ROADMAP trained from the same seed (:func:`loss_comparison`).
* SupRank Tab. II: the recall losses against ROADMAP (:func:`recall_study`).

Runs use :class:`lab.train.Trainer` on the glyphs dataset. In fast mode (``RANKLAB_FAST=1``, see
:func:`lab.core.env.fast_mode`) they are a few steps on a 24-class subset: the notebooks execute,
the numbers mean nothing. Full mode has the reproduction study's budget (300 steps of 128), with
progress lines; the comparisons that the study already trained (``results/*.json``, 3 seeds) are
read from there (:mod:`lab.experiments.cached`, mean ± std over seeds) unless ``retrain=True``.
Trained runs are cached per process, so a notebook can show one run in several figures.
"""
from __future__ import annotations

import contextlib
import functools
import json
import time
from typing import Any, Optional, Sequence

from ..core.env import fast_mode, torch_threads
from ..metrics import RETRIEVAL_KEYS
from .cached import cached_rows, stored_step0
from .shipped import find as find_shipped, load_into

# The two sizes of every run. Fast: seconds on 2 CPU cores, quiet. Full: the reproduction study's
# budget (lab/studies/running/spec.py FULL_BASE: 300 steps of 128, ~2.6 epochs; 1.5-4 min per run on one
# core of a shared 2-core machine), with progress lines (text: a saved notebook shows them).
FAST_RUN = dict(steps=3, batch_size=32, dataset_kwargs={"num_classes": 24, "instances_per_class": 8},
                probe_batches=2, eval_max_items=None, progress=False)
# Full: evaluation on a fixed ~2,000-image subset of the test classes (whole classes): the exact
# metrics sort N x N scores (H-AP, NDCG, ASI too), ~4x cheaper than 4,000 on 2 busy cores.
FULL_RUN = dict(steps=300, batch_size=128, dataset_kwargs={}, probe_batches=8, eval_max_items=2000, progress=True)
COMMON = dict(dataset="glyphs", model="small_cnn", eval_every=0, log_every=10_000, m=4, seed=0)
# Batch sizes (ROADMAP Fig. 5): every size sees the same images, steps = images / B, as in the study.
FAST_BATCH_SIZES, FULL_BATCH_SIZES = (16, 32), (32, 64, 128, 256)
FAST_BINS, FULL_BINS = (4, 20), (2, 5, 10, 20, 40)
# Torch threads of a run: one. On a 2-core machine shared with other jobs (load 2.5-5) one thread
# trained 4x faster than two (0.25 vs 1.05 s per step at batch 128: two threads wait on each
# other when the cores are busy), and it is the study's setting, so a retrained run repeats its record.
RUN_THREADS = 1
RETRIEVAL = RETRIEVAL_KEYS
# Extra keys of a run on two-level labels (lab.metrics.retrieval_metrics with the glyphs' level names).
HIERARCHICAL = ("AP@glyph", "AP@script", "H-AP", "NDCG", "ASI")
RECALL_LOSSES = ("smooth_recall", "sup_recall", "roadmap")  # SupRank Tab. II against the AP loss
ABLATION = ("smooth_ap", "sup_ap", "roadmap")  # ROADMAP Table 2's rows: + H⁻ (SupAP), + L_calibr. (ROADMAP)


def run_settings(fast: Optional[bool] = None) -> dict[str, Any]:
    """The TrainConfig fields the notebooks' runs share (fast or full)."""
    fast = fast_mode() if fast is None else fast
    return {**COMMON, **(FAST_RUN if fast else FULL_RUN)}


def notebook_config(loss: str = "roadmap", loss_kwargs: Optional[dict] = None, fast: Optional[bool] = None,
                    **overrides: Any):
    """A :class:`lab.train.TrainConfig` for one notebook run (``overrides`` win)."""
    from ..train import TrainConfig  # the trainer is imported only by the runs that need it

    return TrainConfig.from_dict({**run_settings(fast), "loss": loss, "loss_kwargs": dict(loss_kwargs or {}),
                                  **overrides})


@contextlib.contextmanager
def run_threads():
    """``RUN_THREADS`` torch threads while a run trains or evaluates, then back. In fast mode too:
    batches of 32 images gain nothing from a second thread (the four runs of notebook 04 took
    15 s with two, 7 s with one)."""
    with torch_threads(RUN_THREADS):
        yield


@functools.lru_cache(maxsize=16)
def _trained(key: str, retrain: bool = False):
    from ..train import TrainConfig, Trainer

    cfg = TrainConfig.from_dict(json.loads(key))
    found = None if retrain else find_shipped(cfg)  # a notebook's figure model ships as a checkpoint (issue 36, N-6)
    if found is not None:
        with run_threads():
            return load_into(Trainer(cfg), *found)
    start = time.perf_counter()
    with run_threads():
        trainer = Trainer(cfg)
        train_with_text_progress(trainer, cfg.steps, cfg.progress)  # no evaluation, no checkpoint here
    trainer.train_seconds = time.perf_counter() - start
    return trainer


PROGRESS_LINES = 4  # a line at every quarter of a run


def train_with_text_progress(trainer, steps: int, progress: bool = True) -> None:
    """Train ``trainer`` to step ``steps`` (the notebooks' runs evaluate and checkpoint nothing while
    they train), printing a line of text at every quarter of the way when ``progress``: a saved
    notebook shows where the run got to. (tqdm's notebook bar is a widget whose text, saved with the
    notebook, stays at the 0 % it was first drawn with: issue 36, C-5.)"""
    first, start = trainer.step_count, time.perf_counter()
    marks = {first + round((steps - first) * k / PROGRESS_LINES) for k in range(1, PROGRESS_LINES + 1)}
    while trainer.step_count < steps:
        metrics = trainer.step()
        if progress and trainer.step_count in marks:
            print(f"train {trainer.config.loss}: step {trainer.step_count} / {steps}, loss {metrics['loss']:.4f}, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)


def heldout_gap(trainer, max_items: Optional[int]) -> float:
    """ROADMAP Eq. 6 on held-out data: the evaluation subset of the test classes (a fixed N images)
    cut into one epoch of the run's own sampler batches, N / B of them. The trainer's own probe
    (``Trainer.decomposability_gap``) takes a fixed number of training batches instead (8 in full
    mode): 8 B images, N / B = 8 at every batch size."""
    import dataclasses

    from ..metrics import decomposability_gap
    from ..train.loading import probe_batches

    emb, labels = trainer.embed("test", max_items)
    whole_epoch = dataclasses.replace(trainer.config, probe_batches=10**6)  # the sampler stops after one epoch
    indices, batch_ids = probe_batches(labels, whole_epoch)
    return decomposability_gap(emb[indices], labels[indices], batch_ids)


def gap_by_batch_size(trainer, batch_sizes: Sequence[int]) -> list[dict[str, Any]]:
    """The decomposability gap (Eq. 6) of one trained model cut into batches of each size B, two
    ways: ``probe``, the trainer's (its ``probe_batches`` sampler batches of the training split:
    ``probe_images`` = that many times B, the same N/B at every B) and ``heldout``, the study's
    (:func:`heldout_gap`: the fixed evaluation subset, ``heldout_images``, in N/B batches). One
    model: what changes with B is how the data are cut, not how the model was trained."""
    import dataclasses

    from ..metrics import decomposability_gap
    from ..train.evaluation import embed_dataset
    from ..train.loading import probe_batches, transform_of

    cfg, out = trainer.config, []
    with run_threads():
        emb, labels = trainer.embed("test", cfg.eval_max_items)
        for b in batch_sizes:
            if cfg.progress:  # a line per batch size: the cell shows progress (issue 36, N-6)
                print(f"cutting the model's data into batches of B = {b}…", flush=True)
            at_b = dataclasses.replace(cfg, batch_size=int(b))
            index, batch_ids = probe_batches(trainer.train_set.labels, at_b)
            with transform_of(trainer.train_set, trainer.eval_transform):
                probe, probe_labels = embed_dataset(trainer.model, trainer.train_set, trainer.device,
                                                    cfg.eval_batch_size, trainer.amp_dtype, index.tolist())
            held, held_ids = probe_batches(labels, dataclasses.replace(at_b, probe_batches=10**6))
            out.append({"batch_size": int(b), "probe": decomposability_gap(probe, probe_labels, batch_ids),
                        "probe_images": len(index), "heldout": decomposability_gap(emb[held], labels[held], held_ids),
                        "heldout_images": len(held)})
    return out


def evaluate_trainer(trainer) -> dict[str, Any]:
    """The row of a trained run (:func:`train_and_evaluate`): test metrics, held-out gap, settings."""
    cfg = trainer.config
    start = time.perf_counter()
    with run_threads():
        if cfg.progress:
            print(f"evaluate {cfg.loss}: ranking the held-out images…", flush=True)
        result = trainer.evaluate()  # no tqdm bar: a saved notebook would show it at 0 % (issue 36, C-5)
        if cfg.progress:
            print(f"evaluate {cfg.loss}: R@1 {result['R@1']:.3f}; the decomposability gap of the held-out images…",
                  flush=True)
        gap_heldout = heldout_gap(trainer, cfg.eval_max_items)
    return {"loss": cfg.loss, "loss_kwargs": dict(cfg.loss_kwargs), "batch_size": cfg.batch_size, "steps": cfg.steps,
            "eval_max_items": cfg.eval_max_items, "seed": cfg.seed,
            **{k: result[k] for k in RETRIEVAL + HIERARCHICAL if k in result},
            "gap": result["decomposability_gap"], "gap_heldout": gap_heldout,
            "seconds": trainer.train_seconds + time.perf_counter() - start,
            "source": "checkpoint" if getattr(trainer, "checkpoint", None) else "trained"}


@functools.lru_cache(maxsize=64)
def _run(key: str, retrain: bool = False) -> dict[str, Any]:
    return evaluate_trainer(_trained(key, retrain))


def _key(loss: str, loss_kwargs: Optional[dict], fast: Optional[bool], overrides: dict[str, Any]) -> str:
    return json.dumps(notebook_config(loss, loss_kwargs, fast, **overrides).to_dict(), sort_keys=True)


def trained_model(loss: str = "roadmap", loss_kwargs: Optional[dict] = None, fast: Optional[bool] = None,
                  retrain: bool = False, **overrides: Any):
    """The :class:`lab.train.Trainer` of one notebook run, trained (cached: the same object each call).
    A full-mode run that ships as a checkpoint (:mod:`lab.experiments.checkpoints`) is loaded from it
    unless ``retrain``."""
    return _trained(_key(loss, loss_kwargs, fast, overrides), bool(retrain))


def evaluation_embeddings(trainer) -> tuple[Any, Any, list[int]]:
    """(embeddings (N, D), labels (N, L), test-set indices (N,)) of the test images ``trainer``'s
    evaluation ranks: its fixed subset of whole classes (``eval_max_items``, ~2,000 images in full
    mode) or the whole test split. Figures drawn from these show the model that was scored."""
    from ..train.evaluation import class_subset

    cfg = trainer.config
    index = class_subset(trainer.test_set.labels, cfg.eval_max_items, cfg.seed)
    with run_threads():
        embeddings, labels = trainer.embed("test", max_items=cfg.eval_max_items)
    return embeddings, labels, list(range(len(labels))) if index is None else index


@functools.lru_cache(maxsize=8)
def _untrained(key: str) -> dict[str, Any]:
    from ..train import TrainConfig, Trainer

    with run_threads():
        result = Trainer(TrainConfig.from_dict(json.loads(key))).evaluate()
    return {k: result[k] for k in ("R@1", "R@2", "R@4", "R@8", "mAP@R")}


def untrained_metrics(fast: Optional[bool] = None, **overrides: Any) -> dict[str, float]:
    """R@1/2/4/8 and mAP@R of the randomly initialised model of the notebook runs (the "before"),
    and ``source``. Ranked on the whole test split (``eval_max_items=None``, full mode), they are
    the study's stored step-0 evaluation of the same model and seed (protocol v2's pilot,
    :func:`lab.experiments.cached.stored_step0`: 14,672 queries, ~80 s to recompute on 2 cores);
    otherwise they are computed here (seconds)."""
    key = _key("roadmap", None, fast, overrides)
    config = json.loads(key)
    if config["eval_max_items"] is None and not (fast_mode() if fast is None else fast):
        stored = stored_step0(config)
        if stored is not None:
            return stored
    return {**_untrained(key), "source": "computed here"}


def train_and_evaluate(loss: str = "roadmap", loss_kwargs: Optional[dict] = None, fast: Optional[bool] = None,
                       retrain: bool = False, **overrides: Any) -> dict[str, Any]:
    """Train one model, evaluate it on the test split: loss, loss_kwargs, batch_size, steps, seed,
    R@1/2/4/8, mAP@R, the per-level APs, H-AP, NDCG and ASI (glyphs have two label levels), gap
    (the decomposability gap, ROADMAP Eq. 6, on the trainer's probe of train batches), seconds,
    source ("trained", or "checkpoint" for a shipped model: :func:`trained_model`)."""
    return dict(_run(_key(loss, loss_kwargs, fast, overrides), bool(retrain)))


Run = tuple[str, Optional[dict], dict]  # (loss, loss_kwargs, TrainConfig overrides)


def _rows(study: str, wanted: Sequence[Run], fast: Optional[bool], retrain: bool) -> list[dict[str, Any]]:
    """Full mode: the study's rows of these runs when it trained every one (seed: the one given,
    else all its seeds) and ``retrain`` is False. Otherwise (and always in fast mode) train them."""
    fast = fast_mode() if fast is None else fast
    if not fast and not retrain:
        seeds = [overrides["seed"] for _, _, overrides in wanted[:1] if "seed" in overrides] or None
        rows = cached_rows(study, [notebook_config(loss, kw, False, **o).to_dict() for loss, kw, o in wanted], seeds)
        if rows is not None:
            return rows
    return [train_and_evaluate(loss, kw, fast=fast, retrain=retrain, **o) for loss, kw, o in wanted]


def loss_comparison(losses: Sequence[str] = ABLATION, fast: Optional[bool] = None, retrain: bool = False,
                    **overrides: Any) -> list[dict[str, Any]]:
    """One run per loss from the same seed: same initial weights, same batches, same augmentations,
    same steps, so only the loss differs (ROADMAP Table 2 setting). Rows as :func:`train_and_evaluate`;
    in full mode those of ``results/methods.json`` (3 seeds, :mod:`lab.experiments.cached`) unless
    ``retrain``."""
    return _rows("methods", [(loss, None, overrides) for loss in losses], fast, retrain)


def batch_size_study(batch_sizes: Optional[Sequence[int]] = None, losses: Sequence[str] = ("sup_ap", "roadmap"),
                     fast: Optional[bool] = None, retrain: bool = False) -> list[dict[str, Any]]:
    """One run per (loss, batch size), each seeing the same images: steps = steps x batch_size of
    the run settings / B (ROADMAP Fig. 5 trains a fixed number of epochs). Full mode: the rows of
    ``results/batch_size.json`` unless ``retrain``."""
    fast = fast_mode() if fast is None else fast
    settings = run_settings(fast)
    images = settings["steps"] * settings["batch_size"]
    sizes = batch_sizes or (FAST_BATCH_SIZES if fast else FULL_BATCH_SIZES)
    return _rows("batch_size", [(loss, None, {"batch_size": int(b), "steps": max(1, images // int(b))})
                                for b in sizes for loss in losses], fast, retrain)


def bins_study(num_bins: Optional[Sequence[int]] = None, losses: Sequence[str] = ("fast_ap", "soft_bin_ap"),
               fast: Optional[bool] = None, retrain: bool = False) -> list[dict[str, Any]]:
    """One run per (loss, bin count) (FastAP Fig. 4b); rows as :func:`train_and_evaluate`'s plus
    num_bins. Full mode: the rows of ``results/bins.json`` unless ``retrain``."""
    fast = fast_mode() if fast is None else fast
    counts = [int(n) for n in num_bins or (FAST_BINS if fast else FULL_BINS)]
    rows = _rows("bins", [(loss, {"num_bins": n}, {}) for loss in losses for n in counts], fast, retrain)
    return [{**row, "num_bins": n} for row, n in zip(rows, counts * len(losses))]


def recall_study(losses: Sequence[str] = RECALL_LOSSES, fast: Optional[bool] = None,
                 retrain: bool = False) -> list[dict[str, Any]]:
    """One run per loss with the same settings: the recall surrogates against ROADMAP (SupRank Tab. II
    setting). Full mode: the rows of ``results/methods.json`` unless ``retrain``."""
    return _rows("methods", [(loss, None, {}) for loss in losses], fast, retrain)


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def source_note(rows: Sequence[dict[str, Any]], study: str, call: str) -> str:
    """Where ``rows`` come from, in one sentence for a notebook: the reproduction study's file
    (seeds, the command that retrains it, the ``call`` that trains one seed here) or this kernel."""
    if rows and all("std" in r for r in rows):
        seeds = sorted({s for r in rows for s in r["seeds"]})
        v2 = rows[0]["source"].startswith("results/v2/")
        # The kernel's runs are v1's settings (a 2,000-image evaluation, 300 steps of 128), never v2's.
        flag, which = (" --protocol v2", " of protocol v1's shorter runs") if v2 else ("", "")
        return (f"These numbers come from the reproduction study ({rows[0]['source']}, {_seeds(len(seeds))}, "
                f"mean ± std over seeds; `python -m lab study {study}{flag}` retrains them; `{call}` trains seed "
                f"{COMMON['seed']}{which} in this kernel).")
    steps = sorted({r["steps"] for r in rows})
    return (f"Trained in this kernel: {'/'.join(map(str, steps))} steps per run, seed "
            f"{rows[0]['seed'] if rows else COMMON['seed']}, one run each" +
            (" (fast mode: the numbers are noise)." if fast_mode() else "."))
