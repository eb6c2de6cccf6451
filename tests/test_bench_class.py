"""The class benches' reports (bench/class_load.py, bench/class_capacity.py) say what they measured: a missed
measurement is shown as missed, never as a number, and the capacity bench keeps its sessions watched."""
from __future__ import annotations

import argparse

import pytest

from bench import browser, class_capacity, class_load


def test_the_class_section_reports_the_cold_start_and_a_missed_page():
    row = {"pages": 6, "loads": [3.0, 9.5], "cold": (7.5, None), "first": [9.0, 14.0], "answered": [0.2, None],
           "stepped": [15.0, 19.0], "queued": 0, "rates": [0.5, 0.0], "pauses": [0.3, 0.6], "stuck": 0,
           "frozen": 7.0, "crashed": 1}
    args = argparse.Namespace(load=0, note="", window=20.0, fast=False)
    text = class_load.section([row], args, "2 worker processes x 3 runs at once")
    line = next(line for line in text.splitlines() if line.startswith("| 6 |"))
    assert "| 7.5 s / – |" in line and "0.2 s / 0.2 s (1 missed)" in line
    assert "0.50 (0.50-0.50)" in line  # the page that never trained is not a rate of 0 in the median
    assert line.endswith("| 7.0 s | 1 |") and "| crashed |" in text  # a page whose front end threw is counted


def test_a_page_that_trains_through_the_window_without_a_change_is_frozen_for_the_whole_window():
    """bench/class_load.py's freeze: a page starved by a load (no step in the window) showed 0.0 s, as if smooth."""
    training = [(0.0, "Step 0 / 9 · training")]
    assert class_load.longest_gap(training, now=30.0, window=20.0) == 20.0
    steps = training + [(12.0, "Step 3 / 9 · training"), (13.0, "Step 6 / 9 · training"), (25.0, "Step 9 / 9 · "
                                                                                           "training")]
    assert class_load.longest_gap(steps, now=30.0, window=20.0) == 12.0  # 13 -> 25
    paused = [(0.0, "Step 0 / 9 · paused"), (29.0, "Step 1 / 9 · training")]
    assert class_load.longest_gap(paused, now=30.0, window=20.0) == 1.0  # it trained only from 29 s


def test_the_capacity_section_sums_the_rates_and_marks_a_missed_first_step():
    row = {"pages": 3, "workers": "2 x 3", "queued": 0, "first": [2.0, None, 4.0], "rates": [1.0, 2.0, 3.0],
           "pauses": [0.001, 0.002, 0.003], "loads": [1.0, 2.0]}
    line = next(line for line in class_capacity.section([row], 20.0, "").splitlines() if line.startswith("| 3 |"))
    assert "3.0 s / 4.0 s (1 missed)" in line and "| 6.00 |" in line and "2.00 (1.00-3.00)" in line


def test_the_capacity_bench_touches_every_session_while_it_waits():
    class Session:
        touched = 0

        def touch(self):
            self.touched += 1

    sessions = [Session(), Session()]
    calls = []
    assert class_capacity._wait_touching(sessions, lambda: calls.append(1) or len(calls) >= 2, 1e12)
    assert [s.touched for s in sessions] == [2, 2]


def test_the_bare_page_is_a_first_screen_for_the_watcher(tmp_path):
    """bench/first_screen.py --page bare measures Streamlit's own floor only if its page is one that
    class_load.WATCH_PAGE counts as a first screen: a sidebar button whose label ends in Start, and an h2."""
    import re

    from streamlit.testing.v1 import AppTest

    from bench import first_screen

    assert "window.__first" in class_load.WATCH_PAGE and "Start$" in class_load.WATCH_PAGE
    app = tmp_path / "bare.py"
    app.write_text(first_screen.BARE_PAGE)
    at = AppTest.from_file(str(app)).run()
    assert not at.exception
    assert [re.search(r"Start$", b.label.strip()) is not None for b in at.sidebar.button] == [True]
    assert len(at.header) == 1 and len(at.main.button) == 0


def test_a_loaded_class_writes_its_own_section(tmp_path):
    """--load 8's table went over the quiet machine's (one "class" section for both)."""
    from bench.measure import write_section

    doc = tmp_path / "benchmarks.md"
    for busy in (0, 8):
        write_section(class_load.section_name(busy), f"table with {busy} busy loops", doc)
    text = doc.read_text()
    assert "table with 0 busy loops" in text and "table with 8 busy loops" in text


def test_a_click_past_the_deadline_is_a_missed_measurement_not_a_crash():
    """At N = 12 a Pause could not be clicked before the bench's deadline: playwright's TimeoutError ended the
    bench and every N's row was lost. It is now one missed Pause."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    class Button:
        def click(self, timeout):
            raise PlaywrightTimeout("Locator.click: Timeout 1000ms exceeded.")

    class Locator:
        def get_by_role(self, *a, **k):
            return Button()

    class Page:
        def evaluate(self, *a):
            return None

        def get_by_test_id(self, name):
            return Locator()

        def wait_for_function(self, *a, **k):
            raise AssertionError("no wait after a click that did not happen")

    assert class_load.timed_click(Page(), "Pause", "· paused", deadline=0.0) is None


def test_a_starved_teachers_page_takes_a_third_of_the_budget_and_reports_no_step():
    """With 8 busy loops the teacher's first step took 490 s of the 600 s budget, and the class's pages had
    no time left: every Pause was "missed". The teacher's wait for a step now has a third of what is left, and
    a teacher's page that saw no step still pauses its run before it closes (it kept its place in a worker, and
    one student of six waited in the queue)."""
    import time

    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    waits, clicks, events = [], [], []

    class Page:
        def add_init_script(self, script):
            pass

        def goto(self, *a, **k):
            pass

        def evaluate(self, script, *a):
            return 1000.0

        def get_by_test_id(self, name):
            return self

        def get_by_role(self, *a, name=None, **k):
            clicks.append(name)
            return self

        def click(self, timeout):
            events.append(f"click {clicks[-1]}")

        def wait_for_function(self, script, arg=None, timeout=0):
            waits.append((script, timeout))
            if script == class_load.STEP_AT_LEAST:
                raise PlaywrightTimeout("no step")

    class Context:
        def new_page(self):
            return Page()

        def close(self):
            events.append("close")

    class Browser:
        def new_context(self, **k):
            return Context()

    args = argparse.Namespace(steps=100)
    cold = class_load.teacher_page(Browser(), "http://x", args, deadline=time.monotonic() + 300)
    assert cold == (1.0, None)
    step_wait = next(t for s, t in waits if s == class_load.STEP_AT_LEAST)
    assert 90_000 < step_wait <= 100_000
    assert [e for e in events if e.startswith("click")] == ["click Start", "click Pause"] and events[-1] == "close"


class _Page:
    """A page for pause_all: its Pause is answered in 0.3 s unless ``answers`` is False; its Start comes back
    unless ``start_back`` is False. It records the waits it was given."""

    def __init__(self, answers: bool = True, start_back: bool = True):
        self.answers, self.start_back, self.waits, self.shots = answers, start_back, [], []

    def evaluate(self, script, *a):
        if script == browser.PAGE_STATE:
            return {"progress": "Step 9 / 100 · training", "status": "Running..."}
        return 0.3 if "__seen -" in script else None

    def get_by_test_id(self, name):
        return self

    def get_by_role(self, *a, **k):
        return self

    def click(self, timeout):
        self.waits.append(("click", timeout))

    def wait_for_function(self, script, timeout=0):
        self.waits.append((script, timeout))
        if (script == class_load.START_ENABLED and not self.start_back) or ("__seen" in script and not self.answers):
            from playwright.sync_api import TimeoutError as PlaywrightTimeout
            raise PlaywrightTimeout("not by then")

    def screenshot(self, path, timeout):
        self.shots.append(path)


def test_a_page_that_cannot_be_paused_leaves_the_others_their_wait(tmp_path, monkeypatch):
    """At N = 12 one page's Pause went unanswered, took all that was left of the budget, and the 11 pages after
    it got 1 s each: 7 Pauses "missed" and 4 Starts "stuck". Each Pause now has a wait of its own, a missed Pause
    is not also a stuck Start, and what the page showed is printed."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    pages = [_Page(answers=False), _Page(), _Page(start_back=False), _Page()]
    pauses, stuck, unanswered = class_load.pause_all(pages, "N4")
    assert pauses == [None, 0.3, 0.3, 0.3] and stuck == 1
    assert len(unanswered) == 2 and unanswered[0].startswith("N4-page0-pause: ")
    assert "'Running...'" in unanswered[0] and unanswered[1].startswith("stuck: N4-page2-stuck")
    for page in pages[1:]:  # every later page had its full waits, whatever page 0 took
        seen = next(t for s, t in page.waits if "__seen" in str(s))
        assert seen >= (class_load.PAUSE_WAIT - 1) * 1000
    assert not any(s == class_load.START_ENABLED for s, _ in pages[0].waits)  # not paused: no Start expected
    assert next(t for s, t in pages[2].waits if s == class_load.START_ENABLED) == class_load.START_AGAIN_WAIT * 1000


@pytest.mark.parametrize("layout", ["own", "shared"])
def test_the_fragment_crash_page_runs(layout):
    """bench/fragment_crash.py's page (the live panel's shape without the lab) runs without an exception in both
    layouts, so the reproduction of the blank pages does not rot into a page that fails for its own reasons."""
    from streamlit.testing.v1 import AppTest

    from bench import fragment_crash

    at = AppTest.from_string(fragment_crash.shape_page(layout)).run(timeout=30)
    assert not at.exception
    assert [h.value for h in at.header] == ["The live panel's shape"] and len(at.sidebar.button) == 1
    live = next(b for b in at.main.children.values() if getattr(b, "key", None) == "live")
    keys = [getattr(b, "key", None) for b in live.children.values()]
    assert keys == (["live_progress", "live_view"] if layout == "own" else [None, None])
    with pytest.raises(ValueError, match="layout='side': accepted values are 'own' and 'shared'"):
        fragment_crash.shape_page("side")


def _frame(kind: str, fragments: tuple = (), fragment: str = "") -> bytes:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    if kind == "new_session":
        msg.new_session.SetInParent()
        msg.metadata.run.fragment_ids.extend(fragments)
    elif kind == "script_finished":
        msg.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    elif kind == "auto_rerun":
        msg.auto_rerun.fragment_id, msg.auto_rerun.interval = fragment, 0.3
    return msg.SerializeToString()


def test_the_fragment_bench_reads_timers_and_cut_runs_from_a_page_s_frames():
    """fragment_crash's readers of a page's frames: which run set which timer, which runs lost their end; the
    page's own requests (Sent) and its errors (str) are skipped."""
    from bench.fragment_crash import Sent, cut_runs, describe, timers

    frames = [(0.0, f) for f in (
        _frame("new_session"), _frame("auto_rerun", fragment="a"), _frame("auto_rerun", fragment="b"),
        _frame("new_session"),  # the full run above was cut: no script_finished
        Sent(b""), _frame("auto_rerun", fragment="a"), _frame("script_finished"),
        _frame("new_session", ("a",)), _frame("auto_rerun", fragment="b"), "ERROR x", _frame("script_finished"))]
    assert timers(frames) == ({"a", "b"}, {"b"})
    assert cut_runs(frames) == (1, 3)
    assert describe(frames[1][1]) == "auto_rerun [] fragment a every 0.3 s"
    assert describe(frames[4][1]) == "sent None"
