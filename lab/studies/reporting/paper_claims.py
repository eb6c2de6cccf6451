"""The claims the papers make about which loss is better, as data, and their tests (protocol v2's primary table).

A claim is one sentence or table step of a paper that says loss A beats loss B: ROADMAP's supplementary B.4
(ROADMAP against each baseline, 5 runs, paired t-test on "both the R@1 and mAP@R", p <= 0.001), ROADMAP's
ablation (Table 2), SupRank's Table II (its ablation) and Table I ("ROADMAP outperforms all the current AP
approximations"). The row order of the papers' tables is not a claim: the papers' own numbers do not keep it
across settings (:func:`below_in`). Each claim is tested on the metrics its paper tests it on (mAP@R, the
primary metric; B.4's claims on R@1 too) by a two-sided paired t-test over the seeds both losses have,
Holm-corrected over every test of its family (metrics x claims), and gets one of three verdicts; a claim of two
metrics is contradicted when either is, holds when both do. The families were chosen from the papers' text
after the results were seen (dcab6d1; B.4's R@1 and SupRank Table I in issue 43): the page lists them among
the deviations from the protocol.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, NamedTuple, Sequence

from .error_rates import family_error
from .stats import (CONTRADICTED, HOLDS, SIGNIFICANCE, UNRESOLVED, Interval, Records, TTest, claim_verdict, fmt_p,
                    holm, paired, paired_interval, paired_ttest)


Numbers = tuple[tuple[str, float, float], ...]  # (dataset, better's value, worse's value), the paper's


class Claim(NamedTuple):
    family: str
    better: str  # the study's method labels (spec.METHODS; a planned one: spec.PLANNED_METHODS)
    worse: str
    source: str  # paper, table, setting
    paper: Numbers  # mAP@R
    metrics: tuple[str, ...] = ("mAP@R",)  # the metrics its paper tests it on
    paper_r1: Numbers = ()  # R@1, where ``metrics`` has it

    def numbers(self, metric: str) -> Numbers:
        return self.paper_r1 if metric == "R@1" else self.paper


# Why each family is one family: the claims a paper makes in one sentence or one table, to answer one question.
FAMILIES: dict[str, str] = {
    "ROADMAP vs each baseline": "ROADMAP supp. B.4 tests these four comparisons together, on \"both the R@1 and "
                                "mAP@R\": ROADMAP against each AP loss of supp. Table 4, paired t-test over 5 runs, "
                                "every p ≤ 0.001",
    "ablation": "ROADMAP Table 2's two steps from SmoothAP, one per contribution of the paper (H⁻, then L_calibr.)",
    "SupRank Table II": "SupRank Table II, a later paper's ablation: its rank surrogate on the recall loss, ROADMAP's "
                        "decomposability loss in its proxy form L_DG*, and (declared, not yet run) ROD-R@k, the recall "
                        "loss with L_DG",
    "SupRank Table I": "SupRank Table I and Sec. VII-A1: ROADMAP (Sup-AP + L_DG*) \"outperforms all the current AP "
                       "approximations by a large margin\", one statement over the table's four AP losses",
}
_T4 = "ROADMAP supp. Table 4 (ResNet-50, B = 128, 5 runs; B.4: paired t, p ≤ 0.001)"
_T4_R1 = {"FastAP": (61.28, 78.97, 57.23), "SoftBinAP": (61.70, 80.30, 60.88), "BlackBoxAP": (61.96, 80.97, 59.53),
          "SmoothAP": (62.45, 81.13, 64.48), "ROADMAP": (64.05, 82.20, 68.15)}  # supp. Table 4, CUB / SOP / iNat


def _t4(worse: str, cub: float, sop: float, inat: float) -> Claim:
    r1 = tuple((d, b, w) for d, b, w in zip(("CUB", "SOP", "iNat"), _T4_R1["ROADMAP"], _T4_R1[worse]))
    return Claim("ROADMAP vs each baseline", "ROADMAP", worse, _T4,
                 (("CUB", 25.27, cub), ("SOP", 56.64, sop), ("iNat", 27.01, inat)), ("mAP@R", "R@1"), r1)


_TI = "SupRank Table I (ResNet-50, B = 256)"
_TI_ROADMAP = (("SOP", 55.7), ("iNat", 29.5))  # ROADMAP's row of SupRank Table I: Sup-AP + L_DG* (Table II)


def _ti(worse: str, sop: float, inat: float) -> Claim:
    return Claim("SupRank Table I", "ROADMAP (L_DG*)", worse, _TI,
                 tuple((d, b, w) for (d, b), w in zip(_TI_ROADMAP, (sop, inat))))


CLAIMS: tuple[Claim, ...] = (
    _t4("FastAP", 24.11, 52.23, 22.17), _t4("SoftBinAP", 24.29, 53.69, 23.22),
    _t4("BlackBoxAP", 23.83, 54.49, 19.62), _t4("SmoothAP", 24.32, 54.74, 24.33),
    Claim("ablation", "SupAP", "SmoothAP", "ROADMAP Table 2, H⁻ (ResNet-50, B = 64)",
          (("CUB", 24.6, 23.9), ("SOP", 55.3, 54.6), ("iNat", 21.3, 20.7))),
    Claim("ablation", "ROADMAP", "SupAP", "ROADMAP Table 2, L_calibr. (ResNet-50, B = 64)",
          (("CUB", 25.3, 24.6), ("SOP", 56.5, 55.3), ("iNat", 25.1, 21.3))),
    Claim("SupRank Table II", "Sup-R@k", "Smooth-R@k", "SupRank Table II (ResNet-50, B = 256)",
          (("SOP", 54.2, 53.7), ("iNat", 26.4, 25.5))),
    Claim("SupRank Table II", "ROADMAP (L_DG*)", "SupAP", "SupRank Table II, L_DG* (ResNet-50, B = 256)",
          (("SOP", 55.7, 54.8), ("iNat", 29.5, 27.5))),
    Claim("SupRank Table II", "ROD-R@k", "Sup-R@k", "SupRank Table II, L_DG (ResNet-50, B = 256)",
          (("SOP", 56.6, 54.2), ("iNat", 27.0, 26.4))),
    _ti("FastAP", 50.5, 24.0), _ti("SoftBinAP", 52.7, 25.4), _ti("BlackBoxAP", 53.1, 15.2), _ti("SmoothAP", 54.3, 26.5),
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
    diffs: list[float]  # better - worse on ``metric``, per seed both have (a fraction)
    interval: Interval
    test: TTest
    p_holm: float  # Holm over every test of the claim's family
    verdict: str
    metric: str = "mAP@R"


def _run_methods(records: Records) -> set[str]:
    """The methods with a run on every seed that most methods of ``records`` share: a loss part-way through its
    declared runs (ROD-R@k's first 2 seeds of 5, say) is not tested yet, as a test on fewer seeds is not the one
    declared; a loss with a seed more than the others is."""
    seeds: dict[str, frozenset] = {}
    for r in records:
        seeds[r["method"]] = seeds.get(r["method"], frozenset()) | {r["seed"]}
    if not seeds:
        return set()
    common = Counter(seeds.values()).most_common(1)[0][0]
    return {m for m, s in seeds.items() if s >= common}


def claim_tests(records: Records, claims: Sequence[Claim] = CLAIMS, alpha: float = SIGNIFICANCE) -> list[ClaimTest]:
    """Every claim whose two methods have run on every seed of ``records``, in the order of ``claims``, tested on
    each of its metrics (paired by seed), with Holm over the tests of its family (metrics x claims), resolved at
    level ``alpha``."""
    methods = _run_methods(records)
    present = [(c, m) for c in claims if c.better in methods and c.worse in methods for m in c.metrics]
    raw = []
    for c, metric in present:
        a, b = paired(records, metric, {"method": c.better}, {"method": c.worse})
        raw.append(([x - y for x, y in zip(a, b)], paired_ttest(a, b)))
    adjusted: list[float] = [math.nan] * len(present)
    for family in dict.fromkeys(c.family for c, _ in present):
        idx = [i for i, (c, _) in enumerate(present) if c.family == family]
        for i, p in zip(idx, holm([raw[i][1].p for i in idx])):
            adjusted[i] = p
    return [ClaimTest(c, d, paired_interval(d), t, p, claim_verdict(paired_interval(d).mean, p, alpha), metric)
            for (c, metric), (d, t), p in zip(present, raw, adjusted)]


def planned_claims(records: Records, claims: Sequence[Claim] = CLAIMS) -> list[Claim]:
    """The claims a loss of which has not run on every seed yet (declared, with their runs planned; not tested)."""
    methods = _run_methods(records)
    return [c for c in claims if c.better not in methods or c.worse not in methods]


def claim_verdicts(tests: Sequence[ClaimTest]) -> list[tuple[Claim, str]]:
    """Each tested claim once, in order, with its verdict over its metrics: contradicted when one metric is, as
    in the paper when every metric is, otherwise not resolved."""
    out: dict[Claim, list[str]] = {}
    for t in tests:
        out.setdefault(t.claim, []).append(t.verdict)
    return [(c, CONTRADICTED if CONTRADICTED in v else HOLDS if set(v) == {HOLDS} else UNRESOLVED)
            for c, v in out.items()]


def _pt(x: float) -> str:
    return f"{100 * x:+.2f}"


def delta_cell(i: Interval) -> str:
    """'+1.95 [-0.26, +4.15]': the mean paired difference in points with its 95 % t interval."""
    return _pt(i.mean) if i.n < 2 else f"{_pt(i.mean)} [{_pt(i.low)}, {_pt(i.high)}]"


def paper_cell(c: Claim, metric: str = "mAP@R") -> str:
    return "; ".join(f"{d} {b:g} vs {w:g}" for d, b, w in c.numbers(metric))


def label(c: Claim, metric: str = "mAP@R") -> str:
    """'ROADMAP > SoftBinAP', with the metric when it is not the primary one: 'ROADMAP > SoftBinAP (R@1)'."""
    return f"{c.better} > {c.worse}" + ("" if metric == "mAP@R" else f" ({metric})")


def said(t: ClaimTest) -> str:
    """The test as the measurement reads: 'ROADMAP > SmoothAP', or 'FastAP > ROADMAP (R@1)' when contradicted."""
    c = t.claim
    flipped = Claim(c.family, c.worse, c.better, c.source, c.paper) if t.verdict == CONTRADICTED else c
    return label(flipped, t.metric)


def _holds(n: int) -> str:
    return f"{n} {'holds' if n == 1 else 'hold'}"


def claims_headline(tests: Sequence[ClaimTest]) -> str:
    """'of the papers' 12 claims, 6 hold, 3 contradicted (FastAP > ROADMAP, ...), 3 not resolved': each claim once,
    with its verdict over its metrics (:func:`claim_verdicts`)."""
    verdicts = claim_verdicts(tests)
    against = [f"{c.worse} > {c.better}" for c, v in verdicts if v == CONTRADICTED]
    return (f"of the papers' {len(verdicts)} claim{'' if len(verdicts) == 1 else 's'}, "
            f"{_holds(sum(v == HOLDS for _, v in verdicts))}, "
            f"{len(against)} contradicted" + (f" ({', '.join(against)})" if against else "")
            + f", {sum(v == UNRESOLVED for _, v in verdicts)} not resolved")


def claim_records(tests: Sequence[ClaimTest]) -> list[dict[str, Any]]:
    """The tests as plain dicts (the dashboard's Reproduction view): points for Δ and its interval; a test on
    another metric than mAP@R names it in its claim ('ROADMAP > SoftBinAP (R@1)')."""
    return [{"family": t.claim.family, "claim": label(t.claim, t.metric), "metric": t.metric,
             "source": t.claim.source,
             "paper": [{"dataset": d, "better": b, "worse": w} for d, b, w in t.claim.numbers(t.metric)],
             "delta": 100 * t.interval.mean, "low": 100 * t.interval.low, "high": 100 * t.interval.high,
             "p": t.test.p, "p_holm": t.p_holm, "n": t.test.n, "verdict": t.verdict} for t in tests]


CLAIMS_HEADER = ["family", "claim", "metric", "source", "paper (better vs worse)", "Δ (pt) [95 % CI]", "p",
                 "p (Holm)", "n", "verdict"]


def claims_table_rows(tests: Sequence[ClaimTest], planned: Sequence[Claim] = ()) -> list[list[str]]:
    """Rows of :data:`CLAIMS_HEADER`: each test, then each claim ``planned`` (declared, not yet run)."""
    rows = [[t.claim.family, f"{t.claim.better} > {t.claim.worse}", t.metric, t.claim.source,
             paper_cell(t.claim, t.metric), delta_cell(t.interval), fmt_p(t.test.p), fmt_p(t.p_holm), str(t.test.n),
             t.verdict] for t in tests]
    for c in planned:  # after its family's last row
        at = max((i + 1 for i, row in enumerate(rows) if row[0] == c.family), default=len(rows))
        rows[at:at] = [[c.family, f"{c.better} > {c.worse}", m, c.source, paper_cell(c, m), "—", "—", "—", "0",
                        "not yet run"] for m in c.metrics]
    return rows


def families_text(tests: Sequence[ClaimTest]) -> str:
    """The families of the tested claims, each with its size (its tests: claims x metrics), its reason, and the
    chance, simulated, that Holm over it resolves a claim when every loss is equal (:func:`.error_rates.family_error`,
    the family's own losses and metrics)."""
    mine: dict[str, list[ClaimTest]] = {}
    for t in tests:
        mine.setdefault(t.claim.family, []).append(t)
    return "\n".join(
        f"- *{f}* (Holm over {len(ts)}; simulated chance of resolving one of them when all are null: "
        f"{family_error([(t.claim.better, t.claim.worse, t.metric) for t in ts], max(t.test.n for t in ts))}): "
        f"{FAMILIES[f]}." for f, ts in mine.items())
