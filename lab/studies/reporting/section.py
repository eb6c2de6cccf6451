"""What a study's section of the page says, and the comparison rows several sections share.

A section module (``claims``, ``sweeps``, ``ordering``) turns a study's raw records into a :class:`Section`:
the paper's claim, the headline numbers, the verdict a rule computes (never typed in), the Markdown body and,
when the verdict is not "reproduces", the most likely reasons. The views lay it out: the page
(``results_page``), the notebooks' and the dashboard's paragraphs (``verdicts``).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from .stats import Records, Summary, compare, fmt_p


class Section(NamedTuple):
    title: str
    claim: str  # the paper's claim, with its numbers and source
    measured: str  # one line: our headline number(s)
    verdict: str
    body: str  # Markdown: tables and comparisons
    if_not: str  # the most likely reasons when the verdict is not "reproduces"


def points(s: Summary) -> str:
    """A difference of metrics in points (percent), signed: '+1.2 ± 0.4'."""
    if s.n == 0:
        return "—"
    return f"{100 * s.mean:+.2f}" + ("" if s.n < 2 or math.isnan(s.std) else f" ± {100 * s.std:.2f}")


def comparison_rows(records: Records, claims: Sequence[tuple[str, str, str, str]]) -> tuple[list[list[str]], dict]:
    """Rows (claim, metric, Δ, t, p, verdict) for (source, better method, base method, metric)."""
    rows, results = [], {}
    for source, better, base, metric in claims:
        c = compare(records, metric, {"method": better}, {"method": base})
        results[(better, base, metric)] = c
        t = "—" if math.isnan(c["t"]) else f"{c['t']:.2f}"
        rows.append([f"{better} > {base} ({source})", metric, points(c["diff"]), t, fmt_p(c["p"]), c["verdict"]])
    return rows, results
