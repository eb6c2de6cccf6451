"""The live panel's timed fragments each sit in a container of their own (app_pages/fragments.py), so that
Streamlit's dropped fragment deltas never blank a page.

Streamlit 1.67 can drop a fragment's elements of a full run that the browser then clears; two fragments side by
side in one container left it empty, and the next delta for the second fragment threw "Bad delta path index 1
(should be between [0, 0])". The minimal page of bench/fragment_crash.py at three times the dashboard's ticks
blanked 1-2 of 6 pages within 40 s in every run measured with the fragments side by side (2026-11-29, 5 of 5
runs); here, with the dashboard's layout, no page may throw and every page must keep receiving its ticks.
"""
import pytest

from bench import fragment_crash
from bench.browser import require_browser

pytestmark = pytest.mark.slow


def test_six_pages_of_timed_fragments_in_their_own_containers_never_go_blank():
    require_browser()
    result = fragment_crash.run(pages=6, seconds=40.0, layout="own", quiet=True)
    assert result["threw"] == [], result
    # Not asserted: that every page keeps ticking. A second Streamlit loss (a run whose end never reaches the page)
    # can stop a page's timers until its next click: 1 page of 6 in 1 of 8 runs with busy loops beside them
    # (2026-11-30), a race this test would lose now and then. Open in issue 46.
    assert sum(runs >= 20 for runs in result["runs"]) >= 5, result  # the pages did run their fragments, over and over
