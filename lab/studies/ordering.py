"""Protocol v2's study 1: do the AP losses come in the paper's order? And the pilot that fixed its budget.

The paper ranks them FastAP < SoftBinAP < BlackBoxAP < SmoothAP < SupAP < ROADMAP (ROADMAP supp.
Table 4, 5 runs, paired t-tests). Here each adjacent pair gets:
- the paired difference of mAP@R (the primary metric; R@1 is secondary) over the seeds;
- its 95 % interval;
- a verdict by the rule of ``stats.adjacent_verdict``, fixed before the results: Holm-corrected
  over the 5 pairs, family-wise alpha = 0.05.
SupRank's two claims on the other losses form a second family, corrected the same way.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..core.hparams import DELTA, TAU
from .claims import PAPER_METHODS, Section, points, table
from .spec import PAPER_ORDER, PILOT_FIRST_STEPS, PLATEAU_GAIN, PLATEAU_WINDOW
from .stats import (RESOLVED, REVERSED, UNRESOLVED, Records, adjacent_pairs, fmt, fmt_p, holm, mean_std, paired,
                    paired_interval, paired_ttest, adjacent_verdict, seed_ranks, summarise)

SUPRANK_CLAIMS = [("SupRank T. II", "Sup-R@k", "Smooth-R@k"), ("SupRank T. II, L_DG*", "ROADMAP (L_DG*)", "SupAP")]


def _interval(values: Sequence[float]) -> str:
    i = paired_interval(values)
    if i.n < 2:
        return points(mean_std(values))
    return f"{100 * i.mean:+.2f} [{100 * i.low:+.2f}, {100 * i.high:+.2f}]"


def pair_rows(records: Records, order: Sequence[str] = PAPER_ORDER) -> tuple[list[list[str]], list[dict]]:
    """Rows of the adjacent-pairs table (mAP@R with its interval, R@1, t, p, Holm p, verdict)."""
    pairs = adjacent_pairs(records, order, "mAP@R")
    r1 = {(r["better"], r["worse"]): r for r in adjacent_pairs(records, order, "R@1")}
    rows = []
    for r in pairs:
        t = "—" if math.isnan(r["test"].t) else f"{r['test'].t:.2f}"
        rows.append([f"{r['better']} > {r['worse']}", _interval(r["diffs"]),
                     _interval(r1[r["better"], r["worse"]]["diffs"]), t, fmt_p(r["test"].p), fmt_p(r["p_holm"]),
                     r["verdict"]])
    return rows, pairs


def suprank_rows(records: Records) -> list[list[str]]:
    methods = {r["method"] for r in records}
    claims = [c for c in SUPRANK_CLAIMS if c[1] in methods and c[2] in methods]
    tests = []
    for _, better, worse in claims:
        a, b = paired(records, "mAP@R", {"method": better}, {"method": worse})
        tests.append(([x - y for x, y in zip(a, b)], paired_ttest(a, b)))
    rows = []
    for (source, better, worse), (diffs, test), p in zip(claims, tests, holm([t.p for _, t in tests])):
        rows.append([f"{better} > {worse} ({source})", _interval(diffs), fmt_p(test.p), fmt_p(p),
                     adjacent_verdict(mean_std(diffs).mean, p)])
    return rows


def measured_order(records: Records, order: Sequence[str] = PAPER_ORDER) -> list[str]:
    """The methods of ``order`` from the worst to the best measured mean mAP@R."""
    return sorted(order, key=lambda m: summarise(records, "mAP@R", method=m).mean)


def analyse_methods_v2(records: Records) -> Section:
    methods = list(dict.fromkeys(r["method"] for r in records))
    order = [m for m in PAPER_ORDER if m in methods]
    ranks = seed_ranks(records, order, "mAP@R")
    rows = []
    for m in methods:
        ref = PAPER_METHODS.get(m)
        s = summarise(records, "mAP@R", method=m)
        rank = mean_std(ranks[m]) if m in ranks else None
        rows.append([m, fmt(summarise(records, "R@1", method=m)), fmt(s, digits=2),
                     f"{order.index(m) + 1} of {len(order)}" if m in order else "—",
                     f"{rank.mean:.1f} ± {rank.std:.1f}" if rank and rank.n > 1 else "—",
                     f"{ref[0]} / {ref[1]} ({ref[2]})" if ref else "—"])
    pair_table, pairs = pair_rows(records, order)
    measured = measured_order(records, order)
    resolved = sum(p["verdict"] == RESOLVED for p in pairs)
    reversed_ = sum(p["verdict"] == REVERSED for p in pairs)
    agrees = measured == list(order)
    verdict = ("reproduces" if resolved == len(pairs) else
               f"{resolved} of {len(pairs)} adjacent pairs resolved as in the paper, {reversed_} reversed")
    counts = sorted({len(p["diffs"]) for p in pairs})  # seeds both losses of a pair have: the paired n
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    body = "\n\n".join([
        table(["method", "R@1", "mAP@R", "paper order (1 = worst)", "measured rank per seed (1 = best)",
               "paper R@1 / mAP@R"], rows),
        f"Measured order by mean mAP@R, worst first: {' < '.join(measured)}. Paper: {' < '.join(order)}. "
        + ("They agree." if agrees else "They differ."),
        f"Adjacent pairs in the paper's order: paired differences over the n = {n} seeds both losses have (same seed = same initial "
        "weights, batches and augmentations), in points, with 95 % t intervals; two-sided paired t-test; Holm's "
        f"correction over the {len(pairs)} pairs. Rule, fixed before the results: a pair is resolved when its "
        "Holm-adjusted p is below 0.05, in the paper's direction when the mean difference is positive. (An "
        "interval can exclude 0 while the Holm-adjusted p stays above 0.05: the interval is per pair, the "
        "verdict is corrected for testing five.)",
        table(["paper: better > worse", "Δ mAP@R (pt) [95 % CI]", "Δ R@1 (pt) [95 % CI]", "t", "p", "p (Holm)",
               "verdict"], pair_table)])
    supr = suprank_rows(records)
    if supr:
        body += "\n\nSupRank's claims on the other losses, a second family (Holm over its 2 comparisons):\n\n" + \
            table(["claim", "Δ mAP@R (pt) [95 % CI]", "p", "p (Holm)", "verdict"], supr)
    claim = ("FastAP < SoftBinAP < BlackBoxAP < SmoothAP < SupAP < ROADMAP (ROADMAP supp. Table 4 on CUB, SOP and "
             "iNaturalist, ResNet-50, B = 128, 5 runs; every difference with ROADMAP at paired p ≤ 0.001, supp. B.4). "
             "SupRank Table II (SOP): Sup-R@k > Smooth-R@k; ROADMAP with L_DG* > Sup-AP.")
    headline = (f"{resolved} of {len(pairs)} adjacent pairs resolved as in the paper, {reversed_} reversed, "
                f"{len(pairs) - resolved - reversed_} not resolved (mAP@R, Holm-corrected, n = {n}); measured order "
                f"{'agrees with' if agrees else 'differs from'} the paper's")
    if_not = why_not_v2(records, pairs, order)
    return Section("1. Rank losses compared (ROADMAP Tables 1-2, supp. Table 4; SupRank Tables I-II)", claim,
                   headline, verdict, body, if_not)


def _kernel_widths() -> dict[str, float]:
    """Half-support, in cosine score, of the bin kernel of each histogram loss at its default
    (FastAP bins squared distances 2 - 2s in [0, 4], SoftBinAP the scores in [-1, 1])."""
    from ..losses import FastAP, SoftBinAP
    from ..losses.base import constructor_parameters

    def bins(cls: type) -> int:
        return constructor_parameters(cls)["num_bins"].default

    return {"FastAP": 2.0 / bins(FastAP), "SoftBinAP": 2.0 / (bins(SoftBinAP) - 1)}


def why_not_v2(records: Records, pairs: Sequence[dict], order: Sequence[str]) -> str:
    """The most likely reasons, from the pairs' verdicts: why pairs stay unresolved, and what the
    reversed pairs have in common (the histogram losses), with the numbers that make the case."""
    parts = []
    unresolved = [f"{p['better']} > {p['worse']}" for p in pairs if p["verdict"] == UNRESOLVED]
    if unresolved:
        parts.append(
            f"Not resolved ({', '.join(unresolved)}): the papers' differences between adjacent AP losses are "
            "0.2-1 point of mAP@R with a pretrained ResNet-50 after 100+ epochs. Here a small CNN is trained from "
            "scratch, to the plateau of one loss, on glyphs: a pair is resolved only when its difference is "
            "several times the paired seed-to-seed spread over 5 seeds.")
    flipped = [p for p in pairs if p["verdict"] == REVERSED]
    if not flipped:
        return " ".join(parts)
    widths = _kernel_widths()
    said = "; ".join(f"{p['worse']} > {p['better']} by {-100 * mean_std(p['diffs']).mean:.1f} pt of mAP@R, in "
                     f"{sum(d < 0 for d in p['diffs'])} of {len(p['diffs'])} seeds" for p in flipped)
    text = f"Reversed ({said}). "
    histogram = [m for m in widths if m in order]
    if all(p["worse"] in widths or p["better"] in widths for p in flipped):
        others = [m for m in order if m not in widths]
        measured = measured_order(records, order)
        rest = [m for m in measured if m not in widths]
        tau = TAU.default  # SmoothAP's, SupAP's and ROADMAP's (the papers' value)
        fade = tau * math.log((1 + math.sqrt(0.95)) / (1 - math.sqrt(0.95)))  # sigma' = 5 % of its peak
        on_top = set(measured[-len(histogram):]) == set(histogram)
        text += (
            f"{'Both reversals involve' if len(flipped) == 2 else 'Every reversal involves'} the histogram losses "
            f"({', '.join(histogram)}), {'which come out on top here' if on_top else 'ranked higher here than in the paper'}; "
            f"without them the measured order of the other {len(others)} "
            + ("is the paper's" if rest == others else f"is {' < '.join(rest)}, the paper's {' < '.join(others)}")
            + ". In `lab` the two are one histogram AP (`binned_ap_loss`) with different triangular kernels ("
            + " and ".join(f"{m}'s reaches {w:.3f}" for m, w in widths.items())
            + " of cosine score on each side of a bin centre, so the bins cover every score and nearly every item "
            f"of a list gets a gradient); the sigmoid of SmoothAP, SupAP and ROADMAP (τ = {tau}) falls below 5 % "
            f"of its peak slope beyond a score difference of {fade:.3f} (SupAP's H⁻ adds a linear part only for a "
            f"negative more than δ = {DELTA.default} above a positive). A hypothesis this study does not test: "
            "a small CNN trained from scratch starts from unsorted lists, where a gradient on every item counts "
            "most, while the papers' ResNet-50 starts pretrained, with lists already nearly sorted. A pretrained "
            "backbone (`docs/reproduce-on-gpu.md`) would test it.")
    return " ".join(parts + [text.strip()])


def pilot_section(data: dict[str, Any]) -> str:
    """Markdown: the pilot's curve as a table, and the plateau step of the rule."""
    curve = data.get("curve", [])
    if not curve:
        return "**The pilot has not run yet** (`python -m lab study pilot`)."
    rows = [[p["step"], f"{100 * p['R@1']:.1f}", f"{100 * p['mAP@R']:.2f}"] for p in curve]
    plateau = data.get("plateau_step")
    cfg = data["config"]
    return "\n\n".join([
        f"**Pilot** (`python -m lab study pilot`, `results/v2/pilot.json`): {cfg['loss']} (the papers' best), seed "
        f"{cfg['seed']}, the v2 budget otherwise, evaluated on the whole test split every {data['every']} steps. Rule, "
        f"fixed before the pilot ran: the budget is the first evaluated step after which mAP@R never gains more "
        f"than {100 * PLATEAU_GAIN:.1f} point at any evaluation within the next {PLATEAU_WINDOW:,} steps. "
        + (f"**Plateau from step {plateau:,}.**" if plateau is not None else "**No plateau within the pilot.**")
        + (f" The pilot was first set to {PILOT_FIRST_STEPS:,} steps, where the rule had no answer yet; it was "
           f"continued on the same trajectory (at most {cfg['steps']:,} steps) and stopped once the rule answered."
           if curve[-1]["step"] > PILOT_FIRST_STEPS else ""),
        table(["step", "R@1", "mAP@R"], rows)])
