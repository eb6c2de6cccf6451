"""A study's verdict as a class reads it first: the verdicts of the seeds every claim was tested on,
stated plainly; the extra seeds still being trained, in words for someone who has never heard of a
power plan's "look", kept for the details.

:mod:`lab.studies.reporting` writes the verdict of study 1 with the state of its sequential plan
inside it: "3 not resolved (mAP@R, paired t, Holm within each family, n = 5; the look at n = 10:
provisional, 11 of 20 runs done)". That is the research record's sentence (docs/results.md keeps it).
Since the registered replication (b0a4995) the same place holds its state instead ("; the replication on seeds
5-14 (b0a4995): look 1 (seeds 5-9): 14 of 20 runs done, not read"); both forms are read here.
The first Reproduction screen of the dashboard and notebook 04 show :func:`plain_verdict`'s instead,
and :func:`seeds_in_progress` where the details are (titled by :func:`extra_seeds_title`).
"""
from __future__ import annotations

import re
from typing import Optional

# "; the look at n = 10: provisional, 11 of 20 runs done": the power plan's looks (results rendered before the
# registered replication replaced them, b0a4995).
LOOK = re.compile(r"; the look at n = (?P<n>\d+): provisional, (?P<done>\d+) of (?P<needed>\d+) runs done")
# "; the replication on seeds 5-14 (b0a4995): look 1 (seeds 5-9): 14 of 20 runs done, not read" (or, once a look is
# read, "(b0a4995; look 1 (seeds 5-9): read; ...): H1 replicated, ..."): lab.studies.reporting.replication.status_line.
REPLICATION = "; the replication on seeds "
ROUND = re.compile(r"look (?P<k>\d+) \(seeds (?P<a>\d+)-(?P<b>\d+)\): (?:(?P<done>\d+) of (?P<needed>\d+) runs done, "
                   r"not read|(?P<read>read)|not needed)")
SEEDS = re.compile(r"seeds (?P<a>\d+)-(?P<b>\d+)")
FIRST = re.compile(r"\bn = (?P<first>\d+)\b")


def _replication(text: str) -> Optional[tuple[int, int]]:
    """(start, end) of the replication's status in ``text``: from its "; " to the parenthesis that closes the
    verdict's own (the status holds parentheses of its own), or None."""
    start = text.find(REPLICATION)
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            if depth == 0:
                return start, i
            depth -= 1
    return start, len(text)


def plain_verdict(text: str) -> str:
    """``text`` (a verdict, its line or its paragraph) without the state of the extra seeds."""
    span = _replication(text)
    if span is not None:
        text = text[:span[0]] + text[span[1]:]
    return LOOK.sub("", text)


def _first_seeds(text: str) -> str:
    first = FIRST.search(text)
    return (f"the verdicts shown are those of the first {first['first']} seeds" if first
            else "the verdicts shown are those of the seeds already complete")


def seeds_in_progress(text: str) -> Optional[str]:
    """The extra seeds being trained, in plain words, or None when ``text`` mentions none."""
    span = _replication(text)
    if span is not None:
        return _replication_words(text, *span)
    look = LOOK.search(text)
    if look is None:
        return None
    first = FIRST.search(text[:look.start()])
    n, done, needed = int(look["n"]), int(look["done"]), int(look["needed"])
    base = int(first["first"]) if first else None
    seeds = f"seeds {base} to {n - 1}" if base is not None else f"up to {n} seeds"
    return (f"More seeds are being trained for the claims not resolved yet ({seeds} of the losses they compare): "
            f"{done} of those {needed} runs are done. Until all of them are, {_first_seeds(text[:look.start()])}; "
            "the extra runs can resolve a claim, never change one already resolved.")


def extra_seeds_title(text: str) -> str:
    """The title of the details that hold :func:`seeds_in_progress`'s words: "more seeds in progress" while a
    look of the replication (or the power plan) still trains, "more seeds: a second answer" once every look is
    read."""
    span = _replication(text)
    training = (LOOK.search(text) is not None if span is None
                else any(r["done"] is not None for r in ROUND.finditer(text[span[0]:span[1]])))
    return "more seeds in progress" if training else "more seeds: a second answer"


def _replication_words(text: str, start: int, end: int) -> str:
    """The registered replication (study 1): new seeds test the open claims again, in rounds read only once
    complete; the first seeds' verdicts stay as they are, the new seeds' answer stands beside them."""
    status = text[start:end]
    seeds = SEEDS.search(status)
    every = f"seeds {seeds['a']} to {seeds['b']}" if seeds else "new seeds"
    rounds = list(ROUND.finditer(status))
    open_round = next((r for r in rounds if r["done"] is not None), None)
    keep = (f"{_first_seeds(text[:start])}, and they stay as they are: the new seeds give a second, separate "
            "answer beside them")
    if open_round is not None:
        return (f"The claims not resolved yet are being tested again on new seeds ({every}), in rounds: this round "
                f"trains seeds {open_round['a']} to {open_round['b']} of the losses they compare, and "
                f"{open_round['done']} of those {open_round['needed']} runs are done. A round's results are shown "
                f"only once it is complete. Until then, {keep}.")
    answer = status.rsplit("): ", 1)[1].strip() if "): " in status else ""
    return (f"The claims not resolved yet were tested again on new seeds ({every})"
            + (f": {answer}" if answer else "") + f". {keep[0].upper()}{keep[1:]}.")
