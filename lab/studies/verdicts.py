"""The reproduction study's verdicts as short Markdown for the notebooks (the same rules and numbers
as docs/results.md, computed from ``results/*.json`` at call time, never typed in).

* :func:`study_verdict`: a study's claim, what was measured, the verdict and, when the claim does
  not hold at this scale, the most likely reasons.
* :func:`claims_table`: paired comparisons (Δ in points, t, p, verdict) of chosen methods of a study.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from .claims import comparison_rows, table
from .cli import ROOT
from .runner import load_results

RESULTS = ROOT / "results"


def _records(name: str, results: Optional[Path]) -> list[dict]:
    from .results_page import study_records  # the page's own reading: same records, same order

    data = load_results(Path(results or RESULTS) / f"{name}.json")
    return study_records(name, data, quick=False, seeds=None) if data.get("mode") == "full" else []


def study_verdict(name: str, results: Optional[Path] = None) -> str:
    """Markdown: study ``name``'s paper claim, measured numbers, verdict (and reasons if it does not
    reproduce), with the file and the command; a line saying so when the study was not run."""
    from .results_page import ANALYSE

    records = _records(name, results)
    if not records:
        return f"The reproduction study has no full-mode results for `{name}` (`python -m lab study {name}`)."
    s = ANALYSE[name](records)
    seeds = len({r["seed"] for r in records})
    why = "" if s.verdict == "reproduces" else f" Most likely reasons: {s.if_not}"
    return (f"**Reproduction study** (`results/{name}.json`, {seeds} seeds, `python -m lab study {name}`). "
            f"*Paper:* {s.claim}\n\n*Measured:* {s.measured}. **Verdict: {s.verdict}.**{why}")


def claims_table(name: str, claims: Sequence[tuple[str, str, str, str]], results: Optional[Path] = None) -> str:
    """Markdown table of paired t-tests over seeds, one line per (source, better method, base
    method, metric), from study ``name``'s records (see :func:`lab.studies.claims.comparison_rows`)."""
    rows, _ = comparison_rows(_records(name, results), claims)
    return table(["claim", "metric", "Δ (pt)", "t", "p", "verdict"], rows)
