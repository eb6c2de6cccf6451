"""Study 1's replication as registered: docs/plans/study1-replication.md, committed in b0a4995 (2026-11-28 18:58
UTC) before SoftBinAP's, SmoothAP's and SupAP's seeds 8-9 were trained. Data, no statistics: the hypotheses,
the seeds of each look and the claims they answer (the rule is :mod:`.sequential`'s, applied by
:mod:`.replication`).

The hypotheses are the claims of study 1 not resolved at n = 5 on mAP@R by the claims analysis as it stood at
afb24c8, each on the metrics its paper tests it on: ROADMAP supp. B.4 tests "both the R@1 and mAP@R".
"""
from __future__ import annotations

from typing import NamedTuple

PLAN = "docs/plans/study1-replication.md"
PLAN_COMMIT = "b0a4995"
SEEDS = tuple(range(5, 15))  # seeds 0-4 chose the hypotheses and never enter a replication test
LOOK_SEEDS = (tuple(range(5, 10)), tuple(range(5, 15)))  # look 1: seeds 5-9; look 2: seeds 5-14


class Hypothesis(NamedTuple):
    name: str
    better: str  # the study's method labels (spec.METHODS)
    worse: str
    metric: str
    source: str


HYPOTHESES: tuple[Hypothesis, ...] = (
    Hypothesis("H1", "ROADMAP", "SoftBinAP", "mAP@R", "ROADMAP supp. Table 4 and B.4"),
    Hypothesis("H2", "ROADMAP", "SoftBinAP", "R@1", "ROADMAP supp. Table 4 and B.4"),
    Hypothesis("H3", "SupAP", "SmoothAP", "mAP@R", "ROADMAP Table 2, H⁻"),
    Hypothesis("H4", "ROADMAP", "SupAP", "mAP@R", "ROADMAP Table 2, L_calibr."),
)
LOSSES = tuple(dict.fromkeys(m for h in HYPOTHESES for m in (h.better, h.worse)))


def claim_of(h: Hypothesis) -> str:
    """The claim a hypothesis answers: 'ROADMAP > SoftBinAP' (H1 and H2 answer one claim on two metrics)."""
    return f"{h.better} > {h.worse}"


CLAIMS = tuple(dict.fromkeys(claim_of(h) for h in HYPOTHESES))
