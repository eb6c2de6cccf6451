"""bench/dashboard.py's section says what it measured: a row per view, the load seen, the clicks after
which the step still moved, and the 2 s goal judged on the slowest Pause of any view."""
from __future__ import annotations

import argparse

from bench import dashboard


def args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"load": 1, "note": "", "fast": False, "watch": 10.0, **kw})


def test_the_goal_is_judged_on_the_slowest_pause_of_any_view():
    pauses = {"Training": [0.2, 0.3], "Scores": [0.1, 2.5]}
    text = dashboard.section(args(), pauses, {"Training": [0.4, 0.1]}, [3.0, 5.2], moved=1)
    assert "| Training | 0.25 s | 0.30 s | 2 | 2 in 10 s, longest 0.40 s |" in text
    assert "| Scores | 1.30 s | 2.50 s | 2 | not watched |" in text
    assert "**missed** (max 2.50 s)" in text and "3.0-5.2" in text and "moved after 1 of 4 clicks" in text
    text = dashboard.section(args(note="a study"), {"Scores": [1.9, 2.0]}, {}, [4.0])
    assert "**met** (max 2.00 s)" in text and "1 busy loop and a study" in text


def test_the_reproduction_goal_leaves_out_only_a_server_with_nothing_stored():
    times = {"first open, new server, nothing stored": [30.0], "open (from the Training view)": [0.4, 0.6],
             "switch to another study": [0.2, 0.9, 0.3]}
    text = dashboard.reproduction_section(args(), times, 0, [2.0, 3.5])
    assert "| open (from the Training view) | 0.50 s | 0.60 s | 2 |" in text
    assert "| first open, new server, nothing stored | 30.00 s | 30.00 s | 1 |" in text
    assert "**met** (max 0.90 s)" in text and "figure visible beside the marked study: 0" in text and "2.0-3.5" in text
    times["first open, new server, stored"] = [1.2]
    assert "**missed** (max 1.20 s)" in dashboard.reproduction_section(args(), times, 2, [2.0])
