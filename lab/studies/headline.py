"""The README's headline on the reproduction study, generated from the raw results (``results/``) with the
page's own rules, so that the README cannot say more, or other, than docs/results.md: tests/test_study_claims.py
checks that the README carries this text, word for word."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .claims import analyse_batch_size, gap_decreases
from .ordering import seed_positions
from .looks import final_tests, pending_look
from .paper_claims import claims_headline
from .spec import PAPER_ORDER
from .stats import SIGNIFICANCE, fmt_p, gains_by, mean_std
from .sweeps import analyse_bins, analyse_hparams, analyse_memory


def _listing(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def study1(records: list[dict], protocol: str = "v2", every: Optional[list[dict]] = None) -> str:
    """``every``: the runs of every seed (the power plan's looks decide the claims); default ``records``."""
    everything = records if every is None else every
    tests = final_tests(everything)
    n = sorted({t.test.n for t in tests})
    later = ("; seeds are being added to the claims not resolved, by the power plan written before their runs"
             if pending_look(everything) else "")
    histogram = [m for m in ("FastAP", "SoftBinAP") if any(r["method"] == m for r in records)]
    order = [m for m in PAPER_ORDER if any(r["method"] == m for r in records)]
    return (f"Study 1 (protocol {protocol}, {len(everything)} runs): {claims_headline(tests)} (mAP@R, paired t-test, "
            f"Holm within each family of claims, n = {n[0] if len(n) == 1 else f'{n[0]}-{n[-1]}'}{later}). The row order of the papers' tables is "
            "not a claim and is not tested; here the histogram losses take the first places by mean mAP@R ("
            f"{seed_positions(records, order, histogram)}).")


def study2(records: list[dict], protocol: str = "v2") -> str:
    gains = {b: mean_std(g).mean for b, g in gains_by(records, "batch_size").items()}
    said = ", ".join(f"{g:+.1f} % at B = {b}" for b, g in gains.items())
    return (f"Study 2 (protocol {protocol}, {len(records)} runs): ROADMAP's relative mAP@R gain over SupAP by batch "
            f"size is {said} "
            f"(verdict on the paper's trend, larger for smaller batches: {analyse_batch_size(records).verdict}).")


def study5(records: list[dict], at: int = 128) -> str:
    by_b = gap_decreases(records)
    resolved = [b for b, (_, c) in by_b.items() if c["p"] < SIGNIFICANCE and c["diff"].mean > 0]
    missed = [b for b in by_b if b not in resolved]
    text = ("Study 5 (the same runs): the calibration loss decreases the held-out decomposability gap by "
            + ", ".join(f"{d.mean:.1f} % at B = {b}" for b, (d, _) in by_b.items()))
    if resolved:
        text += f", resolved at B = {_listing([str(b) for b in resolved])} (paired p < {SIGNIFICANCE} each)"
    if missed:
        text += (" and not at B = " + _listing([f"{b} (p {fmt_p(by_b[b][1]['p'])})" for b in missed])
                 + (", the batch size of the page's verdict" if at in missed else ""))
    return text + "."


def v1_studies(bins: list[dict], memory: list[dict], hparams: list[dict]) -> str:
    parts = []
    if memory:
        m = analyse_memory(memory)
        parts.append(f"memory bank: {m.measured} ({m.verdict})")
    if bins:
        parts.append(f"number of bins: {analyse_bins(bins).verdict}")
    if hparams:
        parts.append(f"hyper-parameters: {analyse_hparams(hparams).measured}")
    return ("At v1's budget (3 seeds): " + "; ".join(parts) + ".") if parts else ""


def readme_headline(results: Optional[Path] = None) -> str:
    """The headline paragraph, from the records the page and the notebooks read (v2 for a complete v2 study)."""
    from .verdicts import _records, every_seed

    read = {name: _records(name, results) for name in ("methods", "batch_size", "gap", "bins", "memory", "hparams")}
    records = {name: r[0] for name, r in read.items()}
    parts = ["Headline, as measured (docs/results.md has every number and the reasons)."]
    if records["methods"]:
        parts.append(study1(records["methods"], read["methods"][1],
                            every_seed("methods", records["methods"], read["methods"][1], results)))
    if records["batch_size"]:
        parts.append(study2(records["batch_size"], read["batch_size"][1]))
    if records["gap"]:
        parts.append(study5(records["gap"]))
    parts.append(v1_studies(records["bins"], records["memory"], records["hparams"]))
    return " ".join(p for p in parts if p)
