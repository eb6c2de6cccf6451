"""A study's verdict as a class reads it first: the verdicts of the seeds every claim was tested on,
stated plainly; the extra seeds still being trained, in words for someone who has never heard of a
power plan's "look", kept for the details.

:mod:`lab.studies.reporting` writes the verdict of study 1 with the state of its sequential plan
inside it: "3 not resolved (mAP@R, paired t, Holm within each family, n = 5; the look at n = 10:
provisional, 11 of 20 runs done)". That is the research record's sentence (docs/results.md keeps it).
The first Reproduction screen of the dashboard and notebook 04 show :func:`plain_verdict`'s instead,
and :func:`seeds_in_progress` where the details are.
"""
from __future__ import annotations

import re
from typing import Optional

# "; the look at n = 10: provisional, 11 of 20 runs done" (lab.studies.reporting.ordering.claims_verdict)
LOOK = re.compile(r"; the look at n = (?P<n>\d+): provisional, (?P<done>\d+) of (?P<needed>\d+) runs done")
FIRST = re.compile(r"\bn = (?P<first>\d+)\b")


def plain_verdict(text: str) -> str:
    """``text`` (a verdict, its line or its paragraph) without the state of the extra seeds."""
    return LOOK.sub("", text)


def seeds_in_progress(text: str) -> Optional[str]:
    """The extra seeds being trained, in plain words, or None when ``text`` mentions none."""
    look = LOOK.search(text)
    if look is None:
        return None
    first = FIRST.search(text[:look.start()])
    n, done, needed = int(look["n"]), int(look["done"]), int(look["needed"])
    base = int(first["first"]) if first else None
    seeds = f"seeds {base} to {n - 1}" if base is not None else f"up to {n} seeds"
    verdicts = (f"the verdicts shown are those of the first {base} seeds" if base is not None
                else "the verdicts shown are those of the seeds already complete")
    return (f"More seeds are being trained for the claims not resolved yet ({seeds} of the losses they compare): "
            f"{done} of those {needed} runs are done. Until all of them are, {verdicts}; the extra runs can "
            "resolve a claim, never change one already resolved.")
