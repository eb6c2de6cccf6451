"""The power plan of protocol v2 (issue 33): how many seeds each claim not resolved at n = 5 gets, by a rule
written here before any of those runs, and the planning figure (power at the observed effects).

The figure uses the effects measured at n = 5 (post hoc): it sizes the plan, it is not evidence. Power is
that of the two-sided paired t-test at the level Holm gives the first of a family's unresolved claims.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from .paper_claims import UNRESOLVED, ClaimTest, fmt_p
from .stats import SIGNIFICANCE, mean_std

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


def unresolved_in_family(tests: Sequence[ClaimTest], family: str) -> int:
    return sum(t.claim.family == family and t.verdict == UNRESOLVED for t in tests)


def plan_rows(tests: Sequence[ClaimTest]) -> list[list[str]]:
    """One row per claim not resolved at its first look: n, Δ/sd, Holm's level for the family's first
    unresolved claim at n = 5 and at the further looks, power at each, and the seeds that give 80 %."""
    rows = []
    for t in tests:
        if t.verdict != UNRESOLVED:
            continue
        s = mean_std(t.diffs)
        effect = abs(s.mean) / s.std if s.n > 1 and s.std > 0 else math.nan
        m = unresolved_in_family(tests, t.claim.family)
        first, later = SIGNIFICANCE / m, LOOK_ALPHA / m
        powers = [paired_power(effect, t.test.n, first)] + [paired_power(effect, n, later) for n in LOOKS]
        need = seeds_for_power(effect, later) if not math.isnan(effect) else None
        rows.append([f"{t.claim.better} > {t.claim.worse}", t.claim.family, str(t.test.n), f"{effect:.2f}",
                     f"{first:.4g} / {later:.4g}", *(f"{100 * p:.0f} %" for p in powers),
                     "—" if need is None else (str(need) + (f" (> {MAX_SEEDS})" if need > MAX_SEEDS else "")),
                     fmt_p(t.p_holm)])
    return rows


def plan_runs(tests: Sequence[ClaimTest]) -> list[str]:
    """The losses the plan trains more seeds of: both losses of every claim not resolved at n = 5."""
    return list(dict.fromkeys(m for t in tests if t.verdict == UNRESOLVED for m in (t.claim.better, t.claim.worse)))


def plan_section(tests: Sequence[ClaimTest]) -> str:
    """Markdown: the plan, the losses and runs it adds, and the planning figure."""
    losses = plan_runs(tests)
    if not losses:
        return f"**Power plan.** Every claim is resolved at n = {FIRST_SEEDS}: no further seeds."
    runs = len(losses) * SEED_STEP
    header = ["claim", "family", "n", "Δ / sd (observed)", f"α at n = {FIRST_SEEDS} / later looks",
              f"power n = {FIRST_SEEDS}", *(f"power n = {n}" for n in LOOKS), "seeds for 80 %", "p (Holm) now"]
    from .claims import table

    return "\n\n".join([
        f"**Power plan** (`lab/studies/power.py`, `POWER_PLAN`). {POWER_PLAN}",
        f"It needs more seeds of {', '.join(losses)}: {runs} runs per look, {runs * len(LOOKS)} at most. "
        f"`python -m lab study methods --protocol v2 --seeds {LOOKS[0]} --methods {','.join(losses)} "
        f"--curve-every 500` (then `--seeds {MAX_SEEDS}`) trains only these losses' new seeds, each with its "
        "learning curve (evaluating on the way does not change a run); the stored "
        f"seeds 0-{FIRST_SEEDS - 1} are not re-run, and a claim resolved at n = {FIRST_SEEDS} keeps its n = "
        f"{FIRST_SEEDS} whatever the new seeds say.",
        f"Planning figure, from the effects observed at n = {FIRST_SEEDS} (post hoc: it sizes the plan, it is not "
        "evidence): power of the two-sided paired t-test at the mean/sd of the paired differences measured, at the "
        "level Holm gives the first of the family's unresolved claims (α divided by their number; a lower bound "
        "for the others).",
        table(header, plan_rows(tests))])
