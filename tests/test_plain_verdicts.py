"""What a class reads first of the reproduction study (issue 46, item 7): the verdicts of the seeds every claim
was tested on, plainly, on the dashboard's first Reproduction screen and in notebook 04; the extra seeds still
being trained in the details, worded for a reader who has never heard of a sequential plan's "look"."""
from pathlib import Path

import jupytext

from lab.experiments.plain_verdicts import plain_verdict, seeds_in_progress

ROOT = Path(__file__).resolve().parents[1]

LINE = ("of the papers' 8 claims, 4 hold, 1 contradicted (FastAP > ROADMAP), 3 not resolved (mAP@R, paired t, Holm "
        "within each family, n = 5; the look at n = 10: provisional, 11 of 20 runs done)")


def test_the_verdict_keeps_its_numbers_and_loses_the_looks_state():
    assert plain_verdict(LINE) == ("of the papers' 8 claims, 4 hold, 1 contradicted (FastAP > ROADMAP), 3 not "
                                   "resolved (mAP@R, paired t, Holm within each family, n = 5)")
    assert plain_verdict("reproduces") == "reproduces" and seeds_in_progress("reproduces") is None


def test_the_details_say_what_is_being_trained_and_what_it_can_change():
    text = seeds_in_progress(LINE)
    assert "seeds 5 to 9" in text and "11 of those 20 runs are done" in text
    assert "the verdicts shown are those of the first 5 seeds" in text
    assert "look" not in text and "provisional" not in text


def test_notebook_04_shows_the_plain_verdict_and_the_extra_seeds_folded_away():
    cells = [c.source for c in jupytext.read(ROOT / "notebooks" / "04_train_retrieve_visualise.py").cells]
    shown = next(c for c in cells if 'study_verdict("methods")' in c and "Markdown(" in c)
    assert "plain_verdict(verdict)" in shown and "<details>" in shown and "seeds_in_progress(verdict)" in shown
