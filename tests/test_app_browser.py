"""The dashboard in a real browser: `streamlit run app.py` on 127.0.0.1 and headless Debian chromium
driven by Playwright (fast mode is inherited from conftest). Screenshots go to test-artifacts/.

Without /usr/bin/chromium these tests skip, unless RANKLAB_REQUIRE_BROWSER=1 (CI), where they fail.
"""
import re
import signal
from urllib.parse import urlencode, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

import bench.browser
from bench.browser import (ARTIFACTS, ROOT, chromium_page, require_browser, show_study, streamlit_process,
                            streamlit_server, wait_idle, wait_visible)

pytestmark = pytest.mark.slow
STEP = re.compile(r"Step (\d+) / (\d+)")
# A run that cannot finish during a test: every wait below ends in one state only. (With the fast
# mode's 40 steps a run often finished before the Pause click was handled: "· finished", never
# "· paused".)
LONG = "?steps=100000"


@pytest.fixture(scope="module")
def server():
    require_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    with streamlit_server() as url:
        yield url


@pytest.fixture
def page(server):
    with chromium_page() as p:
        yield p


def sidebar_button(page, name: str):
    return page.get_by_test_id("stSidebar").get_by_role("button", name=name, exact=True)


def step_shown(page) -> int:
    match = STEP.search(page.locator('[data-testid="stProgress"]').first.inner_text())
    assert match, "no 'Step n / N' progress text"
    return int(match.group(1))


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]').first.inner_text()


def wait_step_at_least(page, steps: int, timeout_ms: int = 120_000) -> None:
    page.wait_for_function(
        "n => { const m = document.body.innerText.match(/Step (\\d+) \\//); return m && +m[1] >= n; }",
        arg=steps, timeout=timeout_ms)


def test_the_page_renders_and_start_trains_until_paused(server, page):
    page.goto(f"{server}/{LONG}")
    wait_idle(page)
    no_exception(page)
    sidebar_button(page, "Step").wait_for()
    sidebar_button(page, "Start").click()
    page.get_by_text("· training").wait_for(timeout=60_000)
    # The timer ticks on its own: two ticks past the first, without touching the page.
    wait_step_at_least(page, 6)
    sidebar_button(page, "Pause").click()
    page.get_by_text("· paused").wait_for(timeout=60_000)
    wait_idle(page)
    paused_at = step_shown(page)
    assert paused_at >= 6
    page.locator(".st-key-curves .rl-curves").first.wait_for()
    no_exception(page)
    page.screenshot(path=str(ARTIFACTS / "dashboard-browser.png"), full_page=True)
    # Another browser session has its own model: it starts untrained whatever this one did.
    other = page.context.browser.new_page()
    other.goto(server)
    wait_idle(other)
    assert step_shown(other) == 0
    assert step_shown(page) == paused_at
    sidebar_button(page, "Reset").click()
    page.get_by_text("Step 0 /").wait_for(timeout=60_000)


def test_a_reload_finds_the_running_session_and_a_second_tab_gets_its_own(server, page):
    page.goto(f"{server}/{LONG}")
    wait_idle(page)
    sidebar_button(page, "Start").click()
    page.get_by_text("· training").wait_for(timeout=60_000)
    wait_step_at_least(page, 6)
    before = step_shown(page)
    link = page.url
    page.reload()
    wait_visible(page, page.get_by_text("· training"), "the training status after a reload")
    assert step_shown(page) >= before  # not back to 0: the same run, still training
    wait_step_at_least(page, before + 4)
    assert page.url == link and "sid=" in link
    no_exception(page)
    page.screenshot(path=str(ARTIFACTS / "dashboard-reloaded.png"), full_page=True)
    # The same link opened elsewhere while this page is open: its own run, and a note saying why.
    other = page.context.browser.new_page()  # another window (its own context), same server
    other.goto(link)
    wait_idle(other)
    wait_visible(other, other.get_by_text("open in another tab"), "the note of a second tab")
    assert step_shown(other) == 0 and re.search(r"sid=([^&]+)", other.url).group(1) != re.search(
        r"sid=([^&]+)", link).group(1)
    assert step_shown(page) >= before + 4
    sidebar_button(page, "Pause").click()
    page.get_by_text("· paused").wait_for(timeout=60_000)


FARTHEST_FROM_STAR = """points => {
  const centre = e => { const b = e.getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; };
  const traces = points[0].closest('.scatterlayer').querySelectorAll('.trace');
  const star = centre(traces[traces.length - 1].querySelector('.points path'));  // the query, drawn last
  const far = points.map(p => { const [x, y] = centre(p); return (x - star[0]) ** 2 + (y - star[1]) ** 2; });
  return centre(points[far.indexOf(Math.max(...far))]);
}"""
PICKED = ("() => [...document.querySelectorAll('[data-testid=\"stImageCaption\"], [data-testid=\"caption\"], "
          "figcaption, div')].some(e => /^row [1-9]\\d*$/.test(e.innerText))")


def test_clicking_a_point_of_the_embedding_map_picks_the_query(server, page):
    page.goto(server)
    wait_idle(page)
    sidebar_button(page, "Step").click()
    wait_visible(page, page.get_by_text("· paused"), "the paused status after Step")
    page.get_by_role("radio", name="Embeddings", exact=True).click()
    caption = page.get_by_text(re.compile(r"^row \d+$"))
    wait_visible(page, caption, "the query thumbnail of the Embeddings view")
    assert caption.inner_text() == "row 0"
    wait_idle(page)
    points = page.locator(".js-plotly-plot .scatterlayer .trace:first-child .points path")
    # The point of the first group farthest from the query's star: a point under the star (an
    # untrained model packs points together) would select the query itself, row 0. Its centre is
    # read and clicked in one step, and again if the chart was redrawn under the click (a rerun
    # replaces its points: once in 3 runs at load 4 the point found was gone a moment later).
    for _ in range(4):
        points.first.wait_for()
        x, y = points.evaluate_all(FARTHEST_FROM_STAR)
        page.mouse.click(x, y)
        try:
            page.wait_for_function(PICKED, timeout=15_000)
            break
        except PlaywrightTimeout:
            wait_idle(page)
    else:
        pytest.fail("clicking a point of the embedding map never picked another query (4 clicks)")
    no_exception(page)
    page.screenshot(path=str(ARTIFACTS / "dashboard-embeddings.png"), full_page=True)


HOSTILE = {"loss": "[Click here to log in](https://evil.example/login)", "model": "![x](https://evil.example/a.png)",
           "dataset": "https://evil.example :red[red] :material/home: :smile:",
           "seed": "$x^2$ **bold** `code` <b>html</b> www.evil.example a@evil.example",
           "batch": "# _heading_\n- item", "m": "A" * 5000}


def test_link_values_are_shown_as_plain_text_cut_to_a_sane_length(server, page):
    # A link's value inside the app's own note must not become a live link, fetch a remote image,
    # style text or fill the page (before: all four).
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{server}/?{urlencode(HOSTILE)}")
    wait_idle(page)
    notes = page.locator('[data-testid="stAlert"]').filter(has_text="Link:")
    wait_visible(page, notes.first, "the link notes")
    # the notes come in one script run but may reach the page a moment apart (a CI run under load saw 5 of 6)
    wait_visible(page, notes.nth(len(HOSTILE) - 1), "every link note")
    assert notes.count() == len(HOSTILE)
    html = "".join(n.locator('[data-testid="stMarkdownContainer"]').inner_html() for n in notes.all())
    text = "\n".join(n.inner_text() for n in notes.all()).replace("\u2060", "")  # the invisible word joiners
    for tag in ("<a", "<img", "<strong", "<em", "<code", "<b>", "<h", "<li", "katex", "color:", 'role="img"', "😄"):
        assert tag not in html, (tag, html)
    for value in list(HOSTILE.values())[:4]:
        assert value in text, (value, text)  # literally, as the link holds it
    assert "'# _heading_\\n- item'" in text  # quoted with its newline escaped: no heading, no list
    assert "… (5,000 characters)" in text and len(text) < 1500
    assert not [u for u in requests if urlparse(u).hostname == "evil.example"]  # no remote image fetched
    no_exception(page)


# Every time an element of the live panel turns stale (a rerun began and has not re-sent it yet),
# its computed style then: Streamlit fades stale elements to 33 % after 0.5 s ("opacity 1s ease-in
# 0.5s"), which made the charts blink while training.
WATCH_STALE = """([seconds, wanted]) => new Promise(done => {
  const seen = [];
  const panel = document.querySelector('.st-key-live');
  const obs = new MutationObserver(records => {
    for (const r of records) {
      if (r.target.getAttribute('data-stale') !== 'true') continue;
      const style = getComputedStyle(r.target);
      seen.push({opacity: style.opacity, transition: style.transitionDuration + ' ' + style.transitionDelay,
                 chart: !!r.target.querySelector('.js-plotly-plot, .rl-curves')});
    }
    if (seen.filter(s => s.chart).length >= wanted) { obs.disconnect(); done(seen); }
  });
  obs.observe(panel, {subtree: true, attributes: true, attributeFilter: ['data-stale']});
  setTimeout(() => { obs.disconnect(); done(seen); }, seconds * 1000);
})"""


def test_the_live_charts_never_fade_while_the_panel_ticks(server, page):
    page.goto(f"{server}/{LONG}")
    wait_idle(page)
    sidebar_button(page, "Start").click()
    page.get_by_text("· training").wait_for(timeout=60_000)
    page.locator(".st-key-live .rl-curves").first.wait_for(timeout=60_000)
    seen = page.evaluate(WATCH_STALE, [60, 3])
    charts = [s for s in seen if s["chart"]]
    assert len(charts) >= 3, seen  # the timed reruns did mark the charts stale, three times at least
    assert all(s["opacity"] == "1" and s["transition"] == "0s 0s" for s in seen), seen
    sidebar_button(page, "Pause").click()
    page.get_by_text("· paused").wait_for(timeout=60_000)


def test_a_training_server_stops_on_a_signal_without_an_abort():
    # Ctrl-C on `make app`, or SIGTERM from a process manager, while a page trains: Streamlit stops
    # its server and the interpreter exits; the training must be stopped and joined first (before:
    # "terminate called without an active exception", exit status 134). Streamlit gives SIGINT and
    # SIGTERM one handler (streamlit/web/bootstrap.py), so one signal tests both: SIGINT, Ctrl-C's.
    require_browser()
    # The workers at the page's priority: with their default 10 nice levels below it, beside 2 busy loops and a
    # pytest at nice 5, step 6 did not come within 120 s once (2026-11-30); the test is about the signal.
    with streamlit_process(env={"RANKLAB_WORKER_NICE": "0"}) as (url, proc, log), chromium_page() as page:
        page.goto(f"{url}/{LONG}")
        wait_idle(page)
        sidebar_button(page, "Start").click()
        page.get_by_text("· training").wait_for(timeout=60_000)
        wait_step_at_least(page, 6)
        proc.send_signal(signal.SIGINT)
        returncode = proc.wait(timeout=180)
    text = log.read_text()
    assert "terminate called" not in text, text[-3000:]
    assert returncode == 0, (returncode, text[-3000:])  # Streamlit's own clean stop


def test_a_missing_browser_skips_locally_and_fails_in_ci(monkeypatch):
    monkeypatch.setattr(bench.browser, "CHROMIUM", ROOT / "no-such-chromium")
    monkeypatch.delenv("RANKLAB_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        require_browser()
    monkeypatch.setenv("RANKLAB_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="RANKLAB_REQUIRE_BROWSER=1"):
        require_browser()


# ---------------------------------------------------------------- above the fold at 1280 x 720
# Issue 36, D-8 / D-11: what a teacher explains must be on the projector's one screen, unscrolled.
VIEWPORT = (1280, 720)
BOXES = """sel => [...document.querySelectorAll(sel)].map(e => { const b = e.getBoundingClientRect();
  return {x: b.x, y: b.y, right: b.right, bottom: b.bottom, text: e.textContent}; })"""


def boxes(page, selector: str) -> list[dict]:
    return page.evaluate(BOXES, selector)


def assert_on_screen(found: list[dict], what: str) -> None:
    assert found, f"{what}: nothing found"
    width, height = VIEWPORT
    for b in found:
        assert b["y"] >= 0 and b["bottom"] <= height and b["x"] >= 0 and b["right"] <= width, (what, b)


def assert_apart(found: list[dict], what: str) -> None:
    """No two of these boxes overlap (panel titles that run into each other are unreadable)."""
    for i, a in enumerate(found):
        for b in found[i + 1:]:
            apart = a["right"] <= b["x"] or b["right"] <= a["x"] or a["bottom"] <= b["y"] or b["bottom"] <= a["y"]
            assert apart, (what, a, b)


@pytest.fixture
def projector(server):
    with chromium_page(*VIEWPORT) as p:
        yield p


def stepped(page, url: str) -> None:
    page.goto(url)
    wait_idle(page)
    sidebar_button(page, "Step").click()
    wait_visible(page, page.get_by_text("· paused"), "the paused status after Step")
    # "paused" shows as soon as the page asked for the tick; the tick (its step-0 evaluations after step 1
    # included) is done when the page no longer says it is training one.
    page.wait_for_function("() => !document.body.innerText.includes('training one tick')", timeout=120_000)
    wait_idle(page)
    page.locator(".st-key-live .rl-curves").first.wait_for()


def test_the_training_view_fits_a_1280x720_screen(server, projector):
    stepped(projector, server)
    title = boxes(projector, "h2")
    assert title and title[0]["y"] < 60, title  # not ~110 px of empty page above it
    assert_on_screen(boxes(projector, ".st-key-live .rl-curves"), "the training curves")
    assert_on_screen(boxes(projector, ".rl-curves .rl-panel"), "the four panels")
    assert len(boxes(projector, ".rl-curves .rl-panel")) == 4
    titles = boxes(projector, ".rl-curves .rl-panel-title")
    assert any(t["text"].startswith("held-out R@1") for t in titles)
    assert_on_screen(titles, "the panel titles")
    assert_apart(titles, "the panel titles")
    no_exception(projector)
    projector.screenshot(path=str(ARTIFACTS / "dashboard-1280x720-training.png"))


def test_compare_mode_fits_both_runs_curves_and_the_comparison_on_a_1280x720_screen(server, projector):
    stepped(projector, f"{server}/?compare=1&loss_b=smooth_ap")
    wait_visible(projector, projector.locator(".st-key-live .rl-comparison").first, "the comparison chart")
    charts = boxes(projector, ".st-key-live .rl-curves, .st-key-live .rl-comparison")
    assert len(charts) == 2
    assert_on_screen(charts, "the curves and the comparison")
    panels = boxes(projector, ".st-key-live .rl-panel")
    assert len(panels) == 8
    assert_on_screen(panels, "the 4 + 4 panels")
    recall = projector.locator(".st-key-live .rl-curves .rl-panel[data-metric='R@1'] .rl-line")
    assert recall.count() == 4  # R@1 and mAP@R of both runs in the held-out panel
    titles = boxes(projector, ".st-key-live .rl-panel-title")
    assert_on_screen(titles, "the panel titles")
    assert_apart(titles, "the panel titles")
    figure_titles = boxes(projector, ".st-key-live .rl-title")
    assert len(figure_titles) == 2 and all(t["right"] <= c["right"] for t, c in zip(figure_titles, charts))
    assert any(t["text"].startswith("decomp. gap: B − A = ") for t in titles)  # D-9: a name, not the key
    no_exception(projector)
    projector.screenshot(path=str(ARTIFACTS / "dashboard-1280x720-compare.png"))


def test_the_reproduction_view_shows_its_claims_or_verdict_table_on_a_1280x720_screen_and_never_a_stale_figure(
        server, projector):
    projector.goto(server)
    wait_idle(projector)
    # A fresh clone stores nothing yet: the first open waits for the server's warm-up (74 s at load 13).
    first = show_study(projector, "1. Rank losses compared", open_view=True, timeout_ms=300_000)
    assert first["ms"] is not None and first["mixed"] == [], first
    # Study 1 tests the papers' claims: its first screen is their table, a badge per claim (issue 36, D-11).
    assert_on_screen(boxes(projector, ".st-key-repro_table strong"), "the study's line above its claims")
    assert_on_screen(boxes(projector, ".st-key-repro_table table"), "the claims table")
    rows = boxes(projector, ".st-key-repro_table tbody tr")
    verdicts = ("resolved as in the paper", "contradicted", "not resolved")
    from lab.studies.reporting.verdicts import claims_rows

    # One row per test of a claim (supp. B.4's claims on R@1 and mAP@R: 16 since issue 43), all on screen.
    assert len(rows) == len(claims_rows("methods")) and all(r["text"].strip().startswith(verdicts) for r in rows), rows
    assert_on_screen(boxes(projector, ".st-key-repro_table tbody tr td:first-child span"), "the claims' badges")
    assert boxes(projector, ".st-key-repro_figure img")[0]["y"] < VIEWPORT[1]  # the figure starts on screen
    projector.screenshot(path=str(ARTIFACTS / "dashboard-1280x720-reproduction-claims.png"))
    for title in ("5. Decomposability gap", "3. Hyper-parameters", "1. Rank losses compared", "4. Number of bins"):
        seen = show_study(projector, title)
        # Every frame from the click on: no figure of another study visible beside the marked one.
        assert seen["ms"] is not None and seen["mixed"] == [], (title, seen)
        if title == "5. Decomposability gap":  # a study without claims: the studies' table, a badge per study
            assert_on_screen(boxes(projector, ".st-key-repro_table table"), "the verdict table")
            rows = boxes(projector, ".st-key-repro_table tbody tr")
            assert len(rows) == 6 and all("reproduce" in r["text"] or "partly" in r["text"] or "not run" in r["text"]
                                          for r in rows), rows
    no_exception(projector)
    projector.screenshot(path=str(ARTIFACTS / "dashboard-1280x720-reproduction.png"))


# Issue 46: a room-sized page. The latest numbers at 12-13 px could not be read from the back of a room; the
# held-out axis went from -1 to 1 in half steps before the first evaluation after step 0.
ROOM_PX = 24
FONT_SIZES = """sel => [...document.querySelectorAll(sel)].map(e => parseFloat(getComputedStyle(e).fontSize))"""


def test_the_latest_numbers_are_room_sized_and_every_axis_counts_whole_steps(server, projector):
    stepped(projector, f"{server}/?compare=1&loss_b=smooth_ap")  # one tick: the held-out panel has step 0 only
    numbers = projector.locator(".st-key-latest .rl-value")
    wait_visible(projector, numbers.first, "the latest held-out numbers")
    assert numbers.count() == 4  # R@1 and mAP@R of both runs
    sizes = projector.evaluate(FONT_SIZES, ".st-key-latest .rl-value")
    assert all(size >= ROOM_PX for size in sizes), sizes
    assert_on_screen(boxes(projector, ".st-key-latest .rl-value"), "the latest numbers")
    ticks = [t["text"] for t in boxes(projector, ".st-key-curves .rl-xtick")]
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks  # whole steps, none below 0
    assert "0" in ticks
    no_exception(projector)
    projector.screenshot(path=str(ARTIFACTS / "dashboard-1280x720-latest.png"))


def test_the_toy_explorers_legend_and_the_scores_main_chart_fit_a_1280x720_screen(server, projector):
    stepped(projector, server)
    projector.get_by_role("radio", name="Scores", exact=True).click()
    chart = projector.locator(".st-key-scores .main-svg")
    wait_visible(projector, chart.first, "the Scores view's chart")
    wait_idle(projector)
    assert_on_screen(boxes(projector, ".st-key-scores .js-plotly-plot"), "the Scores view's main chart")
    caption = projector.get_by_test_id("stCaptionContainer").filter(has_text="calibration").first.inner_text()
    assert "roadmap: solid lines, the α and β its calibration term uses" in caption, caption
    assert "has no calibration term" not in caption  # the loss shown has one (before: said of every loss)
    projector.get_by_role("radio", name="Toy explorer", exact=True).click()
    legend = projector.locator(".st-key-toy_fig_surrogates .legend")
    wait_visible(projector, legend.first, "the toy explorer's legend")
    wait_idle(projector)
    assert_on_screen(boxes(projector, ".st-key-toy_fig_surrogates .legend"), "the toy explorer's legend")
    assert_on_screen(boxes(projector, ".st-key-toy_fig_surrogates .js-plotly-plot"), "the toy explorer's figure")
    assert_apart(boxes(projector, ".st-key-toy_fig_surrogates .gtitle")
                 + boxes(projector, ".st-key-toy_fig_surrogates .legend"), "the toy explorer's title and legend")
    no_exception(projector)
    projector.screenshot(path=str(ARTIFACTS / "dashboard-1280x720-toys.png"))
