"""Study 1's replication on seeds 5-14, read as registered (:mod:`.replication_plan`, b0a4995): beside the n = 5
verdicts, never merged into them.

A look is read only once every run it needs is done (both losses of each hypothesis it tests, every seed of
it); until then the page says how many are done and shows no difference, interval, p or verdict. Look 1 needs
seeds 5-9 of the four losses; look 2 needs seeds 10-14 of the losses of the hypotheses look 1 did not reject
(the plan's stopping rule). The decisions are :func:`.sequential.holm_sequential`'s over the looks read.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from .error_rates import replication_error
from .replication_plan import (CLAIMS, HYPOTHESES, LOOK_SEEDS, LOSSES, PLAN, PLAN_COMMIT, Hypothesis, claim_of)
from .sequential import ALPHA, LOOK_N, Decision, boundaries, holm_sequential, repeated_interval, t_statistics
from .stats import Records, table

REPLICATED, CONTRADICTED, UNRESOLVED = "replicated as in the paper", "contradicted", "not resolved"
PENDING = "open (look 2 not read yet)"
# The scenarios the page states the rule's error under: every loss equal, and two partial nulls.
SCENARIOS = {"every hypothesis null": {},
             "H4 false, H1-H3 null": {"ROADMAP": 1.5, "SoftBinAP": 1.5},
             "H3 false, H1, H2, H4 null": {"ROADMAP": 1.5, "SoftBinAP": 1.5, "SupAP": 1.5}}


class Look(NamedTuple):
    index: int  # 0: look 1, 1: look 2
    seeds: tuple[int, ...]  # the seeds it reads (look 2: 5-14)
    losses: tuple[str, ...]  # the losses whose new seeds it needs
    done: int
    needed: int

    @property
    def complete(self) -> bool:
        return self.done >= self.needed

    @property
    def status(self) -> str:
        """'look 1 (seeds 5-9): 14 of 20 runs done, not read'."""
        name = f"look {self.index + 1} (seeds {self.seeds[0]}-{self.seeds[-1]})"
        if not self.needed:
            return f"{name}: not needed (every hypothesis was rejected at look 1)"
        return f"{name}: " + ("read" if self.complete else f"{self.done} of {self.needed} runs done, not read")


class Result(NamedTuple):
    hypothesis: Hypothesis
    diffs: tuple[Optional[list[float]], ...]  # per look read (None: not read for this hypothesis)
    decision: Decision
    verdict: str


class Replication(NamedTuple):
    looks: tuple[Look, ...]
    results: tuple[Result, ...]  # empty until look 1 is read


def _diffs(records: Records, h: Hypothesis, seeds: Sequence[int]) -> list[float]:
    value = {(r["method"], r["seed"]): float(r[h.metric]) for r in records}
    return [value[(h.better, s)] - value[(h.worse, s)] for s in seeds]


def _look(records: Records, index: int, losses: Sequence[str]) -> Look:
    new = LOOK_SEEDS[index][len(LOOK_SEEDS[index - 1]):] if index else LOOK_SEEDS[0]
    have = {(r["method"], r["seed"]) for r in records}
    wanted = {(m, s) for m in losses for s in new}
    return Look(index, LOOK_SEEDS[index], tuple(losses), len(wanted & have), len(wanted))


def _t(diffs: Optional[list[float]]) -> Optional[float]:
    return None if diffs is None else float(t_statistics(np.asarray(diffs)))


def replicate(records: Records) -> Replication:
    """The looks reached so far and, once look 1 is read, each hypothesis's decision and verdict."""
    first = _look(records, 0, LOSSES)
    if not first.complete:
        return Replication((first,), ())
    at_first = [_diffs(records, h, LOOK_SEEDS[0]) for h in HYPOTHESES]
    early = holm_sequential([[_t(d)] for d in at_first])
    open_ = [h for h, d in zip(HYPOTHESES, early) if not d.rejected]
    second = _look(records, 1, [m for m in LOSSES if any(m in (h.better, h.worse) for h in open_)])
    read_second = second.needed > 0 and second.complete
    diffs = [(d, _diffs(records, h, LOOK_SEEDS[1]) if read_second and not e.rejected else None)
             for h, d, e in zip(HYPOTHESES, at_first, early)]
    decisions = holm_sequential([[_t(a), _t(b)] for a, b in diffs]) if read_second else early
    results = []
    for h, looked, decision in zip(HYPOTHESES, diffs, decisions):
        if decision.rejected:
            mean = sum(looked[decision.look]) / len(looked[decision.look])
            verdict = REPLICATED if mean > 0 else CONTRADICTED
        else:
            verdict = UNRESOLVED if read_second or not second.needed else PENDING
        results.append(Result(h, looked, decision, verdict))
    return Replication((first, second), tuple(results))


def unread_seeds(rep: Replication) -> tuple[int, ...]:
    """The seeds of the looks not read yet (their runs show no number on the page)."""
    read = [look for look in rep.looks if look.complete and rep.results]
    return tuple(s for s in LOOK_SEEDS[-1] if not any(s in look.seeds for look in read))


def claim_verdicts(rep: Replication) -> dict[str, str]:
    """{claim: verdict}: a claim of two metrics (H1, H2) is contradicted when either is, replicated when both
    are, open while either is, otherwise not resolved; before look 1 is read, its look's status."""
    if not rep.results:
        return {c: rep.looks[0].status for c in CLAIMS}
    out = {}
    for claim in CLAIMS:
        mine = [r.verdict for r in rep.results if claim_of(r.hypothesis) == claim]
        out[claim] = (CONTRADICTED if CONTRADICTED in mine else REPLICATED if set(mine) == {REPLICATED}
                      else PENDING if PENDING in mine else UNRESOLVED)
    return out


def status_line(rep: Replication) -> str:
    """One line for a verdict: where the replication stands, without a number before a look is read."""
    looks = "; ".join(look.status for look in rep.looks)
    if not rep.results:
        return f"the replication on seeds 5-14 ({PLAN_COMMIT}): {looks}"
    return (f"the replication on seeds 5-14 ({PLAN_COMMIT}; {looks}): "
            + ", ".join(f"{c} {v}" for c, v in claim_verdicts(rep).items()))


def _cell(x: float) -> str:
    return f"{100 * x:+.2f}"


def result_rows(rep: Replication) -> list[list[str]]:
    rows = []
    for r in rep.results:
        for k, d in enumerate(r.diffs):
            if d is None:
                continue
            mean, low, high = repeated_interval(d, k, r.decision.level)
            c = boundaries(r.decision.level).c[k]
            crossed = "rejected" if r.decision.rejected and r.decision.look == k else "—"
            rows.append([r.hypothesis.name, claim_of(r.hypothesis), r.hypothesis.metric, f"look {k + 1}", str(len(d)),
                         f"{_cell(mean)} [{_cell(low)}, {_cell(high)}]", f"{_t(d):.2f}", f"{c:.2f}",
                         f"{r.decision.level:.4g}", crossed, r.verdict])
    return rows


def boundary_rows() -> list[list[str]]:
    rows = []
    for m in range(1, len(HYPOTHESES) + 1):
        b = boundaries(ALPHA / m)
        rows.append([f"{b.a:.4g}", f"{b.spent:.5f}", f"{b.c[0]:.2f}", f"{b.c[1]:.2f}"])
    return rows


def replication_section(records: Records) -> str:
    """Markdown: the plan, the boundaries the code computes, the rule's simulated error, and each look as it
    stands (a count of runs until it is read)."""
    rep = replicate(records)
    hyps = "; ".join(f"{h.name} {claim_of(h)} on {h.metric} ({h.source})" for h in HYPOTHESES)
    errors = "; ".join(f"{name}: {replication_error([(h.better, h.worse, h.metric) for h in HYPOTHESES], means)}"
                       for name, means in SCENARIOS.items())
    parts = [
        f"**Replication on seeds 5-14** (registered: [{PLAN}](plans/study1-replication.md), committed in "
        f"{PLAN_COMMIT}, 2026-11-28 18:58 UTC; reported beside the n = 5 verdicts, never merged into them). "
        f"Hypotheses: {hyps}; each a two-sided paired t-test over the seeds of a look (seeds 0-4, which chose "
        f"them, never enter). Looks at n = {LOOK_N[0]} (seeds 5-9) and n = {LOOK_N[1]} (seeds 5-14); Holm over "
        "the 4 hypotheses with Lan-DeMets O'Brien-Fleming-type spending α(t) = 2 − 2 Φ(z_{1−a/2} / √t) at "
        "t = 1/2 and 1 (Maurer & Bretz 2013: a rejection raises the others' level, earlier looks re-tested); "
        f"family-wise error at most {ALPHA} over the hypotheses and the looks. The rule's error, simulated "
        f"(`lab/studies/reporting/error_rates.py`, the stopping rule included): {errors}. A look is read only "
        "once all its runs are done; intervals are repeated confidence intervals (mean ± c × standard error at "
        "the level the hypothesis was last tested at), not 95 % intervals.",
        "Boundaries |T| (look 1 exact from the t distribution with 4 df; look 2 by simulation of 2,000,000 "
        "pairs (T₁, T₂), seed fixed in `lab/studies/reporting/sequential.py`):",
        table(["a", "α(1/2)", "c₁ (4 df)", "c₂ (9 df)"], boundary_rows()),
        "Where it stands: " + "; ".join(look.status for look in rep.looks) + "."]
    if rep.results:
        parts += [table(["hypothesis", "claim", "metric", "look", "n", "Δ (pt) [repeated CI]", "T", "boundary",
                         "level a", "crossed", "verdict"], result_rows(rep)),
                  "By claim: " + "; ".join(f"{c}: {v}" for c, v in claim_verdicts(rep).items()) + "."]
    else:
        parts.append("No difference, interval, p or verdict of the replication is shown until look 1 is read.")
    return "\n\n".join(parts)


def replication_records(rep: Replication) -> list[dict[str, Any]]:
    """The replication by claim, as plain dicts (the dashboard): claim, verdict, where it stands."""
    return [{"claim": c, "verdict": v, "status": "; ".join(look.status for look in rep.looks)}
            for c, v in claim_verdicts(rep).items()]
