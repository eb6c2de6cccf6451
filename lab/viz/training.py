"""Short training runs behind the notebooks' experiments, with their figures.

* ROADMAP Fig. 5 / supp. Table 9: SupAP vs ROADMAP (SupAP + L_calibr.) across batch sizes:
  the decomposability gap of the trained models and the relative mAP@R gain of ROADMAP.
* FastAP Fig. 4b: R@1 against the number of histogram bins.
* ROADMAP Table 2: SmoothAP, SupAP and ROADMAP trained from the same seed (:func:`loss_comparison`).
* SupRank Tab. II: the recall losses against ROADMAP (:func:`recall_study`).

Runs use :class:`lab.train.Trainer` on the glyphs dataset. In fast mode (``LAB_FAST=1``, see
:func:`lab.viz.fast_mode`) they are a few steps on a 24-class subset: the notebooks execute,
the numbers mean nothing. Full mode trains long enough for the docs' figures. Results are
cached per process, so a notebook can show one run in several figures.
"""
from __future__ import annotations

import contextlib
import functools
import json
import time
from typing import Any, Optional, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import fast_mode
from .style import SERIES, TEMPLATE

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
RETRIEVAL = ("R@1", "R@2", "R@4", "R@8", "mAP@R")
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
    from ..train import Trainer, TrainConfig

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
    from ..train import Trainer, TrainConfig

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


def metrics_table(rows: list[dict[str, Any]], columns: Sequence[str] = RETRIEVAL, key: str = "loss") -> str:
    """A Markdown table, one line per row: ``key`` then ``columns`` in percent, one decimal (as
    the papers print them); the best value of each column in bold."""
    best = {c: max(float(r[c]) for r in rows) for c in columns} if rows else {}
    lines = ["| " + " | ".join([key, *columns]) + " |", "|" + "---|" * (len(columns) + 1)]
    for r in rows:
        cells = [f"**{100 * float(r[c]):.1f}**" if float(r[c]) == best[c] else f"{100 * float(r[c]):.1f}" for c in columns]
        lines.append("| " + " | ".join([str(r[key]), *cells]) + " |")
    return "\n".join(lines)


def plot_metric_bars(rows: list[dict[str, Any]], metrics: Sequence[str], title: str, key: str = "loss",
                     width: int = 620) -> go.Figure:
    """Grouped bars: x = the metrics, one colour per row (named by ``row[key]``), y in [0, 1]."""
    fig = go.Figure()
    for i, row in enumerate(rows):
        fig.add_trace(go.Bar(x=list(metrics), y=[float(row[m]) for m in metrics], name=str(row[key]),
                             marker=dict(color=SERIES[i % len(SERIES)])))
    fig.update_layout(template=TEMPLATE, barmode="group", height=380, width=width, margin=dict(l=60, r=20, t=70, b=90),
                      title=title, yaxis=dict(title="metric", range=[0, 1]), legend=dict(orientation="h", y=-0.2))
    return fig


def plot_loss_comparison(rows: list[dict[str, Any]]) -> go.Figure:
    """Test R@1/2/4/8 and mAP@R of each trained model, grouped by metric (ROADMAP Table 2 as bars)."""
    steps, seed = (rows[0]["steps"], rows[0].get("seed", 0)) if rows else (0, 0)
    return plot_metric_bars(rows, RETRIEVAL, f"Same seed, {steps} steps per loss: test retrieval (seed {seed})")


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


def relative_gain(rows: list[dict[str, Any]], metric: str = "mAP@R", base: str = "sup_ap",
                  new: str = "roadmap") -> dict[int, float]:
    """{batch size: 100 * (metric(new) - metric(base)) / metric(base)}: ROADMAP Fig. 5's y axis."""
    by = {(r["loss"], r["batch_size"]): r[metric] for r in rows}
    sizes = sorted({r["batch_size"] for r in rows})
    return {b: 100.0 * (by[(new, b)] - by[(base, b)]) / by[(base, b)] for b in sizes
            if (new, b) in by and (base, b) in by and by[(base, b)] > 0}


def plot_batch_size_study(rows: list[dict[str, Any]]) -> go.Figure:
    """Left: decomposability gap of each trained model vs batch size. Right: relative mAP@R
    gain of ROADMAP over SupAP (ROADMAP Fig. 5)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("decomposability gap of the trained model", "mAP@R gain of ROADMAP over SupAP (%)"))
    for i, loss in enumerate(sorted({r["loss"] for r in rows})):
        mine = sorted((r for r in rows if r["loss"] == loss), key=lambda r: r["batch_size"])
        fig.add_trace(go.Scatter(x=[float(r["batch_size"]) for r in mine], y=[float(r["gap"]) for r in mine],
                                 mode="lines+markers", name=loss, line=dict(color=SERIES[i])), row=1, col=1)
    gain = relative_gain(rows)
    fig.add_trace(go.Bar(x=[str(b) for b in gain], y=list(gain.values()), name="relative gain",
                         marker=dict(color=SERIES[2]), showlegend=False), row=1, col=2)
    steps = rows[0]["steps"] if rows else 0
    sizes = sorted({float(r["batch_size"]) for r in rows})
    fig.update_xaxes(title_text="batch size", type="log", tickvals=sizes, ticktext=[f"{b:g}" for b in sizes], row=1, col=1)
    fig.update_xaxes(title_text="batch size", row=1, col=2)
    fig.update_layout(template=TEMPLATE, height=400, width=900, margin=dict(l=60, r=20, t=80, b=100),
                      legend=dict(orientation="h", y=-0.25),
                      title=f"SupAP vs ROADMAP on glyphs, {steps} steps per run")
    return fig


def bins_study(num_bins: Optional[Sequence[int]] = None, loss: str = "fast_ap",
               fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per bin count (FastAP Fig. 4b analogue); rows as :func:`train_and_evaluate`'s plus num_bins."""
    fast = fast_mode() if fast is None else fast
    counts = num_bins or (FAST_BINS if fast else FULL_BINS)
    return [{**train_and_evaluate(loss, {"num_bins": int(n)}, fast=fast), "num_bins": int(n)} for n in counts]


def plot_bins_study(rows: list[dict[str, Any]]) -> go.Figure:
    """R@1 and mAP@R of the trained model against the number of bins (FastAP Fig. 4b)."""
    fig = go.Figure()
    for i, metric in enumerate(("R@1", "mAP@R")):
        fig.add_trace(go.Scatter(x=[float(r["num_bins"]) for r in rows], y=[float(r[metric]) for r in rows],
                                 mode="lines+markers", name=metric, line=dict(color=SERIES[i])))
    loss = rows[0]["loss"] if rows else ""
    fig.update_layout(template=TEMPLATE, height=380, width=620, margin=dict(l=60, r=20, t=70, b=90),
                      title=f"{loss}: test retrieval vs number of bins ({rows[0]['steps'] if rows else 0} steps per run)",
                      xaxis=dict(title="num_bins", type="log", tickvals=[float(r["num_bins"]) for r in rows],
                                 ticktext=[str(r["num_bins"]) for r in rows]), yaxis=dict(title="metric"),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def recall_study(losses: Sequence[str] = ("smooth_recall", "sup_recall", "roadmap"),
                 fast: Optional[bool] = None) -> list[dict[str, Any]]:
    """One run per loss with the same settings: the recall surrogates against ROADMAP (SupRank Tab. II setting)."""
    return [train_and_evaluate(loss, fast=fast) for loss in losses]


def plot_recall_study(rows: list[dict[str, Any]]) -> go.Figure:
    """Test R@1, R@2, R@4, R@8 of each trained model, grouped by k."""
    return plot_metric_bars(rows, RETRIEVAL[:4], f"Test recall of models trained {rows[0]['steps'] if rows else 0} "
                            "steps per loss")
