"""What a class reads first of the reproduction study (issue 46, item 7): the verdicts of the seeds every claim
was tested on, plainly, on the dashboard's first Reproduction screen and in notebook 04; the extra seeds still
being trained in the details, worded for a reader who has never heard of a sequential plan's "look"."""
from pathlib import Path

import jupytext

from lab.experiments.plain_verdicts import extra_seeds_title, plain_verdict, seeds_in_progress

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
    assert "extra_seeds_title(verdict)" in shown


REPLICATION = ("3 not resolved (mAP@R, and R@1 for supp. B.4's; paired t, Holm within each family, n = 5; the "
               "replication on seeds 5-14 (b0a4995): look 1 (seeds 5-9): 14 of 20 runs done, not read).** Most likely")


def test_the_registered_replication_is_said_plainly_and_left_out_of_the_verdict():
    # After the merge of the registered replication (issue 43) the verdict carries its status, with parentheses
    # of its own, instead of the power plan's look: the first screen showed "look 1 (seeds 5-9)" again and the
    # details said nothing (seeds_in_progress was None).
    assert plain_verdict(REPLICATION) == ("3 not resolved (mAP@R, and R@1 for supp. B.4's; paired t, Holm within "
                                          "each family, n = 5).** Most likely")
    text = seeds_in_progress(REPLICATION)
    assert "seeds 5 to 14" in text and "seeds 5 to 9" in text and "14 of those 20 runs are done" in text
    assert "the verdicts shown are those of the first 5 seeds" in text
    assert "look" not in text and "provisional" not in text and "b0a4995" not in text
    read = REPLICATION.replace("(b0a4995): look 1 (seeds 5-9): 14 of 20 runs done, not read)",
                               "(b0a4995; look 1 (seeds 5-9): read): SupAP > SmoothAP replicated)")
    assert plain_verdict(read).startswith("3 not resolved (mAP@R, and R@1 for supp. B.4's; paired t, Holm within each "
                                          "family, n = 5).**")
    assert "were tested again on new seeds (seeds 5 to 14): SupAP > SmoothAP replicated." in seeds_in_progress(read)


def test_the_details_title_says_in_progress_only_while_a_look_still_trains():
    # Once look 2 is read the details hold the new seeds' answer: their title said "more seeds in progress".
    assert extra_seeds_title(LINE) == extra_seeds_title(REPLICATION) == "more seeds in progress"
    second = REPLICATION.replace("(b0a4995): look 1 (seeds 5-9): 14 of 20 runs done, not read)",
                                 "(b0a4995; look 1 (seeds 5-9): read; look 2 (seeds 5-14): 19 of 20 runs done, not "
                                 "read): SupAP > SmoothAP open (look 2 not read yet))")
    assert extra_seeds_title(second) == "more seeds in progress" and "19 of those 20" in seeds_in_progress(second)
    done = second.replace("19 of 20 runs done, not read): SupAP > SmoothAP open (look 2 not read yet)",
                          "read): SupAP > SmoothAP replicated as in the paper")
    assert extra_seeds_title(done) == "more seeds: a second answer"
    assert "were tested again on new seeds (seeds 5 to 14): SupAP > SmoothAP replicated" in seeds_in_progress(done)


def test_the_committed_study_1_verdict_reads_plainly():
    """From the committed results and the page's own code: whatever the replication's state, the plain verdict
    holds no look and the details say it; the rest of the verdict is kept word for word."""
    from lab.studies.reporting.verdicts import study_verdict

    verdict = study_verdict("methods")
    plain = plain_verdict(verdict)
    assert "look 1" not in plain and "the replication on seeds" not in plain
    start = verdict.index("; the replication on seeds")
    assert plain == verdict[:start] + verdict[verdict.index(").**", start):]
    assert seeds_in_progress(verdict) is not None
