"""The dashboard in a real browser under load: how long Pause takes in each view, and how often
the charts dim (Streamlit's stale-element fade) while a run trains.

    .venv/bin/python -m bench.dashboard --load 4          # ~5 min on 2 cores

Starts `streamlit run app.py` (full mode unless --fast) on a free local port and headless Debian
chromium (/usr/bin/chromium through Playwright), compare mode (ROADMAP vs SmoothAP, defaults,
a run long enough never to finish). ``--load N`` runs N busy loops beside it (each bounded by
``timeout``, all killed at the end): load N on top of the dashboard's own.

* Pause: in each view, Start, train a random 3-8 s (evaluations and held-out snapshots fall
  anywhere), then click Pause from the page's own script and time, in the page (a
  MutationObserver), until the progress text says "paused"; the step shown then must not move
  afterwards (checked 2 s later).
* Dimming: in each view, while training for ``--watch`` seconds, every animation frame records
  whether a chart's element container is faded (computed opacity < 0.99); episodes are counted.

Prints one line per measurement and writes the "dashboard" section of docs/benchmarks.md (median
and max per view, the load averages seen; ``--note`` says what else ran beside it).

    .venv/bin/python -m bench.dashboard --reproduction     # ~2 min: the Reproduction view (issue 36)

``--reproduction`` times the Reproduction view at 1280 x 720 instead, from the click to the chosen
study marked (its row of the studies' table, or for study 1 the line above its claims table) and its
figure on the page (``bench.browser.show_study``): its first open on a new
server with nothing stored (the warm-up thread still computing), then ``--trials`` opens (from the
Training view) and switches through every study, then the first open on a second server reading
what the first stored; and counts the frames where a figure of another study was visible. Writes
the "dashboard-reproduction" section.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
from bench.measure import machine, publish
from bench.browser import CHROMIUM, INSTALL_HINT, chromium_page, show_study, streamlit_server, wait_idle

VIEWS = ("Training", "Retrievals", "Embeddings", "Scores")
PROGRESS = '[data-testid="stProgress"]'
# Installed before the click: the page's time of the click and of the first "paused" text.
ARM_PAUSE = r"""() => {
  window.__pausedAt = null;
  const seen = () => { const p = document.querySelector('%s');
    if (p && / · paused/.test(p.innerText) && window.__pausedAt === null) window.__pausedAt = performance.now(); };
  const obs = new MutationObserver(seen);
  obs.observe(document.body, {subtree: true, childList: true, characterData: true});
  const button = [...document.querySelectorAll('[data-testid="stSidebar"] button')]
    .find(b => /(^|\s)Pause$/.test(b.innerText.trim()));  // the icon's ligature comes first
  window.__clickedAt = performance.now();
  button.click();
}""" % PROGRESS
WATCH_DIMMING = """(seconds) => new Promise(done => {
  const episodes = []; let start = null; const t0 = performance.now();
  const frame = () => {
    const now = performance.now();
    const dim = [...document.querySelectorAll('.js-plotly-plot, .rl-curves')].some(p => {
      for (let e = p; e && e !== document.body; e = e.parentElement)
        if (parseFloat(getComputedStyle(e).opacity) < 0.99) return true;
      return false; });
    if (dim && start === null) start = now;
    if (!dim && start !== null) { episodes.push(now - start); start = null; }
    if (now - t0 < seconds * 1000) requestAnimationFrame(frame);
    else { if (start !== null) episodes.push(now - start); done(episodes); }
  };
  requestAnimationFrame(frame);
})"""


@contextlib.contextmanager
def load(n: int, seconds: int) -> Iterator[None]:
    """``n`` busy loops, each ended by ``timeout`` after ``seconds`` at the latest, killed on exit."""
    procs = [subprocess.Popen(["timeout", str(seconds), "sh", "-c", "while :; do :; done"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def sidebar_button(page, name: str):
    return page.get_by_test_id("stSidebar").get_by_role("button", name=name, exact=True)


def step_shown(page) -> int:
    text = page.locator(PROGRESS).first.inner_text()
    return int(text.split("Step ", 1)[1].split(" ", 1)[0])


def open_view(page, url: str, view: str) -> None:
    page.goto(url)
    wait_idle(page)
    if view != "Training":
        page.get_by_role("radio", name=view, exact=True).click()
        wait_idle(page)


def start(page) -> None:
    sidebar_button(page, "Start").click()
    page.get_by_text("· training").wait_for(timeout=300_000)


def pause_trial(page, rng: random.Random) -> tuple[float, int, int]:
    """(seconds from the click to 'paused' on the page, step shown then, step shown 2 s later)."""
    start(page)
    page.wait_for_timeout(rng.uniform(3000, 8000))  # a measurement's dwell time, not a wait for the page
    page.evaluate(ARM_PAUSE)
    page.wait_for_function("() => window.__pausedAt !== null", timeout=300_000)
    seconds = page.evaluate("() => (window.__pausedAt - window.__clickedAt) / 1000")
    shown = step_shown(page)
    page.wait_for_timeout(2000)
    return seconds, shown, step_shown(page)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=0, help="busy loops beside the dashboard")
    parser.add_argument("--trials", type=int, default=4, help="Pause clicks per view")
    parser.add_argument("--watch", type=float, default=20.0, help="seconds of dimming watch per view (0: skip)")
    parser.add_argument("--views", nargs="+", choices=VIEWS, default=list(VIEWS))
    parser.add_argument("--fast", action="store_true", help="fast mode (tiny runs)")
    parser.add_argument("--note", default="", help="what else ran on the machine, for the section")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--reproduction", action="store_true", help="time the Reproduction view instead")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing: {INSTALL_HINT}")
    if args.reproduction:
        times, mixed, loads = reproduction_times(args)
        publish("dashboard-reproduction", reproduction_section(args, times, mixed, loads), dry_run=args.no_write)
        return
    rng = random.Random(0)
    query = urlencode({"compare": "1", "loss_b": "smooth_ap", "steps": 100_000})
    env = {"RANKLAB_FAST": "1" if args.fast else "0"}
    pauses: dict[str, list[float]] = {}
    dims: dict[str, list[float]] = {}
    loads, moved = [os.getloadavg()[0]], 0
    with load(args.load, 3600), streamlit_server(env=env) as url, chromium_page(width=1440, height=1000) as page:
        for view in args.views:
            open_view(page, f"{url}/?{query}", view)
            for trial in range(args.trials):
                seconds, shown, later = pause_trial(page, rng)
                pauses.setdefault(view, []).append(seconds)
                moved += later != shown
                loads.append(os.getloadavg()[0])
                print(f"{view:10s} pause {trial + 1}: {seconds:5.2f} s  (step {shown}, 2 s later {later})"
                      f"{'  MOVED AFTER PAUSE' if later != shown else ''}  load {os.getloadavg()[0]:.1f}", flush=True)
            if args.watch > 0:
                start(page)
                episodes = [ms / 1000 for ms in page.evaluate(WATCH_DIMMING, args.watch)]
                sidebar_button(page, "Pause").click()
                page.get_by_text("· paused").wait_for(timeout=300_000)
                dims[view] = episodes
                loads.append(os.getloadavg()[0])
                print(f"{view:10s} dimming: {len(episodes)} episodes in {args.watch:.0f} s, longest "
                      f"{max(episodes, default=0):.2f} s  load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nsummary (load generator {args.load}, {'fast' if args.fast else 'full'} mode, "
          f"{time.strftime('%Y-%m-%d %H:%M')}):")
    for view, values in pauses.items():
        print(f"  {view:10s} pause median {statistics.median(values):.2f} s, max {max(values):.2f} s "
              f"over {len(values)}")
    for view, episodes in dims.items():
        print(f"  {view:10s} dimmed {len(episodes)} times in {args.watch:.0f} s, "
              f"longest {max(episodes, default=0):.2f} s")
    publish("dashboard", section(args, pauses, dims, loads, moved), dry_run=args.no_write)


def section(args: argparse.Namespace, pauses: dict[str, list[float]], dims: dict[str, list[float]],
            loads: list[float], moved: int = 0) -> str:
    """The "dashboard" section: Pause and dimming per view, the load they were measured at."""
    rows = [f"| {view} | {statistics.median(values):.2f} s | {max(values):.2f} s | {len(values)} | "
            + (f"{len(dims[view])} in {args.watch:.0f} s, longest {max(dims[view], default=0):.2f} s |" if view in dims
               else "not watched |") for view, values in pauses.items()]
    worst = max((max(v) for v in pauses.values()), default=float("nan"))
    beside = f"{args.load} busy loop{'s' if args.load != 1 else ''}" + (f" and {args.note}" if args.note else "")
    return "\n".join([
        "## The dashboard in chromium under load (`python -m bench.dashboard --load N`)", "",
        f"{machine()}; {'fast' if args.fast else 'full'} mode, compare mode (ROADMAP vs SmoothAP), headless "
        f"chromium at 1440 x 1000, {time.strftime('%Y-%m-%d')}. Beside the dashboard: {beside}. Load average "
        f"(1 min) seen during the run: {min(loads):.1f}-{max(loads):.1f} on 2 cores. Pause: from the click to "
        "'· paused' on the page, timed in the page, after 3-8 s of training; the step shown must not move in the "
        f"next 2 s: it moved after {moved} of {sum(map(len, pauses.values()))} clicks. Dimming: chart containers "
        "faded by Streamlit's stale-element style (opacity < 0.99) while training.", "",
        "| view | Pause, median | Pause, max | clicks | dimming episodes |", "|---|---:|---:|---:|---|", *rows, "",
        f"Goal (issue 22.4): Pause within 2 s in every view at load 4 (here {min(loads):.1f}-{max(loads):.1f}): "
        + (f"**met** (max {worst:.2f} s)." if worst <= 2 else f"**missed** (max {worst:.2f} s)."), ""])

STUDIES = ("1. Rank losses compared", "2. Batch size", "3. Hyper-parameters", "4. Number of bins",
           "5. Decomposability gap", "6. Memory bank")


def reproduction_times(args: argparse.Namespace) -> tuple[dict[str, list[float]], int, list[float]]:
    """Seconds from the click to the study shown, per kind of measurement; the frames where another
    study's figure was visible; the load averages seen."""
    import tempfile

    times: dict[str, list[float]] = {}
    mixed, loads = 0, [os.getloadavg()[0]]

    def shown(page, kind: str, title: str, open_view: bool = False) -> None:
        nonlocal mixed
        seen = show_study(page, title, open_view=open_view, timeout_ms=300_000)
        if seen["ms"] is None:
            raise RuntimeError(f"{kind}: {title} not shown within 300 s: {seen}")
        times.setdefault(kind, []).append(seen["ms"] / 1000)
        mixed += len(seen["mixed"])
        loads.append(os.getloadavg()[0])
        print(f"{kind:34s} {title:26s} {seen['ms'] / 1000:5.2f} s  load {loads[-1]:.1f}", flush=True)

    with tempfile.TemporaryDirectory() as store, load(args.load, 3600):
        env = {"RANKLAB_FAST": "1" if args.fast else "0", "RANKLAB_REPRODUCTION_CACHE": store}
        with streamlit_server(env=env) as url, chromium_page(width=1280, height=720) as page:
            page.goto(url)
            wait_idle(page)
            shown(page, "first open, new server, nothing stored", STUDIES[0], open_view=True)
            for _ in range(args.trials):
                page.get_by_role("radio", name="Training", exact=True).click()
                wait_idle(page)
                shown(page, "open (from the Training view)", STUDIES[0], open_view=True)
                wait_idle(page)
                for title in STUDIES[1:] + STUDIES[:1]:
                    shown(page, "switch to another study", title)
                    wait_idle(page)
        with streamlit_server(env=env) as url, chromium_page(width=1280, height=720) as page:
            page.goto(url)
            wait_idle(page)
            shown(page, "first open, new server, stored", STUDIES[0], open_view=True)
    return times, mixed, loads


def reproduction_section(args: argparse.Namespace, times: dict[str, list[float]], mixed: int,
                         loads: list[float]) -> str:
    """The "dashboard-reproduction" section: each measurement's median and max, and the 1 s goal
    judged on every measurement but the first open of a server with nothing stored."""
    rows = [f"| {kind} | {statistics.median(v):.2f} s | {max(v):.2f} s | {len(v)} |" for kind, v in times.items()]
    judged = [x for kind, v in times.items() if "nothing stored" not in kind for x in v]
    worst = max(judged, default=float("nan"))
    beside = f"{args.load} busy loop{'s' if args.load != 1 else ''}" + (f" and {args.note}" if args.note else "")
    return "\n".join([
        "## The Reproduction view in chromium (`python -m bench.dashboard --reproduction`)", "",
        f"{machine()}; headless chromium at 1280 x 720, {time.strftime('%Y-%m-%d')}. Beside the dashboard: {beside}. "
        f"Load average (1 min) seen: {min(loads):.1f}-{max(loads):.1f} on 2 cores. Timed in the page from the click "
        "(on the view's button, or on a study in the list) to the frame where the chosen study is marked (its row of "
        "the studies' table, or for study 1 the line above its claims table, one row per claim of the papers) and only "
        "its figures are visible. What `lab.studies.reporting.verdicts` derives from `results/` is computed "
        "once per hash of the results files and of lab/studies' code by a thread started with the server, and stored "
        "in `.cache/reproduction/`; the first row is a server with nothing stored, opened as soon as the page "
        f"loaded. Frames with another study's figure visible beside the marked study: {mixed}.", "",
        "| measurement | median | max | n |", "|---|---:|---:|---:|", *rows, "",
        "Goal (issue 36, D-11): open and switch within 1 s, once the studies are computed or stored: "
        + (f"**met** (max {worst:.2f} s)." if worst <= 1 else f"**missed** (max {worst:.2f} s)."), ""])


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
