"""The page's "Deviations from the protocol", as a registered report lists them: every change made to protocol
v2's design or analysis after some of its results had been seen (:data:`.protocol_history.DEVIATIONS`), with its
date, commit and reason, and the runs it came after, computed from the runs' "finished" times.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from ..running.paths import DOCS
from .error_rates import old_looks_error
from .protocol_history import DEVIATIONS, Concern, look_runs
from .stats import Records


def last_finished(datas: dict[str, dict[str, Any]], concern: Concern) -> tuple[int, str]:
    """(how many runs, the last one's "finished") of a concern's runs in ``datas`` ({file: results data})."""
    runs = [r for r in datas.get(concern.file, {}).get("runs", {}).values() if concern.select(r)]
    return len(runs), max((r.get("finished", "") for r in runs), default="")


# docs/results.md as b0a4995 committed it says "_Rendered 2026-11-27 05:27": the look's runs the page showed then
PAGE_AT_PLAN = "2026-11-27 05:27"


def _before_plan(records: Records) -> str:
    """The look's runs that had finished before b0a4995: those the page showed, and those it did not."""
    early = sorted((r["finished"], r["method"], r["seed"]) for r in records if look_runs(r)
                   and r.get("finished", "") < "2026-11-28 18:58:47")
    shown = [e for e in early if e[0][:16] <= PAGE_AT_PLAN]
    late = [e for e in early if e[0][:16] > PAGE_AT_PLAN]
    if not shown:
        return ""
    seeds = sorted({e[2] for e in shown})
    which = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"
    one = len(shown) == 1
    runs = f"{len(shown)} run{'' if one else 's'} of the look ({which}) {'was' if one else 'were'}"
    text = (f" When it was written, {runs} on the page "
            f"as provisional differences with 95 % intervals (its last render, {PAGE_AT_PLAN} UTC)")
    if late:
        named = ", ".join(f"{m} seed {s} at {f[11:16]}" for f, m, s in late)
        text += (f", and {len(late)} more had finished ({named} UTC on the 28th): the plan names them as trained "
                 "outside the project's sessions, and git cannot "
                 "show whether their numbers were seen")
    return text + "."


def protocol_v3_text(plan: Path = DOCS / "plans" / "protocol-v3.md") -> str:
    """The page's paragraph on protocol v3 (issue 43): the plan's numbered sections, by their titles, linked; ""
    where the plan is not there (an installed copy)."""
    if not plan.exists():
        return ""
    titles = re.findall(r"^## (\d+\. .+)$", plan.read_text(), re.MULTILINE)
    return ("**What protocol v3 would fix** ([docs/plans/protocol-v3.md](plans/protocol-v3.md): a plan written after "
            "protocol v2's results had been seen, neither registered nor run), in its sections: "
            + "; ".join(titles) + ".")


def evaluation_noise(records: Records, pilot: Sequence[dict[str, Any]], after: int = 3000) -> tuple[float, float]:
    """(smallest, largest) change of mAP@R between consecutive evaluations after step ``after``, over the
    learning curves of ``records`` and the pilot's, in points."""
    curves = [r["curve"] for r in records if r.get("curve")] + ([list(pilot)] if pilot else [])
    steps = [100 * (b["mAP@R"] - a["mAP@R"]) for c in curves for a, b in zip(c, c[1:]) if a["step"] >= after]
    return (min(steps), max(steps)) if steps else (float("nan"), float("nan"))


def deviations_section(datas: dict[str, dict[str, Any]], shown: Records = (),
                       pilot: Sequence[dict[str, Any]] = ()) -> str:
    """Markdown: the deviations, newest last, each with what it came after. ``shown``: the runs whose learning
    curves the page shows, and ``pilot``'s curve: the evaluation noise the budget's rule is set against."""
    low, high = evaluation_noise(shown, pilot)
    noise = (f" (between consecutive evaluations after step 3,000, the learning curves shown on this page and the "
             f"pilot's move by {low:+.1f} to {high:+.1f} point of mAP@R)")
    lines = []
    for d in DEVIATIONS:
        after = []
        for c in d.concerns:
            n, last = last_finished(datas, c)
            if n:
                after.append(f"{c.what}: {n} run{'s' if n != 1 else ''}, the last finished {last[:16]}")
        when = f" It came after {'; '.join(after)}." if after else ""
        extra = _before_plan(list(datas.get("v2/methods.json", {}).get("runs", {}).values())) \
            if d.commit == "b0a4995" else ""
        why = d.why.format(old=old_looks_error(), noise=noise)
        lines.append(f"- **{d.date[:16]} UTC, {d.commit}**: {d.what}. Why: {why}.{when}{extra}")
    return "\n\n".join([
        "### Deviations from the protocol",
        "Protocol v2 was registered in 99d6fb1 (2026-11-24 19:48 UTC), before any of its runs. Every change made "
        "after some of its results had been seen, in the order of the commits that made it (dates UTC; each "
        "checked against git's history and the runs' finishing times by tests/test_study_deviations.py). The "
        "analyses they replaced are reported beside the ones that replaced them: the registered adjacent pairs "
        "beside study 1's claims, the replication beside the n = 5 verdicts.",
        "\n".join(lines), *filter(None, [protocol_v3_text()])])


