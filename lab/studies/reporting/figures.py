"""Figures of the reproduction studies (``python -m lab study``), drawn from their raw records.

Every builder takes the study's records (dicts from ``results/NAME.json``, see
:mod:`..running.runner`) and returns a bare matplotlib Figure (no pyplot state) with the
mean over seeds and an error bar of one sample std; ``lab.viz.render.save_png`` writes it.
Colours: lab.viz.style's colour-blind-safe ``CATEGORIES``, one per method.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ...viz.style import CATEGORIES
from .stats import Records, epoch_minutes, gains_by, mean_std, paired_interval, seed_ranks, select

CHARS_PER_INCH = 13  # of an 11-pt title: a longer title is cut at the figure's edges


def _figure(width: float, height: float, cols: int, title: str, detail: str = "") -> tuple[Figure, list]:
    """A figure of ``cols`` panels; the title, then ``detail`` in brackets, on two lines if one
    would not fit the width."""
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = fig.subplots(1, cols, squeeze=False)[0].tolist()
    line = f"{title} ({detail})" if detail else title
    fig.suptitle(line if len(line) <= CHARS_PER_INCH * width else f"{title}\n({detail})", fontsize=11)
    for ax in axes:
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig, axes


def _n(records: Records) -> str:
    seeds = sorted({r["seed"] for r in records})
    steps = sorted({r["steps"] for r in records})
    return (f"{len(seeds)} seed{'' if len(seeds) == 1 else 's'}, mean ± std"
            + (f", {steps[0]} steps per run" if len(steps) == 1 else ""))


def _log_ticks(ax, values: Sequence[float], base: float = 10) -> None:
    """A log x axis with a tick (and its plain label) at each value, no minor tick labels."""
    ax.set_xscale("log", base=base)
    ax.set_xticks(list(values), [f"{v:g}" for v in values])
    ax.xaxis.set_minor_locator(NullLocator())


def _curve(ax, records: Records, x_field: str, metric: str, label: str, color: str, **match: Any) -> None:
    """mean ± std of ``metric`` against ``x_field`` for the records matching ``match``."""
    mine = select(records, **match)
    xs = sorted({r["params"][x_field] for r in mine})
    stats = [mean_std([r[metric] for r in mine if r["params"][x_field] == x]) for x in xs]
    ax.errorbar(xs, [s.mean for s in stats], yerr=[0 if s.n < 2 else s.std for s in stats], marker="o",
                capsize=3, color=color, label=label)


def plot_methods(records: Records, metrics: Sequence[str] = ("R@1", "mAP@R")) -> Figure:
    """Study 1 (ROADMAP Tables 1-2, SupRank Tables I-II): mean ± std per method and metric, each
    seed as a small dot. Points, not bars: the axis does not start at 0 (the differences are small)."""
    methods = list(dict.fromkeys(r["method"] for r in records))
    fig, axes = _figure(9.5, 3.8, len(metrics), "Rank losses on held-out glyph classes", _n(records))
    for ax, metric in zip(axes, metrics):
        for i, method in enumerate(methods):
            values = [r[metric] for r in select(records, method=method)]
            s = mean_std(values)
            ax.errorbar([i], [s.mean], yerr=[0 if s.n < 2 else s.std], fmt="o", capsize=4, markersize=7,
                        color=CATEGORIES[i % len(CATEGORIES)])
            ax.plot([i + 0.18] * len(values), values, ".", color="#7f7f7f", markersize=4)
        ax.set_xticks(range(len(methods)), methods, rotation=40, ha="right", fontsize=8)
        ax.set_xlim(-0.5, len(methods) - 0.5)
        ax.set_ylabel(metric)
    return fig


def plot_batch_size(records: Records) -> Figure:
    """Study 2 (ROADMAP Fig. 5): mAP@R of SupAP and ROADMAP against the batch size, and the
    relative gain of the calibration loss."""
    fig, (left, right) = _figure(9.5, 3.6, 2, "SupAP vs ROADMAP across batch sizes", _n(records))
    for i, method in enumerate(("SupAP", "ROADMAP")):
        _curve(left, records, "batch_size", "mAP@R", method, CATEGORIES[i], method=method)
    _log_ticks(left, sorted({r["params"]["batch_size"] for r in records}), base=2)
    left.set_xlabel("batch size (same images seen: steps ∝ 1/B)")
    left.set_ylabel("mAP@R")
    left.legend(frameon=False, fontsize=8)
    gains = gains_by(records, "batch_size")
    stats = [mean_std(v) for v in gains.values()]
    labels = [str(b) for b in gains]
    right.bar(labels, [s.mean for s in stats], yerr=[0 if s.n < 2 else s.std for s in stats], capsize=3,
              color=CATEGORIES[2])
    right.axhline(0, color="#7f7f7f", linewidth=0.8)
    right.set_xlabel("batch size")
    right.set_ylabel("relative mAP@R gain of ROADMAP (%)")
    return fig


HPARAM_AXES = {"lam": ("λ (ROADMAP)", False), "rho": ("ρ (SupAP)", True), "margin": ("α − β (ROADMAP)", False),
               "tau": ("τ (SupAP)", True)}


def plot_hparams(records: Records, metric: str = "mAP@R", baseline: Sequence[float] = ()) -> Figure:
    """Study 3 (ROADMAP Fig. 4, supp. Fig. 12; SupRank Fig. 7): ``metric`` against each
    hyper-parameter. ``baseline``: SupAP's per-seed values, drawn as a band on the ROADMAP panels."""
    params = [p for p in HPARAM_AXES if select(records, param=p)]
    fig, axes = _figure(3.0 * max(1, len(params)), 3.4, max(1, len(params)),
                        f"{metric} against the hyper-parameters", _n(records))
    base = mean_std(baseline)
    for ax, param in zip(axes, params):
        title, log = HPARAM_AXES[param]
        mine = select(records, param=param)
        _curve(ax, mine, "value", metric, param, CATEGORIES[0])
        if log:
            values = sorted({r["params"]["value"] for r in mine})
            ax.set_xscale("symlog", linthresh=min(v for v in values if v > 0))
            ax.set_xticks(values, [f"{v:g}" for v in values])
            ax.xaxis.set_minor_locator(NullLocator())
        if base.n and param in ("lam", "margin"):
            ax.axhline(base.mean, color=CATEGORIES[1], linestyle="--", linewidth=1, label="SupAP")
            if base.n > 1:
                ax.axhspan(base.mean - base.std, base.mean + base.std, color=CATEGORIES[1], alpha=0.12)
            ax.legend(frameon=False, fontsize=8)
        ax.set_xlabel(title)
        ax.set_ylabel(metric)
    return fig


def plot_bins(records: Records, metric: str = "R@1") -> Figure:
    """Study 4 (FastAP Fig. 4b): ``metric`` against the number of histogram bins; left every bin
    count, right the same without the fewest bins, zoomed (the peak is a point or less)."""
    bins = sorted({r["params"]["num_bins"] for r in records})
    fig, axes = _figure(9.5, 3.6, 2, f"{metric} against the number of bins", _n(records))
    for ax, shown in zip(axes, (bins, bins[1:] or bins)):
        mine = [r for r in records if r["params"]["num_bins"] in shown]
        for i, method in enumerate(dict.fromkeys(r["method"] for r in records)):
            _curve(ax, mine, "num_bins", metric, method, CATEGORIES[i], method=method)
        _log_ticks(ax, shown)
        ax.set_xlabel("number of bins")
        ax.set_ylabel(metric)
        ax.legend(frameon=False, fontsize=8)
    axes[0].set_title("every bin count", fontsize=10)
    axes[1].set_title(f"zoom: {shown[0]} bins and more", fontsize=10)
    return fig


def plot_gap(records: Records) -> Figure:
    """Study 5 (ROADMAP supp. Table 9): the decomposability gap of the trained models against
    the batch size, on held-out classes and on the training probe."""
    fig, axes = _figure(9.5, 3.6, 2, "Decomposability gap of the trained models", _n(records))
    for ax, (field, where) in zip(axes, (("gap_heldout", "held-out classes"), ("gap_train_probe", "training probe"))):
        for i, method in enumerate(("SupAP", "ROADMAP")):
            _curve(ax, records, "batch_size", field, method, CATEGORIES[i], method=method)
        _log_ticks(ax, sorted({r["params"]["batch_size"] for r in records}), base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel(f"gap, {where}")
        ax.legend(frameon=False, fontsize=8)
    return fig


def plot_memory(records: Records) -> Figure:
    """Study 6 (ROADMAP supp. Table 5): accuracy (points, zoomed axes: the differences are a few
    points) and minutes per epoch (bars from 0) of ROADMAP and SupAP + XBM."""
    methods = list(dict.fromkeys(r["method"] for r in records))
    fig, axes = _figure(9.5, 3.4, 3, "ROADMAP vs a cross-batch memory", _n(records))
    columns = (("R@1", lambda r: r["R@1"]), ("mAP@R", lambda r: r["mAP@R"]), ("minutes per epoch", epoch_minutes))
    for ax, (name, get) in zip(axes, columns):
        for i, method in enumerate(methods):
            values = [get(r) for r in select(records, method=method)]
            s = mean_std(values)
            if name == "minutes per epoch":
                ax.bar(i, s.mean, yerr=0 if s.n < 2 else s.std, capsize=3, color=CATEGORIES[i % len(CATEGORIES)])
                ax.plot([i] * len(values), values, "k.", markersize=4)
            else:
                ax.errorbar([i], [s.mean], yerr=[0 if s.n < 2 else s.std], fmt="o", capsize=4, markersize=7,
                            color=CATEGORIES[i % len(CATEGORIES)])
                ax.plot([i + 0.12] * len(values), values, ".", color="#7f7f7f", markersize=4)
        ax.set_xticks(range(len(methods)), methods, fontsize=8)
        ax.set_xlim(-0.5, len(methods) - 0.5)
        ax.set_ylabel(name)
    return fig


def plot_ranks(records: Records, order: Sequence[str]) -> Figure:
    """Protocol v2, study 1, descriptive: the row order of the papers' tables (not a claim of the papers)
    against the measured ranks. Left: mAP@R of each loss in that row order (bottom row first), mean and 95 %
    t interval, seeds as dots. Right: each loss's rank per seed (mean ± std, 1 = best) against its row's
    rank (1 = best, as everywhere on the page); on the diagonal, the measured order is the row order."""
    order = [m for m in order if select(records, method=m)]
    fig, (left, right) = _figure(9.5, 3.9, 2, "Papers' row order vs measured ranks (descriptive, not a claim)",
                                 _n(records).replace("± std", "± 95 % CI"))
    means = []
    for i, method in enumerate(order):
        values = [r["mAP@R"] for r in select(records, method=method)]
        ci = paired_interval(values)  # the interval of one sample's mean (the same t formula)
        means.append(ci.mean)
        err = 0 if math.isnan(ci.low) else ci.mean - ci.low
        left.errorbar([i], [ci.mean], yerr=[err], fmt="o", capsize=4, markersize=7,
                      color=CATEGORIES[i % len(CATEGORIES)])
        left.plot([i + 0.15] * len(values), values, ".", color="#7f7f7f", markersize=4)
    left.plot(range(len(order)), means, color="#bbbbbb", linewidth=1, zorder=0)
    left.set_xticks(range(len(order)), order, rotation=35, ha="right", fontsize=8)
    left.set_ylabel("mAP@R")
    left.set_title("papers' row order (bottom row first)", fontsize=10)
    ranks = seed_ranks(records, order, "mAP@R")
    n = len(order)
    right.plot([1, n], [n, 1], color="#bbbbbb", linewidth=1, zorder=0, label="measured = row order")
    for i, method in enumerate(order):
        s = mean_std(ranks[method])
        if s.n:
            right.errorbar([i + 1], [s.mean], yerr=[0 if s.n < 2 else s.std], fmt="o", capsize=4, markersize=7,
                           color=CATEGORIES[i % len(CATEGORIES)])
    right.set_xticks(range(1, n + 1), [f"{n - i}\n{m}" for i, m in enumerate(order)], fontsize=7)
    right.set_yticks(range(1, n + 1))
    right.invert_yaxis()
    right.set_xlabel("rank of the paper's row (1 = best)")
    right.set_ylabel("measured rank per seed (1 = best)")
    right.legend(frameon=False, fontsize=8, loc="lower left")
    return fig


def plot_pilot(curve: Sequence[dict], plateau: Any = None) -> Figure:
    """Protocol v2's pilot: R@1 and mAP@R on the whole test split against the steps, the plateau marked."""
    fig, axes = _figure(9.5, 3.4, 2, "Pilot: learning curve of the budget", "one run, whole test split")
    steps = [p["step"] for p in curve]
    for ax, metric, color in zip(axes, ("mAP@R", "R@1"), CATEGORIES):
        ax.plot(steps, [p[metric] for p in curve], marker="o", markersize=3, color=color)
        if plateau is not None:
            ax.axvline(plateau, color="#7f7f7f", linestyle="--", linewidth=1, label=f"budget: {plateau:,} steps")
            ax.legend(frameon=False, fontsize=8)
        ax.set_xlabel("training steps")
        ax.set_ylabel(metric)
    return fig


def plot_curves(curves: dict[str, list[tuple[int, float]]], pilot: Sequence[dict] = (), budget: Any = None) -> Figure:
    """Study 1's learning curves: mAP@R on the whole test split against the steps, one line per loss (``curves``:
    {label: [(step, mAP@R), ...]}, e.g. the mean over the seeds that recorded one), the pilot's ROADMAP dashed,
    the budget (steps per run) marked."""
    fig, (ax,) = _figure(9.5, 4.0, 1, "Learning curves per loss", "mAP@R on the whole test split")
    for i, (label, points) in enumerate(curves.items()):
        ax.plot([s for s, _ in points], [v for _, v in points], marker="o", markersize=3, label=label,
                color=CATEGORIES[i % len(CATEGORIES)])
    if pilot:
        ax.plot([p["step"] for p in pilot], [p["mAP@R"] for p in pilot], linestyle="--", color="#7f7f7f",
                label="ROADMAP, the pilot (seed 0)")
    if budget is not None:
        ax.axvline(budget, color="#7f7f7f", linestyle=":", linewidth=1, label=f"budget: {budget:,} steps")
    ax.set_xlabel("training steps")
    ax.set_ylabel("mAP@R")
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    return fig


__all__ = ["plot_methods", "plot_ranks", "plot_pilot", "plot_curves", "plot_batch_size", "plot_hparams", "plot_bins",
           "plot_gap", "plot_memory", "gains_by", "epoch_minutes"]
