"""The sentences of notebooks 04 and 05 that state what a trained model shows, written from its
numbers (issue 33: a sentence that states a result is generated, not typed in; issue 36, C-4: the
notebooks and docs/figures.md show the same shipped models).

* :func:`script_grouping_sentence`: notebook 04, section 3 — do different glyphs of one script sit
  together (SupRank Fig. 9a's lesson for a fine-label loss)?
* :func:`tab_ix_sentence`: notebook 05, section 5 — SupRank Tab. IX / V's claims in this run.
* :func:`class_means_sentence`: notebook 05, section 6 — SupRank Fig. 9's class means.

"Clearly above chance" is a ratio to chance over :data:`ABOVE_CHANCE`; the numbers are printed
with each verdict, so a reader can judge the threshold too.
"""
from __future__ import annotations

from typing import Any, Sequence

ABOVE_CHANCE = 1.5  # a same-script fraction this many times chance or more is "clearly above chance"


def _times(value: float, chance: float) -> float:
    return value / chance if chance > 0 else float("inf")


def script_grouping_sentence(near: dict[str, float], means: dict[str, Any]) -> str:
    """From :func:`lab.viz.retrieval_views.coarse_neighbours` (``near``) and
    :func:`~lab.viz.retrieval_views.class_mean_neighbours` (``means``) of one model: how many times chance
    its other-glyph neighbours and its class means share the script, and whether that reproduces
    Fig. 9a's lesson (no grouping by the coarse label for a fine-label loss)."""
    first = _times(near["same_coarse"], near["chance"])
    second = _times(near["other_class_same_coarse"], near["other_class_chance"])
    third = _times(means["same_coarse"], means["chance"])
    numbers = (f"In this run the second and third numbers are {second:.1f}x and {third:.1f}x chance, the first "
               f"{first:.1f}x (mostly each glyph's own drawings)")
    if min(second, third) >= ABOVE_CHANCE:
        return (f"{numbers}: different glyphs of one script do sit together, though far less than the first "
                "number suggests. A loss that never saw the scripts groups glyphs by script, unlike Smooth-AP's map "
                "on SOP: at this scale the figure does not reproduce the paper's lesson.")
    if max(second, third) < ABOVE_CHANCE:
        return (f"{numbers}: glyphs of one script sit together little more than chance would place them, as "
                "Smooth-AP's map on SOP shows: the paper's lesson holds here.")
    return f"{numbers}: the two measures disagree (one at least {ABOVE_CHANCE}x chance, one not): no clear answer here."


def _signed(value: float) -> str:
    return f"{'gains' if value > 0 else 'loses'} {abs(value):.1f} pt"


def tab_ix_sentence(claims: Sequence[dict[str, Any]]) -> str:
    """From :func:`lab.experiments.hierarchical_runs.tab_ix_claims`: what HAPPIER does here at the coarse
    level and in H-AP against Smooth-AP, and whether the paper's H-AP claim holds in this run."""
    by = {c["metric"]: c for c in claims}
    coarse, hap = by["AP@script"], by["H-AP"]
    verdict = "holds in this run" if hap["holds"] else "does not hold in this run"
    return (f"In this run HAPPIER {_signed(coarse['measured'])} of AP at the coarse level "
            f"(paper {coarse['paper']:+.1f}) "
            f"and {_signed(hap['measured'])} of H-AP (paper {hap['paper']:+.1f}): the paper's H-AP claim {verdict} "
            "(one seed).")


def class_means_sentence(maps: dict[str, dict[str, Any]]) -> str:
    """From :func:`lab.viz.retrieval_views.class_mean_map` of ``smooth_ap`` and ``happier``: whether Fig. 9's
    lesson shows (SmoothAP's class means near chance, HAPPIER's clearly above it and above SmoothAP's)."""
    smooth, happier = maps["smooth_ap"], maps["happier"]
    a = _times(smooth["embedding_agreement"], smooth["chance"])
    b = _times(happier["embedding_agreement"], happier["chance"])
    numbers = (f"Same-script fraction of the 5 nearest class means: SmoothAP {smooth['embedding_agreement']:.3f} "
               f"({a:.1f}x chance), HAPPIER {happier['embedding_agreement']:.3f} ({b:.1f}x)")
    if a < ABOVE_CHANCE <= b:
        return (f"{numbers}: HAPPIER gathers the classes of a script where SmoothAP does not — "
                "Fig. 9's lesson holds here.")
    if a >= ABOVE_CHANCE:
        return (f"{numbers}: SmoothAP's class means already gather by script, and HAPPIER "
                f"{'adds' if b > a else 'takes away'} {abs(b - a):.1f}x chance — the figure does not reproduce the "
                "paper's lesson at this scale.")
    return (f"{numbers}: neither gathers the classes of a script — "
            "the figure does not reproduce the paper's lesson here.")
