"""Which code trained a study's runs, for the results page: the commits and libraries each run recorded
(``lab.core.provenance``), the runs trained before records carried them, and the runs trained before a
change to a loss definition, with the test that says whether the change can move them."""
from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple, Sequence


class DefinitionChange(NamedTuple):
    commit: str
    date: str  # the commit's date, UTC, "YYYY-MM-DD HH:MM:SS": runs finished before it used the old definitions
    what: str
    evidence: str  # why a run from before stands (or must be re-run)


# Every change to what a loss computes, newest last. A run finished before a change used the definitions of
# before; the page counts those runs under each change and gives its evidence.
LOSS_DEFINITION_CHANGES: tuple[DefinitionChange, ...] = (
    DefinitionChange(
        "4e0c22f", "2026-11-26 04:18:16",
        "clamp_min → relu at the kinks of H⁻ and of the histogram kernels, in `lab/core/steps.py`",
        "on the CPU every study loss trains to bitwise the same weights with the definitions of before and of "
        "after (`tests/test_study_provenance.py`), so the change cannot move these runs"),
)


def _span(records: Sequence[dict[str, Any]]) -> str:
    ends = sorted(r["finished"][:16] for r in records if r.get("finished"))
    return f"finished {ends[0]} to {ends[-1]}" if ends else "no finishing times recorded"


def code_versions(records: Sequence[dict[str, Any]], changes: Sequence[DefinitionChange] = LOSS_DEFINITION_CHANGES
                  ) -> str:
    """One paragraph: the code versions that produced ``records`` (a study's runs, each counted once)."""
    records = list({r["key"]: r for r in records}.values())
    known = [r for r in records if r.get("provenance")]
    parts = []
    if known:
        versions = Counter((r["provenance"].get("commit") or "no git")[:7]
                           + (" with uncommitted changes to lab/" if r["provenance"].get("dirty") else "")
                           for r in known)
        setups = Counter(f"torch {r['provenance']['torch']} on {r['provenance'].get('accelerator') or r['provenance']['device']}"
                         for r in known)
        parts.append(f"{len(known)} run{'s' if len(known) != 1 else ''} recorded their code: "
                     + "; ".join(f"{n} at {v}" for v, n in versions.most_common()) + " ("
                     + "; ".join(f"{n} with {s}" for s, n in setups.most_common()) + ").")
    old = [r for r in records if not r.get("provenance")]
    if old:
        parts.append(f"{len(old)} run{'s' if len(old) != 1 else ''} trained before records carried their code "
                     f"version ({_span(old)}).")
    for change in changes:
        # A run with provenance is trained from a commit; one without, before it, by its finishing time.
        before = [r for r in records if not r.get("provenance") and r.get("finished", "") < change.date]
        if before:
            parts.append(f"{len(before)} of the {len(records)} finished before {change.commit} ({change.date[:16]}) "
                         f"changed the loss definitions ({change.what}), {len(records) - len(before)} after: "
                         f"{change.evidence}.")
    return "**Code.** " + " ".join(parts) if parts else ""
