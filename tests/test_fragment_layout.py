"""The live panel's timed fragments each sit in a container of their own (app_pages/fragments.py), so that
Streamlit's dropped fragment deltas never blank a page.

Streamlit 1.67 can drop a fragment's elements of a full run that the browser then clears; two fragments side by
side in one container left it empty, and the next delta for the second fragment threw "Bad delta path index 1
(should be between [0, 0])". The minimal page of bench/fragment_crash.py at three times the dashboard's ticks
blanked 1-2 of 6 pages within 40 s in every run measured with the fragments side by side (2026-11-29, 5 of 5
runs); here, with the dashboard's layout, no page may throw and every page must keep receiving its ticks.
A second loss (a full run's timers) stopped a page's ticks; every fragment run now sets them again.
"""
import pytest

from bench import fragment_crash
from bench.browser import require_browser

pytestmark = pytest.mark.slow


def test_six_pages_of_timed_fragments_in_their_own_containers_never_go_blank():
    require_browser()
    result = fragment_crash.run(pages=6, seconds=40.0, layout="own", quiet=True)
    assert result["threw"] == [], result
    assert all(runs >= 20 for runs in result["runs"]), result  # every page ran its fragments, over and over
    # and still ticks at the end: a page whose timers were lost received nothing more (1 page of 6 in 2 of 9 runs
    # with 4 busy loops beside them before every fragment run set the timers again, 0 of 11 after, 2026-11-30)
    assert all(quiet < 10.0 for quiet in result["silent"]), result


def test_every_fragment_run_sets_the_page_s_timers_again():
    """A full run's timers can be lost after the browser cleared the old ones (app_pages/fragments.py): a page
    then stops ticking. Each fragment run therefore announces every timed fragment's timer again; before that,
    only full runs did, and a page that lost them received nothing more until its next click."""
    require_browser()
    result = fragment_crash.run(pages=1, seconds=8.0, layout="own", quiet=True)
    (by_full, by_fragment), = result["timers"]
    assert len(by_full) == 2, result  # the page's two timed fragments, set by its full runs
    assert by_fragment == by_full, result  # and set again by its fragment runs, both of them
    assert result["runs"][0] >= 10, result
