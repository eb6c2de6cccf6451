"""Study 1's analysis as registered with protocol v2 (99d6fb1, 2026-11-24 19:48 UTC, before any run of it), run
on the same runs, beside the claims analysis that replaced it after the results (dcab6d1).

99d6fb1's rule: each adjacent pair of the papers' row order (``spec.PAPER_ORDER``, ROADMAP supp. Table 4, worst
first) is a paired t-test on mAP@R, Holm over the 5 pairs, resolved at 0.05 in the paper's direction when the
mean difference is positive (:func:`.stats.adjacent_pairs`, :func:`.stats.adjacent_verdict`); SupRank Table II's
two claims are a second family of 2, under the same rule.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..running.spec import PAPER_ORDER
from .error_rates import family_error
from .protocol_history import registered_text, registration
from .stats import (RESOLVED, REVERSED, UNRESOLVED, Records, adjacent_pairs, adjacent_verdict, fmt_p, holm, paired,
                    paired_interval, paired_ttest, table)

COMMIT = "99d6fb1"
SUPRANK = (("Sup-R@k", "Smooth-R@k"), ("ROADMAP (L_DG*)", "SupAP"))  # 99d6fb1's SUPRANK_CLAIMS, (better, worse)


def suprank_pairs(records: Records, claims: Sequence[tuple[str, str]] = SUPRANK) -> list[dict[str, Any]]:
    """SupRank's family as 99d6fb1 tested it: the rows of :func:`.stats.adjacent_pairs`' form, Holm over them."""
    methods = {r["method"] for r in records}
    rows = []
    for better, worse in claims:
        if better in methods and worse in methods:
            a, b = paired(records, "mAP@R", {"method": better}, {"method": worse})
            diffs = [x - y for x, y in zip(a, b)]
            rows.append({"better": better, "worse": worse, "diffs": diffs, "interval": paired_interval(diffs),
                         "test": paired_ttest(a, b)})
    for row, p in zip(rows, holm([r["test"].p for r in rows])):
        row["p_holm"], row["verdict"] = p, adjacent_verdict(row["interval"].mean, p)
    return rows


def outcome(rows: Sequence[dict[str, Any]]) -> str:
    """'0 of 5 resolved as in the papers, 2 reversed, 3 not resolved'."""
    count = {v: sum(r["verdict"] == v for r in rows) for v in (RESOLVED, REVERSED, UNRESOLVED)}
    return (f"{count[RESOLVED]} of {len(rows)} resolved as in the papers, {count[REVERSED]} reversed, "
            f"{count[UNRESOLVED]} not resolved")


def registered_outcome(records: Records) -> str:
    """One line: the registered analysis's outcome on ``records`` (seeds 0-4)."""
    pairs = adjacent_pairs(records, [m for m in PAPER_ORDER if any(r["method"] == m for r in records)], "mAP@R")
    return (f"adjacent pairs of the papers' row order: {outcome(pairs)}; SupRank's family: "
            f"{outcome(suprank_pairs(records))}")


def _rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    return [[f"{r['better']} > {r['worse']}", f"{100 * r['interval'].mean:+.2f} [{100 * r['interval'].low:+.2f}, "
             f"{100 * r['interval'].high:+.2f}]", f"{r['test'].t:.2f}", fmt_p(r["test"].p), fmt_p(r["p_holm"]),
             r["verdict"]] for r in rows]


def registered_section(records: Records) -> str:
    """Markdown: the registered analysis, its rule, its error rate by simulation, its table and its outcome."""
    order = [m for m in PAPER_ORDER if any(r["method"] == m for r in records)]
    pairs = adjacent_pairs(records, order, "mAP@R")
    suprank = suprank_pairs(records)
    n = len({r["seed"] for r in records})
    err = family_error([(b, w, "mAP@R") for w, b in zip(order, order[1:])], n)
    header = ["registered pair: better > worse", "Δ mAP@R (pt) [95 % CI]", "t", "p", "p (Holm)", "verdict"]
    return "\n\n".join([
        f"**The analysis registered with protocol v2** ({registered_text(registration(COMMIT))}), "
        "on the same runs: each adjacent pair of the papers' row order ("
        f"{' < '.join(order)}, ROADMAP supp. Table 4) by a paired t-test on mAP@R over n = {n} seeds, Holm over the "
        f"{len(pairs)} pairs, resolved at 0.05 in the papers' direction when Δ > 0; SupRank Table II's 2 claims a "
        "second family under the same rule. It was replaced by the claims above after its results (dcab6d1), "
        "because the row order is not a claim the papers make; it stays here, unchanged, as the registered "
        f"primary analysis. The chance that it resolves a pair when all losses are equal, simulated: {err}.",
        table(header, _rows(pairs) + _rows(suprank)),
        f"Outcome as registered: {registered_outcome(records)}."])
