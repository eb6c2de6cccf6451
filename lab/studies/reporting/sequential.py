"""Group-sequential tests with Holm's step-down, for study 1's replication (docs/plans/study1-replication.md,
registered in b0a4995): Lan-DeMets O'Brien-Fleming-type spending over 2 looks, t boundaries, the
sequentially rejective procedure of Maurer & Bretz (Stat. Biopharm. Res. 2013) with Holm's equal weights, and
repeated confidence intervals.

A hypothesis tested at level ``a`` spends ``alpha_spent(a, t) = 2 - 2 Φ(z_{1-a/2} / √t)`` by information
fraction t. Look 1 (n = 5 of 10 seeds, t = 1/2) rejects when |T₁| ≥ c₁(a), the t quantile with 4 df at
1 - alpha_spent(a, 1/2) / 2, exact; look 2 (n = 10) rejects when |T₂| ≥ c₂(a), where c₂ makes
P(|T₁| < c₁, |T₂| ≥ c₂) = a - alpha_spent(a, 1/2) for the t statistics of 5 and 10 independent normal
differences (T₁ on the first 5 of T₂'s 10), found by simulation with a fixed seed (:data:`SIM_SEED`).

Holm over H hypotheses: each open hypothesis is tested at alpha / (number open), at every look read so far;
a rejection raises the others' level, and they are tested again, earlier looks included, until no more is
rejected (:func:`holm_sequential`, written as the plain loop of that definition; :func:`holm_sequential_many`
is the same rule on arrays, for simulations).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional, Sequence

import numpy as np

ALPHA = 0.05  # the family-wise error over the hypotheses and the looks
LOOK_N = (5, 10)  # seeds per look: seeds 5-9, then 5-14
FRACTIONS = tuple(n / LOOK_N[-1] for n in LOOK_N)  # information fractions (1/2, 1)
SIM_PAIRS = 2_000_000  # simulated (T1, T2) pairs behind c2, as in the plan's table
SIM_SEED = 20261128  # fixed: the boundaries are the same at every render
_CHUNK = 250_000


def alpha_spent(a: float, t: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type spending: the error a hypothesis tested at ``a`` may have spent by
    information fraction ``t`` (0 < t <= 1; the whole of ``a`` at t = 1)."""
    from scipy.stats import norm

    return float(2 - 2 * norm.cdf(norm.ppf(1 - a / 2) / math.sqrt(t)))


def t_statistics(x: np.ndarray) -> np.ndarray:
    """One-sample t statistics (mean / (sd / √n), sd with ddof 1) over the last axis of ``x``."""
    n = x.shape[-1]
    return x.mean(-1) / (x.std(-1, ddof=1) / math.sqrt(n))


@functools.lru_cache(maxsize=2)
def null_pairs(pairs: int = SIM_PAIRS, seed: int = SIM_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(|T₁|, |T₂|) of ``pairs`` simulated experiments of 10 independent N(0, 1) differences: T₁ on the first
    5, T₂ on all 10; generated in chunks from one seeded generator (the same arrays at every call)."""
    rng = np.random.default_rng(seed)
    first, whole = np.empty(pairs), np.empty(pairs)
    for start in range(0, pairs, _CHUNK):
        x = rng.standard_normal((min(_CHUNK, pairs - start), LOOK_N[-1]))
        first[start:start + len(x)] = np.abs(t_statistics(x[:, :LOOK_N[0]]))
        whole[start:start + len(x)] = np.abs(t_statistics(x))
    return first, whole


class Boundaries(NamedTuple):
    a: float  # the level the hypothesis is tested at
    spent: float  # alpha_spent(a, 1/2): what look 1 spends
    c: tuple[float, float]  # |T| boundaries of look 1 (4 df, exact) and look 2 (9 df, simulated)


@functools.lru_cache(maxsize=64)
def boundaries(a: float, pairs: int = SIM_PAIRS, seed: int = SIM_SEED) -> Boundaries:
    """The two looks' boundaries for a hypothesis tested at ``a``."""
    from scipy.stats import t

    spent = alpha_spent(a, FRACTIONS[0])
    c1 = float(t.ppf(1 - spent / 2, LOOK_N[0] - 1))
    first, whole = null_pairs(pairs, seed)
    going_on = whole[first < c1]
    k = round((a - spent) * len(first))  # how many of all the pairs look 2 may reject
    c2 = float(np.partition(going_on, len(going_on) - k)[len(going_on) - k])  # the k-th largest
    return Boundaries(a, spent, (c1, c2))


class Decision(NamedTuple):
    rejected: bool
    look: Optional[int]  # 0 or 1: the look whose statistic crossed (None when not rejected)
    level: float  # the level it was last tested at (rejected: the one it was rejected at)


def holm_sequential(stats: Sequence[Sequence[Optional[float]]], alpha: float = ALPHA) -> list[Decision]:
    """The rule, as plain loops. ``stats[h][k]``: hypothesis h's t statistic at look k, None where that look is
    not read (or its runs were not trained). With the hypotheses still open, each is tested at alpha / their
    number at every look read; the ones that cross are rejected, and the others tested again at the raised
    level, until none crosses."""
    open_ = list(range(len(stats)))
    out: dict[int, Decision] = {}
    while open_:
        a = alpha / len(open_)
        c = boundaries(a).c
        crossed = {}
        for h in open_:
            for k, value in enumerate(stats[h]):
                if value is not None and not math.isnan(value) and abs(value) >= c[k]:
                    crossed[h] = Decision(True, k, a)
                    break
        if not crossed:
            break
        out.update(crossed)
        open_ = [h for h in open_ if h not in crossed]
    for h in open_:
        out[h] = Decision(False, None, alpha / len(open_))
    return [out[h] for h in range(len(stats))]


def holm_sequential_many(stats: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """:func:`holm_sequential` on arrays: ``stats`` (S, H, K) with nan where a look is not read; returns the
    (S, H) rejections of each of S experiments."""
    s, h, k = stats.shape
    table = np.array([[math.inf] * k] + [boundaries(alpha / m).c[:k] for m in range(1, h + 1)])  # (H + 1, K)
    absolute = np.where(np.isnan(stats), -math.inf, np.abs(stats))
    rejected = np.zeros((s, h), dtype=bool)
    for _ in range(h):
        open_ = ~rejected
        c = table[open_.sum(1)]  # (S, K): the boundaries at alpha / (number open)
        crossed = open_ & (absolute >= c[:, None, :]).any(-1)
        if not crossed.any():
            break
        rejected |= crossed
    return rejected


def repeated_interval(diffs: Sequence[float], look: int, level: float) -> tuple[float, float, float]:
    """(mean, low, high): the repeated confidence interval of look ``look`` for a hypothesis last tested at
    ``level``: mean ± c_look(level) × standard error (not a 95 % interval)."""
    x = np.asarray(diffs, dtype=float)
    half = boundaries(level).c[look] * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean()), float(x.mean() - half), float(x.mean() + half)
