"""The power plan on the page (study 1's section, after the primary table): the plan as written, the losses and
runs it adds, and the planning figure: for each claim not resolved at n = 5, the power of the two-sided paired
t-test at the effect observed there (post hoc: it sizes the plan, it is not evidence), at the level Holm gives
the first of the family's unresolved claims.
"""
from __future__ import annotations

import math
from typing import Sequence

from .paper_claims import ClaimTest
from .power import FIRST_SEEDS, LOOK_ALPHA, LOOKS, MAX_SEEDS, POWER_PLAN, SEED_STEP, paired_power, seeds_for_power
from .stats import SIGNIFICANCE, UNRESOLVED, fmt_p, mean_std, table


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
    return "\n\n".join([
        f"**Power plan** (`lab/studies/reporting/power.py`, `POWER_PLAN`). {POWER_PLAN}",
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
