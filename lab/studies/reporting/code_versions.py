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
        setups = Counter(f"torch {r['provenance']['torch']} on "
                         f"{r['provenance'].get('accelerator') or r['provenance']['device']}" for r in known)
        parts.append(f"{len(known)} run{'s' if len(known) != 1 else ''} recorded "
                     f"{'their' if len(known) != 1 else 'its'} code: "
                     + "; ".join(f"{n} at {v}" for v, n in versions.most_common()) + " ("
                     + "; ".join(f"{n} with {s}" for s, n in setups.most_common()) + ").")
    old = [r for r in records if not r.get("provenance")]
    if old:
        parts.append(f"{len(old)} run{'s' if len(old) != 1 else ''} trained before records carried their code "
                     f"version ({_span(old)}).")
    if known:
        full = [r for r in known if "dataset_hash" in r["provenance"]]
        parts.append(f"{len(full)} of the {len(records)} record the faiss and torchvision versions, the CPU model and "
                     "a hash of the data (fields recorded since issue 43; the older records keep theirs and stay "
                     "valid).")
    if reruns := rerun_evidence(records):
        parts.append(reruns)
    for change in changes:
        # A run with provenance is trained from a commit; one without, before it, by its finishing time.
        before = [r for r in records if not r.get("provenance") and r.get("finished", "") < change.date]
        if before:
            parts.append(f"{len(before)} of the {len(records)} finished before {change.commit} ({change.date[:16]}) "
                         f"changed the loss definitions ({change.what}), {len(records) - len(before)} after: "
                         f"{change.evidence}.")
    return "**Code.** " + " ".join(parts) if parts else ""


def rerun_evidence(records: Sequence[dict[str, Any]]) -> str:
    """What re-running stored runs showed (``curve_rerun``, written by python -m lab.studies.running.rerun_curves):
    stronger evidence than a record's fields that the stored runs are what the code trains."""
    exact = [r for r in records if (r.get("curve_rerun") or {}).get("exact")]
    checked = [r for r in records if (r.get("curve_rerun") or {}).get("checked") and r not in exact]
    reruns = exact + checked  # a re-run that reproduced its run one way or the other
    if not reruns:
        return ""
    commits = sorted({(r["curve_rerun"].get("provenance") or {}).get("commit", "?")[:7] for r in reruns})

    def names(rs: Sequence[dict[str, Any]]) -> str:
        return ", ".join(f"{r['method']} seed {r['seed']}" for r in rs)

    kinds = []
    if exact:
        fields = sorted({f for r in exact for f in r["curve_rerun"]["exact"]}, key=str)
        kinds.append(f"{names(exact)}: {', '.join(fields)} bit for bit, the rest within the rounding of the "
                     "evaluation's summation change")
    if checked:
        kinds.append(f"{names(checked)}: the same final weights, which the stored runs' evaluation code scores bit "
                     "for bit")
    return (f"Stronger evidence than these fields: {len(reruns)} stored run{'s' if len(reruns) != 1 else ''} "
            f"trained again at {', '.join(commits)} (1 thread, CPU) reproduced "
            f"{'their' if len(reruns) != 1 else 'its'} stored numbers ({'; '.join(kinds)}; "
            "results/v2/rerun_checks.json, and the learning curves above).")


def pilot_replay(data: dict[str, Any]) -> str:
    """The paragraph on ``results/v2/pilot_replay.json`` (bench/pilot_replay.py): the pilot's first steps
    trained again at given commits and thread counts, beside what the pilot recorded at that step."""
    runs, pilot = data.get("runs", []), data.get("pilot", {})
    if not runs or "mAP@R" not in pilot:
        return ""
    step = pilot["step"]
    same: dict[str, list[str]] = {}
    for r in runs:
        same.setdefault(r["weights_sha1"], []).append(f"{r['commit']} with {r['threads']} thread"
                                                         + ("s" if r["threads"] != 1 else ""))
    cells = "; ".join(f"{r['commit']}, {r['threads']} thread{'s' if r['threads'] != 1 else ''}: "
                      f"{100 * r['mAP@R']:.2f}" for r in sorted(runs, key=lambda r: (r["measured"], r["threads"])))
    twins = [" and ".join(v) for v in same.values() if len(v) > 1]
    matches = [r for r in runs if abs(r["mAP@R"] - pilot["mAP@R"]) < 5e-5]
    by_commit: dict[str, list[float]] = {}
    for r in runs:
        by_commit.setdefault(r["commit"], []).append(r["mAP@R"])
    moves = [max(v) - min(v) for v in by_commit.values() if len(v) > 1]
    threads = (f" The thread count alone moved it by up to {100 * max(moves):.2f} pt of mAP@R at step {step}."
               if moves else "")
    return (f"**Same seed, same run?** The pilot's curve reads mAP@R {100 * pilot['mAP@R']:.2f} at step {step}. "
            f"Its first {step} steps trained again from clean exports of the code (`bench/pilot_replay.py`, "
            f"`results/v2/pilot_replay.json`): {cells}."
            + (f" Bitwise the same weights: {'; '.join(twins)}." if twins else "")
            + (" None of them reproduces the pilot's value: the pilot's first steps were trained by code or a "
               "thread count that its record does not name (records carry both since, `lab.core.provenance`)."
               if not matches else f" {len(matches)} of them reproduce{'s' if len(matches) == 1 else ''} the pilot's "
               "value.") + threads)
