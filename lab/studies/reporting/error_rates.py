"""What each rule of the page errs at, by simulation: the chance that it resolves a claim that is null in truth.

Every verdict on the page comes with the error rate of the rule that produced it; this module simulates those
rules (seeded, so the page gives the same number at every render) and the page prints what it returns:

* :func:`family_error`: paired t-tests at n seeds with Holm at 0.05 within a family of claims (the n = 5
  verdicts of study 1, the registered adjacent pairs, the trend families), under the global null;
* :func:`replication_error`: the registered replication (:mod:`.sequential`, 4 hypotheses, 2 looks, the
  stopping rule), under the global null or a partial one;
* :func:`old_looks_error`: the power plan's looks of 2026-11-26 (seeds 0..n-1, 0.05 at n = 5, then 0.025 at
  n = 10 and 15), for one claim null in truth;
* :func:`tost_error`: two one-sided tests at the margin (declaring equivalence when the true difference is the
  margin); :func:`equivalence_error`: a family of them with Holm.

Each simulates the losses' values per seed, not the statistics, so that claims sharing a loss (ROADMAP in three
of them) or a run (R@1 and mAP@R of one run) are as dependent as they are in the study.
"""
from __future__ import annotations

import functools
import math
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from .sequential import ALPHA, LOOK_N, holm_sequential_many, t_statistics

SIMS = 40_000
SEED = 43  # not the boundaries' seed (sequential.SIM_SEED): the rule is checked on fresh draws
METRIC_CORRELATION = 0.8  # between a run's R@1 and mAP@R in the simulation (any value keeps the bound)


class ErrorRate(NamedTuple):
    rate: float  # the fraction of simulated experiments that resolve at least one claim null in truth
    se: float  # its binomial standard error
    sims: int

    def __str__(self) -> str:
        return f"{self.rate:.3f} (standard error {self.se:.4f}, {self.sims:,} simulated experiments)"


def _rate(hits: np.ndarray) -> ErrorRate:
    p = float(hits.mean())
    return ErrorRate(p, math.sqrt(p * (1 - p) / len(hits)), len(hits))


def _values(losses: Sequence[str], n: int, sims: int, rng: np.random.Generator,
            means: Mapping[str, float]) -> np.ndarray:
    """(sims, n seeds, losses, 2 metrics): each loss's value per seed in units of the run-to-run spread, with
    a shared seed effect and R@1 correlated with mAP@R within a run."""
    shape = (sims, n, len(losses))
    own = rng.standard_normal(shape)
    other = METRIC_CORRELATION * own + math.sqrt(1 - METRIC_CORRELATION ** 2) * rng.standard_normal(shape)
    seed_effect = rng.standard_normal((sims, n, 1, 1))
    shift = np.array([means.get(m, 0.0) for m in losses])[None, None, :, None]
    return np.stack([own, other], -1) + seed_effect + shift


METRICS = ("mAP@R", "R@1")


def _diffs(values: np.ndarray, losses: Sequence[str], claims: Sequence[tuple[str, str, str]]) -> np.ndarray:
    """(sims, claims, n): better − worse on each claim's metric."""
    return np.stack([values[:, :, losses.index(b), METRICS.index(m)] - values[:, :, losses.index(w), METRICS.index(m)]
                     for b, w, m in claims], 1)


def _holm_reject(p: np.ndarray, alpha: float) -> np.ndarray:
    """(sims, m) Holm rejections of the p-values (sims, m) at ``alpha``."""
    order = np.argsort(p, 1)
    ranked = np.take_along_axis(p, order, 1)
    m = p.shape[1]
    ok = ranked <= alpha / (m - np.arange(m))[None, :]
    first_fail = np.where(~ok.all(1), np.argmin(ok, 1), m)  # step down: stop at the first that fails
    rejected_sorted = np.arange(m)[None, :] < first_fail[:, None]
    out = np.zeros_like(rejected_sorted)
    np.put_along_axis(out, order, rejected_sorted, 1)
    return out


def family_error(claims: Sequence[tuple[str, str, str]], n: int, alpha: float = ALPHA, sims: int = SIMS,
                 seed: int = SEED) -> ErrorRate:
    """Paired two-sided t-tests of ``claims`` ((better, worse, metric)) over ``n`` seeds, Holm at ``alpha``:
    the chance of resolving at least one when every loss is equal (the global null)."""
    from scipy.stats import t

    losses = sorted({m for b, w, _ in claims for m in (b, w)})
    diffs = _diffs(_values(losses, n, sims, np.random.default_rng(seed), {}), losses, claims)
    p = 2 * t.sf(np.abs(t_statistics(diffs)), n - 1)
    return _rate(_holm_reject(p, alpha).any(1))


def equivalence_error(pairs: Sequence[tuple[str, str]], n: int, alpha: float = ALPHA, sims: int = SIMS,
                      seed: int = SEED) -> ErrorRate:
    """Two one-sided t-tests of each pair ((one side, the other)) over ``n`` seeds, Holm at ``alpha`` over the
    pairs, when every pair differs by exactly the margin (one standard deviation of a difference, as
    :func:`tost_error`; the first sides shifted up): the chance of calling at least one pair equivalent. Pairs
    sharing a side (10 bins against 5, 20 and 40) are as dependent as in the study."""
    from scipy.stats import t

    first, second = {a for a, _ in pairs}, {b for _, b in pairs}
    if first & second:
        raise ValueError(f"a side both shifted and not: {sorted(first & second)}")
    losses, margin = sorted(first | second), math.sqrt(2)  # a difference of two losses has sd sqrt(2)
    diffs = _diffs(_values(losses, n, sims, np.random.default_rng(seed), dict.fromkeys(first, margin)), losses,
                   [(a, b, "mAP@R") for a, b in pairs])
    mean, se = diffs.mean(-1), diffs.std(-1, ddof=1) / math.sqrt(n)
    p = np.maximum(t.sf((mean + margin) / se, n - 1), t.cdf((mean - margin) / se, n - 1))
    return _rate(_holm_reject(p, alpha).any(1))


def replication_error(hypotheses: Sequence[tuple[str, str, str]], means: Mapping[str, float] | None = None,
                      sims: int = SIMS, seed: int = SEED) -> ErrorRate:
    """The registered replication: look 1 on the first 5 seeds, the stopping rule (a hypothesis rejected there
    gets no look 2), look 2 on all 10, Holm with O'Brien-Fleming-type boundaries
    (:func:`.sequential.holm_sequential_many`). ``means``: each loss's true shift (in run-to-run spreads; the
    same on both metrics); a hypothesis is null in truth when its two losses have equal shifts. The chance of
    rejecting at least one true null."""
    means = dict(means or {})
    losses = sorted({m for b, w, _ in hypotheses for m in (b, w)})
    diffs = _diffs(_values(losses, LOOK_N[-1], sims, np.random.default_rng(seed), means), losses, hypotheses)
    first, whole = t_statistics(diffs[..., :LOOK_N[0]]), t_statistics(diffs)
    at_first = holm_sequential_many(np.stack([first, np.full_like(first, np.nan)], -1))
    rejected = holm_sequential_many(np.stack([first, np.where(at_first, np.nan, whole)], -1)) | at_first
    null = np.array([math.isclose(means.get(b, 0.0), means.get(w, 0.0)) for b, w, _ in hypotheses])
    return _rate((rejected & null[None, :]).any(1))


@functools.lru_cache(maxsize=8)  # 400,000 draws: 0.7 s a call, and the deviations section formats it for each entry
def old_looks_error(sims: int = 10 * SIMS, seed: int = SEED) -> ErrorRate:
    """The power plan's rule for one claim null in truth: paired t at 0.05 on seeds 0-4; if not resolved, at
    0.025 on seeds 0-9; if still not, at 0.025 on seeds 0-14."""
    from scipy.stats import t

    x = np.random.default_rng(seed).standard_normal((sims, 15))
    hit = np.zeros(sims, dtype=bool)
    for n, level in ((5, ALPHA), (10, ALPHA / 2), (15, ALPHA / 2)):
        hit |= 2 * t.sf(np.abs(t_statistics(x[:, :n])), n - 1) < level
    return _rate(hit)


def tost_error(n: int, alpha: float = ALPHA, sims: int = SIMS, seed: int = SEED) -> ErrorRate:
    """Two one-sided t-tests at level ``alpha`` each, on ``n`` paired differences whose true mean is the margin
    (here one sd from 0; at most ``alpha`` for any margin): the chance of declaring equivalence."""
    from scipy.stats import t

    margin = 1.0
    x = margin + np.random.default_rng(seed).standard_normal((sims, n))
    mean, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
    p = np.maximum(t.sf((mean + margin) / se, n - 1), t.cdf((mean - margin) / se, n - 1))
    return _rate(p < alpha)
