"""The power plan's looks (:mod:`.power`), applied to whatever runs of study 1 exist, and their section.

Look 0 tests every claim on seeds 0-4 at α = 0.05 (Holm within each family). Each further look (n = 10, then
15) re-tests only the claims still not resolved, on seeds 0..n-1 of both their losses, Holm within each family
over those claims only, at ``LOOK_ALPHA``. A claim keeps the verdict and n of the look that resolved it. A look
whose runs are not all done decides nothing: its numbers are shown as they are, marked provisional, and every
claim keeps the verdict of the last complete look, so that a partial look never enters a verdict.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from .paper_claims import CLAIMS, Claim, ClaimTest, claim_tests, claims_table_rows, delta_cell
from .power import FIRST_SEEDS, LOOK_ALPHA, LOOKS
from .stats import SIGNIFICANCE, UNRESOLVED, Records, fmt_p, table


class Look(NamedTuple):
    n: int  # the seeds 0..n-1 the look tests
    alpha: float
    losses: tuple[str, ...]  # the losses whose seeds this look adds (both losses of each claim it re-tests)
    done: int  # runs of the look found (seeds FIRST..n-1 of ``losses``; look 0: its runs)
    needed: int
    tests: tuple[ClaimTest, ...]  # complete: the look's tests; partial: the numbers so far, no verdict to read

    @property
    def complete(self) -> bool:
        return self.done >= self.needed

    @property
    def status(self) -> str:
        """'n = 5, final' or 'n = 10: provisional, 7 of 20 runs done'."""
        return (f"n = {self.n}, final" if self.complete
                else f"n = {self.n}: provisional, {self.done} of {self.needed} runs done")


def _label(c: Claim) -> str:
    return f"{c.better} > {c.worse}"


def looks(records: Records, claims: Sequence[Claim] = CLAIMS) -> list[Look]:
    """The looks the plan has reached: look 0, then each further look whose claims are still open; the last one
    may be partial (then no later look is taken). ``records``: study 1's runs of every seed found."""
    first = [r for r in records if r["seed"] < FIRST_SEEDS]
    tests = claim_tests(first, claims, alpha=SIGNIFICANCE)
    out = [Look(FIRST_SEEDS, SIGNIFICANCE, (), len(first), len(first), tuple(tests))]
    have = {(r["method"], r["seed"]) for r in records}
    start = FIRST_SEEDS
    for n in LOOKS:
        open_ = [t.claim for t in out[-1].tests if t.verdict == UNRESOLVED]
        if not open_:
            break
        losses = tuple(dict.fromkeys(m for c in open_ for m in (c.better, c.worse)))
        wanted = {(m, s) for m in losses for s in range(start, n)}
        upto = [r for r in records if r["seed"] < n]
        look = Look(n, LOOK_ALPHA, losses, len(wanted & have), len(wanted),
                    tuple(claim_tests(upto, open_, alpha=LOOK_ALPHA)))
        out.append(look)
        if not look.complete:
            break
        start = n
    return out


class Status(NamedTuple):
    test: ClaimTest  # the test of the last complete look that tested the claim: its verdict and n
    look: str  # that look's status, or the pending look's while one is partial


def claim_status(records: Records, claims: Sequence[Claim] = CLAIMS) -> list[Status]:
    """Every tested claim, in the order of ``claims``: its verdict and n from the last complete look that tested
    it, and the look that stands (a partial look's 'provisional, k of N runs done', or the deciding look's)."""
    found = looks(records, claims)
    final: dict[str, tuple[ClaimTest, Look]] = {}
    pending: dict[str, Look] = {}
    for look in found:
        for t in look.tests:
            if look.complete:
                final[_label(t.claim)] = (t, look)
            else:
                pending[_label(t.claim)] = look
    return [Status(t, (pending.get(label) or look).status) for label, (t, look) in final.items()]


def final_tests(records: Records, claims: Sequence[Claim] = CLAIMS) -> list[ClaimTest]:
    """Each claim's test from the last complete look that tested it (what the verdicts and the headline read)."""
    return [s.test for s in claim_status(records, claims)]


def pending_look(records: Records, claims: Sequence[Claim] = CLAIMS) -> Look | None:
    """The look in progress (some but not all of its runs done, or none yet), if any."""
    last = looks(records, claims)[-1]
    return None if last.complete else last


def primary_rows(statuses: Sequence[Status]) -> list[list[str]]:
    """The primary table's rows: a claim's row of its deciding test (:func:`claims_table_rows`) with the look
    that stands inserted before the verdict."""
    return [row[:-1] + [s.look, row[-1]] for s, row in zip(statuses, claims_table_rows([s.test for s in statuses]))]


def looks_section(records: Records, claims: Sequence[Claim] = CLAIMS) -> str:
    """Markdown: the further looks with runs so far, claim by claim, with the numbers as they are; a partial look's
    p and verdict are not given (it decides nothing until all its runs are done)."""
    later = [look for look in looks(records, claims)[1:] if look.done]  # a look with no run yet has nothing new
    if not later:
        return ""
    rows = []
    for look in later:
        for t in look.tests:
            tested = ((fmt_p(t.test.p), fmt_p(t.p_holm), f"{look.alpha:g}", t.verdict) if look.complete
                      else ("—", "—", f"{look.alpha:g}", "— (provisional)"))
            rows.append([f"{t.claim.better} > {t.claim.worse}", t.claim.family, look.status, str(t.test.n),
                         delta_cell(t.interval), *tested])
    seeds = ", ".join(f"{look.n}: {', '.join(look.losses)}" for look in later)
    return "\n\n".join([
        f"**The plan's looks so far** (the losses each look adds seeds of, by look n = {seeds}). A look decides only "
        "once all its runs are done; until then its Δ is shown over the seeds both losses have so far, without p "
        "or verdict, and the primary table keeps the verdict of the last complete look.",
        table(["claim", "family", "look", "n (paired seeds so far)", "Δ mAP@R (pt) [95 % CI]", "p", "p (Holm)",
               "α", "verdict"], rows)])
