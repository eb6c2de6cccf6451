"""The power plan of protocol v2 (issue 33): how many seeds each claim not resolved at n = 5 gets, by a rule
written here before any of those runs, and the power of the paired t-test the planning figure reads.

The plan's looks are applied in :mod:`.looks`; its table on the page (power at the effects observed at
n = 5, post hoc: it sizes the plan, it is not evidence) in :mod:`.plan_table`.
"""
from __future__ import annotations

import math
from typing import Optional

from .stats import SIGNIFICANCE

FIRST_SEEDS = 5  # what protocol v2 ran: every claim's first look
MAX_SEEDS = 15
SEED_STEP = 5
LOOKS = tuple(range(FIRST_SEEDS + SEED_STEP, MAX_SEEDS + 1, SEED_STEP))  # (10, 15): the only further looks
# Each further look spends half of a second alpha = 0.05 (Bonferroni over the 2 looks): a claim that is null in
# truth is resolved by the extension with probability <= 0.05, and over all three looks with <= 0.10 (the first
# look, n = 5, was already made at 0.05). Written before the runs, so that the level cannot follow the data.
LOOK_ALPHA = SIGNIFICANCE / len(LOOKS)
TARGET_POWER = 0.8

POWER_PLAN = (
    f"Written before any of its runs. For every claim not resolved at n = {FIRST_SEEDS}: train seeds "
    f"{FIRST_SEEDS}-{FIRST_SEEDS + SEED_STEP - 1} of both its losses (a loss shared by two such claims is trained "
    f"once), re-test at n = {LOOKS[0]}; the claims still not resolved get seeds {LOOKS[0]}-{MAX_SEEDS - 1} and a last "
    f"test at n = {MAX_SEEDS}. No other looks and no more seeds: a claim not resolved at n = {MAX_SEEDS} is reported "
    f"not resolved. At each look, the claims of a family still not resolved are tested together (paired t-test on "
    f"mAP@R over every seed both losses have, Holm over those claims) at α = {LOOK_ALPHA:g} per look ({SIGNIFICANCE:g} "
    f"split over the {len(LOOKS)} looks, so that the extension resolves a claim that is in truth null with "
    f"probability at most {SIGNIFICANCE:g}; with the look at n = {FIRST_SEEDS} that bound is "
    f"{2 * SIGNIFICANCE:.2f}). A claim resolved at n = {FIRST_SEEDS} keeps its verdict and its n. The table of "
    "claims reports every claim's n; a look's verdicts are final only once all of that look's runs are done.")


def paired_power(effect: float, n: int, alpha: float) -> float:
    """Power of the two-sided paired t-test with ``n`` pairs at level ``alpha`` when the differences have
    mean/std = ``effect``: P(|T| > t_{1-alpha/2, n-1}) with T noncentral t (df n - 1, noncentrality effect √n)."""
    from scipy.stats import nct, t

    if n < 2:
        return math.nan
    df, nc = n - 1, abs(effect) * math.sqrt(n)
    crit = float(t.ppf(1 - alpha / 2, df))
    # the lower tail as the upper tail of -T: scipy's nct.cdf returns nan far in the tail
    return float(nct.sf(crit, df, nc)) + float(nct.sf(crit, df, -nc))


def seeds_for_power(effect: float, alpha: float, target: float = TARGET_POWER, most: int = 200) -> Optional[int]:
    """The fewest pairs (seeds) at which ``paired_power`` reaches ``target``; None beyond ``most``."""
    return next((n for n in range(2, most + 1) if paired_power(effect, n, alpha) >= target), None)
