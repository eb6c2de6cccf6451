"""A view: the reproduction study's verdicts as short Markdown for the notebooks and plain rows for the dashboard
(the same rules and numbers as docs/results.md, computed from ``results/*.json`` at call time, never typed in).

A study that protocol v2 re-runs (whole test split, 5 seeds, the pilot's budget) is read from
``results/v2/`` once all its v2 runs are done, as on the page; until then from v1's file, with a
line saying how far v2 has got.

* :func:`study_verdict`: a study's claim, what was measured, the verdict and, when the claim does
  not hold at this scale, the most likely reasons.
* :func:`reproduction_rows`: its settings as mean ± std over seeds, for a notebook's table.
* :func:`claims_table`: paired comparisons (Δ in points, t, p, verdict) of chosen methods of a study.
* :func:`claims_rows` / :func:`claims_markdown`: the papers' claims a study tests, as on the page's primary
  table (Holm within each family): plain dicts (the dashboard's Reproduction view) or Markdown (the notebooks).
* :func:`study_details`: a study's tables and figures, as on the page (the dashboard's Reproduction view).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ...experiments.cached import rows_of
from .paper_claims import CLAIMS_HEADER, claim_records, claim_tests, claims_table_rows
from .section import comparison_rows
from .stats import table
from .study_sections import analyse, every_seed, read_study, section_figures


def study_verdict(name: str, results: Optional[Path] = None) -> str:
    """Markdown: study ``name``'s paper claim, measured numbers, verdict (and reasons if it does not
    reproduce), with the file and the command; a line saying so when the study was not run."""
    records, protocol, note = read_study(name, results)
    if not records:
        return f"The reproduction study has no full-mode results for `{name}` (`python -m lab study {name}`).{note}"
    s = analyse(name, records, protocol, every_seed(name, records, protocol, results))
    seeds = len({r["seed"] for r in records})
    why = "" if s.verdict == "reproduces" or not s.if_not else f" Most likely reasons: {s.if_not}"
    where, flag = ("v2/", " --protocol v2") if protocol == "v2" else ("", "")
    return (f"**Reproduction study, protocol {protocol}** (`results/{where}{name}.json`, {seeds} seeds, "
            f"`python -m lab study {name}{flag}`).{note} *Paper:* {s.claim}\n\n*Measured:* {s.measured}. "
            f"**Verdict: {s.verdict}.**{why}")


def reproduction_rows(name: str, losses: Optional[Sequence[str]] = None, results: Optional[Path] = None,
                      **match: Any) -> list[dict[str, Any]]:
    """Study ``name``'s settings as mean ± std over seeds (rows of :func:`lab.experiments.cached.study_rows`)
    from the records :func:`study_verdict` reads: v2's once the study is complete under v2, else v1's.
    ``losses`` keeps those losses' rows, in that order; ``match`` some settings (``batch_size=32``)."""
    records, protocol, _ = read_study(name, results)
    rows = rows_of(records, f"v2/{name}" if protocol == "v2" else name, **match)
    if losses is None:
        return rows
    have = {r["loss"] for r in rows}
    missing = [loss for loss in losses if loss not in have]
    if missing:
        raise ValueError(f"losses: study {name!r} has no runs of {missing}; it has {sorted(have)}")
    return [r for loss in losses for r in rows if r["loss"] == loss]


def claims_table(name: str, claims: Sequence[tuple[str, str, str, str]], results: Optional[Path] = None) -> str:
    """Markdown table of paired t-tests over seeds, one line per (source, better method, base
    method, metric), from study ``name``'s records (see :func:`.section.comparison_rows`)."""
    records, protocol, note = read_study(name, results)
    rows, _ = comparison_rows(records, claims)
    seeds = len({r["seed"] for r in records})
    where = "v2/" if protocol == "v2" else ""
    # v2's page corrects each family of tests (Holm); a row here is one test, as v1's page reads them.
    rule = (f" Each row is its own paired t-test at p < 0.05, not corrected for the {len(rows)} rows tested together "
            "(docs/results.md's protocol v2 verdicts are Holm-corrected over their family of comparisons)."
            if protocol == "v2" and len(rows) > 1 else "")
    return (f"Protocol {protocol} (`results/{where}{name}.json`, {seeds} seeds).{rule}{note}\n\n"
            + table(["claim", "metric", "Δ (pt)", "t", "p", "verdict"], rows))


def study_details(name: str, results: Optional[Path] = None) -> tuple[str, list[Any]]:
    """(Markdown tables, matplotlib figures) of study ``name``'s section of docs/results.md, from the
    records :func:`study_verdict` reads; ("", []) when the study has no full-mode results."""
    records, protocol, _ = read_study(name, results)
    if not records:
        return "", []
    body = analyse(name, records, protocol, every_seed(name, records, protocol, results)).body
    return body, list(section_figures(name, records, protocol).values())


def _claim_tests(name: str, results: Optional[Path], families: Optional[Sequence[str]]) -> tuple[list, str, int]:
    records, protocol, _ = read_study(name, results)
    if name != "methods" or not records:  # the claims of one loss beating another are study 1's
        return [], protocol, 0
    # Holm over each whole family, as on the page, before any row is left out; seeds 0-4 (the primary verdicts)
    tests = claim_tests(records)
    keep = [t for t in tests if families is None or t.claim.family in families]
    return keep, protocol, len({r["seed"] for r in records})


def claims_rows(name: str, results: Optional[Path] = None,
                families: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    """The papers' claims study ``name`` tests, one dict per test of a claim as in the page's primary table:
    family, claim, metric, source, the paper's numbers, Δ on the metric and its 95 % interval (points), p, Holm p
    within the family, n, verdict. Read where :func:`study_verdict` reads; [] for a study that tests no such claim."""
    return claim_records(_claim_tests(name, results, families)[0])


def claims_markdown(name: str, families: Optional[Sequence[str]] = None, results: Optional[Path] = None) -> str:
    """The page's primary table of study ``name`` (the rows of ``families``, default all), with the line that
    says which protocol's runs it reads; Holm is over each whole family, whichever rows are shown."""
    tests, protocol, seeds = _claim_tests(name, results, families)
    if not tests:
        return f"No claims of the papers measured in `{name}` yet (`python -m lab study {name}`)."
    where = "v2/" if protocol == "v2" else ""
    return (f"Protocol {protocol} (`results/{where}{name}.json`, {seeds} seeds): mAP@R (and R@1 for supp. B.4's "
            "claims), paired t-test, Holm over each family of the papers' claims (docs/results.md, study 1; the "
            "families were chosen after the results were seen: the page's deviations from the protocol).\n\n"
            + table(CLAIMS_HEADER, claims_table_rows(tests)))
