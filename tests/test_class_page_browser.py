"""The class page (`make class`, lab.dashboard.class_server) in headless chromium: three pages on one server
train at once in its worker processes; each Pause lands within 2 s, timed in the page from the click to
"paused"; each run's loss curve, read from the page's chart, is its run trained alone, bit for bit; a reload
takes the run back; and a link to a folder the operator does not offer says so and trains the embedded data.
Without /usr/bin/chromium these tests skip, unless RANKLAB_REQUIRE_BROWSER=1 (CI).
"""
import pytest

from bench.browser import ARTIFACTS, chromium_page, class_process, require_browser
from tests.test_app_class import PAGES, STEPS, WATCH_PAUSE_AT, assert_curve_is_alone, assert_pauses_landed

pytestmark = pytest.mark.slow
LOSSES = """() => { const line = document.querySelector('#curves .rl-line[data-metric="loss"] polyline');
  if (!line) return null;
  return {x: line.dataset.x.split(',').map(Number), y: line.dataset.y.split(',').map(Number)}; }"""
READY = "() => !document.getElementById('start').disabled"


def shown_step(page) -> int:
    return int(page.inner_text("#progress").split()[1])


def test_three_class_pages_train_at_once_each_pause_lands_within_2_s_and_each_curve_is_its_run_alone():
    require_browser()
    with class_process(env={"RANKLAB_FAST": "1"}) as (url, _, log), chromium_page(1280, 720) as first:
        browser = first.context.browser
        pages = [first] + [browser.new_page() for _ in PAGES[1:]]  # each its own context: its own session
        for page, s in zip(pages, PAGES):
            page.goto(f"{url}/?seed={s.seed}&loss={s.loss}&steps={STEPS}")
        for page in pages:
            page.wait_for_function(READY, timeout=120_000)
            page.click("#start")
        for page in pages:  # all three train at once
            page.wait_for_function("() => /Step ([4-9]|\\d\\d+) \\/.*· training/.test("
                                   "document.getElementById('progress').innerText)", timeout=300_000)
        seen = []
        for page in pages:
            page.evaluate(WATCH_PAUSE_AT % "#progress", 60_000)  # armed before the click
            page.click("#pause")
            seen.append(page.evaluate("() => window.__pause"))
        assert_pauses_landed(seen)
        for i, (page, s, paused) in enumerate(zip(pages, PAGES, seen)):
            assert shown_step(page) == paused["step"]  # the step a Pause shows is final
            assert_curve_is_alone(page, LOSSES, s, paused["step"], i)
            page.screenshot(path=str(ARTIFACTS / f"class-server-page-{i}.png"))
        # A reload takes the run back: the same step, paused, and its curve.
        pages[0].reload()
        pages[0].wait_for_function(READY, timeout=60_000)
        pages[0].wait_for_function("() => document.querySelector('#curves svg') !== null", timeout=60_000)
        assert shown_step(pages[0]) == seen[0]["step"] and "· paused" in pages[0].inner_text("#progress")
    assert "Traceback" not in log.read_text()


def test_a_link_to_a_folder_not_offered_is_refused_in_a_note_and_the_page_trains_embedded_data():
    require_browser()
    with class_process(env={"RANKLAB_FAST": "1", "RANKLAB_WORKERS": "0"}) as (url, _, log), chromium_page() as page:
        page.goto(f"{url}/?dataset=folder&root=/proc/self")
        page.wait_for_function(READY, timeout=120_000)
        notes = page.inner_text("#notes")
        assert "root='/proc/self'" in notes and "using the default glyphs" in notes and len(notes.splitlines()) == 1
        assert page.input_value("#f-dataset") == "glyphs" and not page.inner_text("#errors")
        # A run the server closed (away too long, or a restarted server): the page says so and stops, its buttons off.
        page.evaluate("token = 'closed by the server'; poll()")
        page.wait_for_function("() => /reload the page/.test(document.getElementById('errors').innerText)")
        assert page.locator("#start").is_disabled() and page.locator("#pause").is_disabled()
    assert "Traceback" not in log.read_text()
