"""A view: the README's headline on the reproduction study, generated from the raw results (``results/``) with
the page's own rules, so that the README cannot say more, or other, than docs/results.md: tests/test_study_claims.py
checks that the README carries this text, word for word."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..running.spec import PAPER_ORDER
from .ordering import seed_positions
from .paper_claims import claim_tests, claims_headline
from .registered import COMMIT as REGISTERED_AT, registered_outcome
from .replication import replicate, status_line
from .stats import HOLDS, fmt_p, gains_by, mean_std
from .study_sections import every_seed, read_study
from .sweeps import analyse_bins, analyse_hparams, analyse_memory
from .trend_claims import BINS_MARGIN, TrendTest, family_headline, trend_tests


def _listing(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def study1(records: list[dict], protocol: str = "v2", every: Optional[list[dict]] = None) -> str:
    """``records``: seeds 0-4 (the primary verdicts); ``every``: the runs of every seed (the replication's)."""
    tests = claim_tests(records)
    n = sorted({t.test.n for t in tests})
    rep = replicate(records if every is None else every)  # its run count stays on the page: the README changes
    later = ("; the registered replication on seeds 5-14 is not read yet: look 1 is not complete" if not rep.results
             else f"; {status_line(rep)}")
    histogram = [m for m in ("FastAP", "SoftBinAP") if any(r["method"] == m for r in records)]
    order = [m for m in PAPER_ORDER if any(r["method"] == m for r in records)]
    return (f"Study 1 (protocol {protocol}, {len(records)} runs): {claims_headline(tests)} (mAP@R, and R@1 for supp. "
            "B.4's claims; paired t-test, Holm within each family of claims, the families chosen after the results "
            f"were seen; n = {n[0] if len(n) == 1 else f'{n[0]}-{n[-1]}'}{later}). The analysis registered with "
            f"protocol v2 ({REGISTERED_AT}) gives, for the {registered_outcome(records)}; here the histogram "
            "losses take the first places by mean mAP@R ("
            f"{seed_positions(records, order, histogram)}). Every change made after results were seen is listed "
            "with its commit on the results page.")


def study2(records: list[dict], protocol: str = "v2") -> str:
    gains = {b: mean_std(g).mean for b, g in gains_by(records, "batch_size").items()}
    said = ", ".join(f"{g:+.1f} % at B = {b}" for b, g in gains.items())
    tests = trend_tests({"batch_size": records})
    return (f"Study 2 (protocol {protocol}, {len(records)} runs): ROADMAP's relative mAP@R gain over SupAP by batch "
            f"size is {said}; ROADMAP's claim that it grows as the batch shrinks (B = 32 against 128 and 256): "
            f"{family_headline(tests, 'batch size')}; ROADMAP above SupAP at each batch size (supp. Table 6): "
            f"{family_headline(tests, 'calibration at each batch size')}.")


def study5(records: list[dict]) -> str:
    tests = trend_tests({"gap": records})
    resolved = [t for t in tests if t.verdict == HOLDS]
    other = [t for t in tests if t.verdict != HOLDS]

    def b(t: TrendTest) -> str:
        return str(t.claim.batch_size)

    text = ("Study 5 (the same runs): the calibration loss decreases the held-out decomposability gap by "
            + ", ".join(f"{t.interval.mean:.1f} % at B = {b(t)}" for t in tests))
    if tests:
        text += f"; with Holm over the {len(tests)} batch sizes, "
    if resolved:
        text += f"resolved at B = {_listing([b(t) for t in resolved])}" + (" and " if other else "")
    if other:
        text += ("" if resolved else "resolved ") + "not at B = " + _listing(
            [f"{b(t)} (Holm p {fmt_p(t.p_holm)})" for t in other])
    return text + "."


def v1_studies(bins: list[dict], memory: list[dict], hparams: list[dict]) -> str:
    parts = []
    if memory:
        m = analyse_memory(memory)
        parts.append(f"memory bank: {m.measured} ({m.verdict})")
    if bins:
        parts.append(f"FastAP's bins (10 bins against 2; within ±{BINS_MARGIN:g} point of R@1 of 5, 20 and 40, a "
                     f"margin chosen after these runs were seen): {analyse_bins(bins).verdict}")
    if hparams:
        parts.append(f"hyper-parameters: {analyse_hparams(hparams).measured}")
    return ("At v1's budget (3 seeds): " + "; ".join(parts) + ".") if parts else ""


def readme_headline(results: Optional[Path] = None) -> str:
    """The headline paragraph, from the records the page and the notebooks read (v2 for a complete v2 study)."""
    read = {name: read_study(name, results) for name in ("methods", "batch_size", "gap", "bins", "memory", "hparams")}
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
