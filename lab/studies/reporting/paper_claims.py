"""The claims the papers make about which loss is better, as data, and their tests (protocol v2's primary table).

A claim is one sentence or table step of a paper that says loss A beats loss B: ROADMAP's supplementary B.4
(ROADMAP against each baseline, 5 runs, paired t-test, p <= 0.001), ROADMAP's ablation (Table 2) and SupRank's
(Table II). The row order of the papers' tables is not a claim: the papers' own numbers do not keep it across
settings (:func:`below_in`). Each claim is tested on mAP@R (the primary metric) by a two-sided paired t-test
over the seeds both losses have, Holm-corrected within its family (the families are fixed here, from the
papers' text, before the tests are read), and gets one of three verdicts.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

from .stats import (CONTRADICTED, HOLDS, SIGNIFICANCE, UNRESOLVED, Interval, Records, TTest, claim_verdict, fmt_p,
                    holm, paired, paired_interval, paired_ttest)


class Claim(NamedTuple):
    family: str
    better: str  # the study's method labels (spec.METHODS)
    worse: str
    source: str  # paper, table, setting
    paper: tuple[tuple[str, float, float], ...]  # (dataset, better's mAP@R, worse's mAP@R), the paper's numbers


# Why each family is one family: the claims a paper makes in one sentence or one table, to answer one question.
FAMILIES: dict[str, str] = {
    "ROADMAP vs each baseline": "ROADMAP supp. B.4 tests these four comparisons together: ROADMAP against each "
                                "AP loss of supp. Table 4, paired t-test over 5 runs, every p ≤ 0.001",
    "ablation": "ROADMAP Table 2's two steps from SmoothAP, one per contribution of the paper (H⁻, then L_calibr.)",
    "SupRank": "SupRank Table II, a later paper: its rank surrogate on the recall loss, and ROADMAP's decomposability "
               "loss in its proxy form L_DG*",
}
_T4 = "ROADMAP supp. Table 4 (ResNet-50, B = 128, 5 runs; B.4: paired t, p ≤ 0.001)"
CLAIMS: tuple[Claim, ...] = (
    Claim("ROADMAP vs each baseline", "ROADMAP", "FastAP", _T4,
          (("CUB", 25.27, 24.11), ("SOP", 56.64, 52.23), ("iNat", 27.01, 22.17))),
    Claim("ROADMAP vs each baseline", "ROADMAP", "SoftBinAP", _T4,
          (("CUB", 25.27, 24.29), ("SOP", 56.64, 53.69), ("iNat", 27.01, 23.22))),
    Claim("ROADMAP vs each baseline", "ROADMAP", "BlackBoxAP", _T4,
          (("CUB", 25.27, 23.83), ("SOP", 56.64, 54.49), ("iNat", 27.01, 19.62))),
    Claim("ROADMAP vs each baseline", "ROADMAP", "SmoothAP", _T4,
          (("CUB", 25.27, 24.32), ("SOP", 56.64, 54.74), ("iNat", 27.01, 24.33))),
    Claim("ablation", "SupAP", "SmoothAP", "ROADMAP Table 2, H⁻ (ResNet-50, B = 64)",
          (("CUB", 24.6, 23.9), ("SOP", 55.3, 54.6), ("iNat", 21.3, 20.7))),
    Claim("ablation", "ROADMAP", "SupAP", "ROADMAP Table 2, L_calibr. (ResNet-50, B = 64)",
          (("CUB", 25.3, 24.6), ("SOP", 56.5, 55.3), ("iNat", 25.1, 21.3))),
    Claim("SupRank", "Sup-R@k", "Smooth-R@k", "SupRank Table II (ResNet-50, B = 256)",
          (("SOP", 54.2, 53.7), ("iNat", 26.4, 25.5))),
    Claim("SupRank", "ROADMAP (L_DG*)", "SupAP", "SupRank Table II, L_DG* (ResNet-50, B = 256)",
          (("SOP", 55.7, 54.8), ("iNat", 29.5, 27.5))),
)

# R@1 and mAP@R the papers give each loss of study 1, with where (the descriptive tables' last column).
PAPER_METHODS = {  # R@1, mAP@R, where
    "FastAP": (61.28, 24.11, "CUB, supp. T4"), "SoftBinAP": (61.70, 24.29, "CUB, supp. T4"),
    "BlackBoxAP": (61.96, 23.83, "CUB, supp. T4"), "SmoothAP": (62.45, 24.32, "CUB, supp. T4"),
    "SupAP": (63.18, 24.90, "CUB, supp. T6 B=128"), "ROADMAP": (64.05, 25.27, "CUB, supp. T4"),
    "ROADMAP (L_DG*)": (81.9, 55.7, "SOP, SupRank T. II"), "Smooth-R@k": (80.5, 53.7, "SOP, SupRank T. II"),
    "Sup-R@k": (80.7, 54.2, "SOP, SupRank T. II")}

# mAP@R of the AP losses in every table of the papers that has them all (dataset x backbone settings), in
# the tables' row order; used to check what the row order says, never to test our runs.
TABLE_ROWS = ("FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "ROADMAP")
PAPER_TABLES: dict[str, tuple[float, ...]] = {
    "ROADMAP T. 1, CUB": (22.9, 24.0, 23.9, 23.9, 25.3), "ROADMAP T. 1, SOP": (51.3, 53.5, 53.1, 54.6, 56.5),
    "ROADMAP T. 1, iNat": (19.6, 20.1, 15.2, 20.7, 25.1),
    "supp. T. 4 ResNet-50, CUB": (24.11, 24.29, 23.83, 24.32, 25.27),
    "supp. T. 4 ResNet-50, SOP": (52.23, 53.69, 54.49, 54.74, 56.64),
    "supp. T. 4 ResNet-50, iNat": (22.17, 23.22, 19.62, 24.33, 27.01),
    "supp. T. 4 DeiT, CUB": (31.96, 33.57, 33.97, 34.69, 36.30),
    "supp. T. 4 DeiT, SOP": (59.06, 60.53, 60.20, 60.49, 62.73),
    "supp. T. 4 DeiT, iNat": (25.48, 27.57, 29.44, 29.56, 31.31),
    "SupRank T. I, SOP": (50.5, 52.7, 53.1, 54.3, 55.7), "SupRank T. I, iNat": (24.0, 25.4, 15.2, 26.5, 29.5)}


def below_in(lower: str, upper: str) -> tuple[int, int]:
    """(settings where the papers' mAP@R of ``lower`` is below ``upper``'s, settings): e.g. BlackBoxAP below
    SoftBinAP, though BlackBoxAP's row comes after SoftBinAP's."""
    i, j = TABLE_ROWS.index(lower), TABLE_ROWS.index(upper)
    return sum(row[i] < row[j] for row in PAPER_TABLES.values()), len(PAPER_TABLES)


def adjacent_row_differences(prefix: str = "") -> tuple[float, float]:
    """(smallest, largest) difference of mAP@R between adjacent rows (next minus previous) of the papers'
    tables whose setting starts with ``prefix``, in points."""
    diffs = [b - a for key, row in PAPER_TABLES.items() if key.startswith(prefix) for a, b in zip(row, row[1:])]
    return min(diffs), max(diffs)


class ClaimTest(NamedTuple):
    claim: Claim
    diffs: list[float]  # better - worse, per seed both have (mAP@R, fraction)
    interval: Interval
    test: TTest
    p_holm: float  # Holm within the claim's family
    verdict: str


def claim_tests(records: Records, claims: Sequence[Claim] = CLAIMS, metric: str = "mAP@R",
                alpha: float = SIGNIFICANCE) -> list[ClaimTest]:
    """Every claim whose two methods are in ``records``, in the order of ``claims``, tested on ``metric``
    (paired by seed), with Holm over the tested claims of its family, resolved at level ``alpha``."""
    methods = {r["method"] for r in records}
    present = [c for c in claims if c.better in methods and c.worse in methods]
    raw = []
    for c in present:
        a, b = paired(records, metric, {"method": c.better}, {"method": c.worse})
        raw.append(([x - y for x, y in zip(a, b)], paired_ttest(a, b)))
    adjusted: list[float] = [math.nan] * len(present)
    for family in dict.fromkeys(c.family for c in present):
        idx = [i for i, c in enumerate(present) if c.family == family]
        for i, p in zip(idx, holm([raw[i][1].p for i in idx])):
            adjusted[i] = p
    return [ClaimTest(c, d, paired_interval(d), t, p, claim_verdict(paired_interval(d).mean, p, alpha))
            for c, (d, t), p in zip(present, raw, adjusted)]


def _pt(x: float) -> str:
    return f"{100 * x:+.2f}"


def delta_cell(i: Interval) -> str:
    """'+1.95 [-0.26, +4.15]': the mean paired difference in points with its 95 % t interval."""
    return _pt(i.mean) if i.n < 2 else f"{_pt(i.mean)} [{_pt(i.low)}, {_pt(i.high)}]"


def paper_cell(c: Claim) -> str:
    return "; ".join(f"{d} {b:g} vs {w:g}" for d, b, w in c.paper)


def said(t: ClaimTest) -> str:
    """The claim as the measurement reads: 'ROADMAP > SmoothAP', or 'FastAP > ROADMAP' when contradicted."""
    c = t.claim
    return f"{c.worse} > {c.better}" if t.verdict == CONTRADICTED else f"{c.better} > {c.worse}"


def claims_headline(tests: Sequence[ClaimTest]) -> str:
    """'of the papers' 8 claims, 3 hold, 1 contradicted (FastAP > ROADMAP), 4 not resolved'."""
    held = sum(t.verdict == HOLDS for t in tests)
    against = [said(t) for t in tests if t.verdict == CONTRADICTED]
    return (f"of the papers' {len(tests)} claims, {held} hold, {len(against)} contradicted"
            + (f" ({', '.join(against)})" if against else "")
            + f", {sum(t.verdict == UNRESOLVED for t in tests)} not resolved")


def claim_records(tests: Sequence[ClaimTest]) -> list[dict[str, Any]]:
    """The tests as plain dicts (the dashboard's Reproduction view): points for Δ and its interval."""
    return [{"family": t.claim.family, "claim": f"{t.claim.better} > {t.claim.worse}", "source": t.claim.source,
             "paper": [{"dataset": d, "better": b, "worse": w} for d, b, w in t.claim.paper],
             "delta": 100 * t.interval.mean, "low": 100 * t.interval.low, "high": 100 * t.interval.high,
             "p": t.test.p, "p_holm": t.p_holm, "n": t.test.n, "verdict": t.verdict} for t in tests]


def claims_table_rows(tests: Sequence[ClaimTest]) -> list[list[str]]:
    """Rows: family, claim, source, the paper's mAP@R (better vs worse), Δ [95 % CI], p, Holm p, n, verdict."""
    return [[t.claim.family, f"{t.claim.better} > {t.claim.worse}", t.claim.source, paper_cell(t.claim),
             delta_cell(t.interval), fmt_p(t.test.p), fmt_p(t.p_holm), str(t.test.n), t.verdict] for t in tests]


def families_text(tests: Sequence[ClaimTest]) -> str:
    """The families of the tested claims, each with its size and the reason it is one family."""
    sizes: dict[str, int] = {}
    for t in tests:
        sizes[t.claim.family] = sizes.get(t.claim.family, 0) + 1
    return "\n".join(f"- *{f}* (Holm over {n}): {FAMILIES[f]}." for f, n in sizes.items())
