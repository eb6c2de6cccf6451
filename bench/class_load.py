"""A class on one server: N students' pages on one `streamlit run app.py`, every one pressing Start.

    .venv/bin/python -m bench.class_load --pages 1 3 6 12          # ~4 min per N on 2 cores
    .venv/bin/python -m bench.class_load --pages 6 --load 8        # with 8 busy processes beside it

For each N: a new server on 127.0.0.1 (its worker pool sized by RANKLAB_WORKERS and
RANKLAB_RUNS_PER_WORKER as `make app` passes them), one headless chromium (/usr/bin/chromium through
Playwright) with N pages, each in its own context (its own session), and ``--load`` busy loops beside them,
each bounded by ``timeout``. Every wait has a deadline (``--budget`` seconds per N at most). Measured in each
page, by its own clock (``performance.now()``):

* the teacher's page, first: the server's first page (cold: it imports the app, the workers start), trained to
  step 1, paused and closed;
* first screen: from the navigation to the sidebar's Start button and the page's header drawn, all N pages
  opened at once;
* Start → answer: from the click to the progress text saying "training" or the page's place in the queue;
  Start → step 1: to the first step shown (pages that train at once);
* steps/s per student: the steps each page shows over a ``--window`` of seconds while all train, and the
  longest time a training page's progress text went without changing (a frozen page);
* Pause: from the click to "paused" on the page (each Pause waits ``PAUSE_WAIT`` s of its own, after the budget);
  then whether Start is enabled again within ``START_AGAIN_WAIT`` s (a stuck button). A Pause missed prints
  what the page showed (``page_state``) and keeps a screenshot.

Prints a line per measurement and writes the "class" section of docs/benchmarks.md ("class-load" with
``--load``; ``--no-write``: print only), with the load average seen. ``--note`` says what else ran on the machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
from bench.dashboard import load
from bench.measure import machine, publish
from bench.browser import CHROMIUM, CHROMIUM_ARGS, INSTALL_HINT, PROGRESS, class_process, page_state, \
    streamlit_process, watch_events

# The Start buttons of a page (JS): the dashboard's sidebar button whose label ends in Start; the class page's
# #start once enabled (drawn disabled until the page's run is open: before then it is not a first screen).
APP_START = ("[...document.querySelectorAll('[data-testid=\"stSidebar\"] button')]"
             ".filter(b => /Start$/.test(b.innerText.trim()))")
CLASS_START = "[document.getElementById('start')].filter(b => b && !b.disabled)"


def _scripts(start: str, progress: str) -> dict[str, str]:
    """The page scripts of a front (``start``: its Start buttons, JS; ``progress``: its progress text's selector)."""
    return {
        # Injected before the page's own scripts: the first screen's time, and every change of the progress text.
        "watch": """(() => {
  window.__first = null; window.__texts = [];
  const check = () => {
    const start = (%s).length > 0;
    if (window.__first === null && start && document.querySelector('h2')) window.__first = performance.now();
    const p = document.querySelector('%s');
    const text = p ? p.innerText : '';
    const last = window.__texts.length ? window.__texts[window.__texts.length - 1][1] : null;
    if (text && text !== last) window.__texts.push([performance.now(), text]);
  };
  new MutationObserver(check).observe(document, {subtree: true, childList: true, characterData: true});
})();""" % (start, progress),
        # Armed before a click: the click's time (capture phase) and the first time ``pattern`` is in the progress.
        "arm": """pattern => { window.__clicked = null; window.__seen = null;
  document.addEventListener('click', () => { if (window.__clicked === null) window.__clicked = performance.now(); },
                            {capture: true, once: true});
  const re = new RegExp(pattern);
  const check = () => { const p = document.querySelector('%s');
    if (window.__clicked !== null && window.__seen === null && p && re.test(p.innerText)) {
      window.__seen = performance.now(); obs.disconnect(); } };
  const obs = new MutationObserver(check);
  obs.observe(document.body, {subtree: true, childList: true, characterData: true}); }""" % progress,
        "step_at_least": "n => { const p = document.querySelector('%s'); const m = p && p.innerText.match("
                         "/Step (\\d+) \\//); return m && +m[1] >= n; }" % progress,
        "start_enabled": "() => (%s).some(b => !b.disabled)" % start,
    }


FRONTS = {"app": {**_scripts(APP_START, PROGRESS), "progress": PROGRESS},
          "class": {**_scripts(CLASS_START, "#progress"), "progress": "#progress"}}
WATCH_PAGE, ARM = FRONTS["app"]["watch"], FRONTS["app"]["arm"]
STEP_AT_LEAST, START_ENABLED = FRONTS["app"]["step_at_least"], FRONTS["app"]["start_enabled"]
PAUSE_WAIT = 15.0  # s a Pause may take before it counts as missed (the target: 1 s; 2 s under load)
START_AGAIN_WAIT = 10.0  # s after a Pause answered, until a still-disabled Start counts as stuck


def start_enabled(page, wait: float, front: str = "app") -> bool:
    """Whether the page's Start is enabled within ``wait`` seconds."""
    try:
        page.wait_for_function(FRONTS[front]["start_enabled"], timeout=wait * 1000)
        return True
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: still disabled
        return False


def button(page, name: str, front: str = "app"):
    if front == "class":
        return page.locator(f"#{name.lower()}")
    return page.get_by_test_id("stSidebar").get_by_role("button", name=name, exact=True)


def progress_text(page, front: str = "app") -> str:
    """The page's progress text, "" when the page shows none within 5 s (a page that froze: reported, not fatal)."""
    try:
        return page.locator(FRONTS[front]["progress"]).first.inner_text(timeout=5000)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError
        return ""


def shown_step(page, front: str = "app") -> int:
    """The step the progress text shows (0 when it shows none)."""
    text = progress_text(page, front)
    return int(text.split("Step ", 1)[1].split(" ", 1)[0]) if "Step " in text else 0


def timed_click(page, name: str, pattern: str, deadline: float, front: str = "app") -> Optional[float]:
    """Seconds from clicking button ``name`` to ``pattern`` in the progress text (None: not by ``deadline``)."""
    page.evaluate(FRONTS[front]["arm"], pattern)
    try:
        button(page, name, front).click(timeout=max(1.0, deadline - time.monotonic()) * 1000)
    except Exception:  # noqa: BLE001 - not clickable by the deadline (N = 12 lost every row to it): missing
        return None
    try:
        page.wait_for_function("() => window.__seen !== null", timeout=max(1.0, deadline - time.monotonic()) * 1000)
    except Exception:  # noqa: BLE001 - a deadline passed: reported as missing
        return None
    return page.evaluate("() => (window.__seen - window.__clicked) / 1000")


def one_class(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement of N pages on one new server."""
    from playwright.sync_api import sync_playwright

    deadline = time.monotonic() + args.budget
    front = getattr(args, "front", "app")
    serving = class_process if front == "class" else streamlit_process
    out: dict[str, Any] = {"pages": n, "loads": [os.getloadavg()[0]]}
    env = {"RANKLAB_FAST": "1" if args.fast else "0"}
    with serving(env=env, timeout=300) as (url, _, log), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            out["cold"] = teacher_page(browser, url, args, deadline)
            pages = []
            for i in range(n):
                page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
                page.add_init_script(FRONTS[front]["watch"])
                watch_events(page)
                pages.append(page)
            for i, page in enumerate(pages):  # all at once: each navigation returns as soon as it commits
                page.goto(f"{url}/?steps={args.steps}&seed={i}", wait_until="commit")
            first = []
            for page in pages:
                page.wait_for_function("() => window.__first !== null", timeout=_left(deadline))
                first.append(page.evaluate("() => window.__first") / 1000)
            out["first"] = first
            answered, stepped = [], []
            for page in pages:
                answered.append(timed_click(page, "Start", "· training|in the queue", deadline, front))
            out["queued"] = sum("in the queue" in progress_text(page, front) for page in pages)
            # The first steps get a third of what is left: pages that never step (workers starved by a load)
            # still leave the window and the Pauses their time (with --load 8 they took it all: 6 Pauses missed).
            stepping = _third(deadline)
            out["unanswered"] = []
            for i, page in enumerate(pages):
                if "in the queue" in progress_text(page, front):
                    continue
                try:
                    page.wait_for_function(FRONTS[front]["step_at_least"], arg=1, timeout=_left(stepping))
                except Exception:  # noqa: BLE001 - no step by the deadline: reported as missed, with what it shows
                    stepped.append(None)
                    out["unanswered"].append("no step: " + page_state(page, f"N{n}-page{i}-step"))
                    continue
                t = page.evaluate("() => window.__texts.find(([t, s]) => /Step [1-9]/.test(s) && t > window.__clicked)")
                stepped.append((t[0] - page.evaluate("() => window.__clicked")) / 1000 if t else None)
            out["answered"], out["stepped"] = answered, stepped
            before = [(time.monotonic(), shown_step(page, front)) for page in pages]
            pages[0].wait_for_timeout(args.window * 1000)  # the measurement's window: everybody trains
            out["rates"] = [(shown_step(page, front) - s) / (time.monotonic() - t)
                            for page, (t, s) in zip(pages, before)]
            out["frozen"] = max(_longest_gap(page, args.window) for page in pages)
            out["loads"].append(os.getloadavg()[0])
            out["pauses"], out["stuck"], unanswered = pause_all(pages, f"N{n}", front)
            out["unanswered"] += unanswered
            # A page whose front end threw (N = 12: "Bad delta path index 1") is blank from then on: a crash.
            out["crashed"] = sum(any(" pageerror: " in e for e in page.events) for page in pages)
            out["loads"].append(os.getloadavg()[0])
        finally:
            browser.close()
        out["errors"] = log.read_text().count("Traceback")
        if out["errors"]:  # kept for reading: the section reports only their number
            kept = Path(os.environ.get("TMPDIR", "/tmp")) / f"class_load_server_N{n}.log"
            kept.write_text(log.read_text())
            print(f"N={n}: {out['errors']} tracebacks in the server's log, kept in {kept}", flush=True)
    return out


def pause_all(pages: list, name: str, front: str = "app") -> tuple[list[Optional[float]], int, list[str]]:
    """Pause every page in turn: (seconds to "paused" or None, stuck Starts, what each unanswered page showed).
    Each Pause has a wait of its own, outside the budget: with one shared deadline, a page that could not be
    paused took what was left, and every later Pause and Start got 1 s (7 "missed" and 4 "stuck" at N = 12
    where one page had failed)."""
    pauses: list[Optional[float]] = []
    stuck, unanswered = 0, []
    for i, page in enumerate(pages):
        pauses.append(timed_click(page, "Pause", "· paused", time.monotonic() + PAUSE_WAIT, front))
        if pauses[-1] is None:  # what the page showed instead, for the reader of the bench's output
            unanswered.append(page_state(page, f"{name}-page{i}-pause"))
            continue  # not paused: its Start is not expected back
        if not start_enabled(page, START_AGAIN_WAIT, front):
            stuck += 1
            unanswered.append("stuck: " + page_state(page, f"{name}-page{i}-stuck"))
    return pauses, stuck, unanswered


def teacher_page(browser, url: str, args: argparse.Namespace, deadline: float) -> tuple[float, Optional[float]]:
    """The teacher's page before the class: the server's first page (it imports the app and starts the training
    workers), trained to step 1 and paused, then closed. Its (first screen, Start → step 1) are the cold start."""
    front = getattr(args, "front", "app")
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.add_init_script(FRONTS[front]["watch"])
    page.goto(f"{url}/?steps={args.steps}&seed=100", wait_until="commit")
    page.wait_for_function("() => window.__first !== null", timeout=_left(deadline))
    first = page.evaluate("() => window.__first") / 1000
    timed_click(page, "Start", "· training|in the queue", deadline, front)
    try:  # a third of the budget at most: the class's own measurements need the rest
        page.wait_for_function(FRONTS[front]["step_at_least"], arg=1, timeout=_left(_third(deadline)))
    except Exception:  # noqa: BLE001 - no step by then (a starved pool): reported as missing
        # Paused as a teacher would: a run left running keeps its place in a worker until the page's watch
        # ends (2 min), and one student of six waited in the queue behind it.
        timed_click(page, "Pause", "· paused", deadline, front)
        context.close()
        return first, None
    step = page.evaluate("() => { const t = window.__texts.find(([t, s]) => /Step [1-9]/.test(s) && "
                         "t > window.__clicked); return t ? (t[0] - window.__clicked) / 1000 : null; }")
    timed_click(page, "Pause", "· paused", deadline, front)
    context.close()
    return first, step


def _third(deadline: float) -> float:
    """A deadline a third of the way from now to ``deadline``: one phase's share of what is left."""
    return time.monotonic() + (deadline - time.monotonic()) / 3


def _left(deadline: float) -> float:
    return max(1.0, deadline - time.monotonic()) * 1000


def _longest_gap(page, window: float) -> float:
    """The longest time (s) the page's progress text stayed the same over the last ``window`` seconds while its
    run trained (updates come about every second)."""
    now, texts = page.evaluate("() => [performance.now(), window.__texts]")
    return longest_gap([(t / 1000, s) for t, s in texts], now / 1000, window)


def longest_gap(texts: list[tuple[float, str]], now: float, window: float) -> float:
    """The longest time between changes of a training page's progress text (``texts``: (time, text) of each
    change, seconds) in the ``window`` seconds up to ``now``; a page that trained through the window without a
    change counts the whole window (not 0: a page starved by a load is frozen, not smooth)."""
    start = now - window
    before = [s for t, s in texts if t <= start]
    times = [start] if before and "· training" in before[-1] else []
    times += [t for t, s in texts if t > start and "· training" in s] + [now]
    return max((b - a) for a, b in zip(times, times[1:])) if len(times) > 1 else 0.0


def _stat(values: list[Optional[float]], fmt: str = "{:.1f} s") -> str:
    known = [v for v in values if v is not None]
    missing = len(values) - len(known)
    text = f"{fmt.format(statistics.median(known))} / {fmt.format(max(known))}" if known else "–"
    return text + (f" ({missing} missed)" if missing else "")


def section(rows: list[dict[str, Any]], args: argparse.Namespace, workers: str) -> str:
    """The "class" section: a row per N, with the load seen and the targets judged."""
    table = []
    for r in rows:
        training = [x for x in r["rates"] if x > 0]
        rate = f"{statistics.median(training):.2f} ({min(training):.2f}-{max(training):.2f})" if training else "–"
        cold = " / ".join("–" if v is None else f"{v:.1f} s" for v in r["cold"])
        table.append(f"| {r['pages']} | {args.load} | {min(r['loads']):.1f}-{max(r['loads']):.1f} | {cold} | "
                     f"{_stat(r['first'])} | {_stat(r['answered'])} | {_stat(r['stepped'])} | {r['queued']} | "
                     f"{rate} | {_stat(r['pauses'], '{:.2f} s')} | {r['stuck']} | {r['frozen']:.1f} s | "
                     f"{r.get('crashed', 0)} |")
    beside = f"{args.load} busy loop{'s' if args.load != 1 else ''}" + (f" and {args.note}" if args.note else "")
    front = getattr(args, "front", "app")
    title, first = (("A class on one server", "the server's first page: it imports the app and starts the training "
                     "workers") if front == "app" else
                    ("A class on one server, the class page", "the server's first page; the server started its "
                     "training workers when it started"))
    flag = "" if front == "app" else " --front class"
    return "\n".join([
        f"## {title} (`python -m bench.class_load --pages ...{flag} --load {args.load}`)", "",
        f"{machine()}; {'fast' if args.fast else 'full'} mode, {workers}; N headless chromium pages at 1280 x 720 "
        f"on the same 2 cores as the server, each its own session, {time.strftime('%Y-%m-%d')}. Beside them: "
        f"{beside}. Each N starts a new server; the teacher's page opens it first ({first}), trains to step 1, "
        "pauses and closes, and its two times "
        "are the cold start. Then the class: times are median / max over the pages, each measured in the page "
        "from the click (or the "
        "navigation) to the DOM state: first screen (" + ("Start and the header drawn" if front == "app" else
                                                          "the header drawn and Start enabled") +
        ", N pages opened at once), Start → "
        "answer (\"training\" or the page's place in the queue), Start → step 1 (the pages admitted at once), "
        f"Pause (\"paused\", {PAUSE_WAIT:.0f} s at most each). Steps/s: each training page's steps over "
        f"{args.window:.0f} s, median (min-max). Stuck: a Start still disabled {START_AGAIN_WAIT:.0f} s after its "
        "answered Pause. Freeze: the longest time a training page's progress text did not change (it changes about "
        "every second). Crashed: pages whose front end threw an error (a blank page from then on).", "",
        "| N | busy loops | load (1 min) | teacher's page (cold): first screen / step 1 | first screen | "
        "Start → answer | Start → step 1 | queued | steps/s per student | Pause | stuck | freeze | crashed |",
        "|---:|---:|---|---|---|---|---|---:|---|---|---:|---:|---:|", *table, "",
        "Targets (issue 46, N = 6 on 2 cores, browsers included): first screen ≤ 4 s, Start → training ≤ 2 s, "
        "every Pause ≤ 1 s (≤ 2 s with 8 busy processes), no stuck button; at N = 12 the queue works and no page "
        "freezes.", ""])


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[1, 3, 6, 12], help="class sizes N")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the class")
    parser.add_argument("--window", type=float, default=20.0, help="seconds all pages train while measured")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds at most per N (every wait's deadline)")
    parser.add_argument("--steps", type=int, default=100_000, help="run length: no run ends during the bench")
    parser.add_argument("--fast", action="store_true", help="fast mode (12 classes, tiny batches)")
    parser.add_argument("--front", choices=sorted(FRONTS), default="app",
                        help="app: the dashboard (streamlit run app.py); class: the class page (make class)")
    parser.add_argument("--note", default="", help="what else ran on the machine, for the section")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing: {INSTALL_HINT}")
    from lab.core.env import dashboard_workers, runs_per_worker

    workers = f"{dashboard_workers()} worker processes x {runs_per_worker()} runs at once"
    rows = []
    with load(args.load, int(args.budget * len(args.pages)) + 600):
        for n in args.pages:
            r = one_class(n, args)
            rows.append(r)
            print(f"N={n}: teacher's page (cold) {r['cold']}, first screen {_stat(r['first'])}, "
                  f"Start→answer {_stat(r['answered'])}, "
                  f"Start→step 1 {_stat(r['stepped'])}, queued {r['queued']}, "
                  f"steps/s {[round(x, 2) for x in r['rates']]}, "
                  f"Pause {_stat(r['pauses'], '{:.2f} s')}, stuck {r['stuck']}, freeze {r['frozen']:.1f} s, "
                  f"crashed pages {r['crashed']}, "
                  f"server tracebacks {r['errors']}, load {min(r['loads']):.1f}-{max(r['loads']):.1f}", flush=True)
            for text in r.get("unanswered", []):
                print(f"  not answered: {text}", flush=True)
    publish(section_name(args.load, args.front), section(rows, args, workers), dry_run=args.no_write)


def section_name(busy: int, front: str = "app") -> str:
    """The quiet machine's table and the loaded one's are two sections: a run with ``--load`` keeps the other;
    the class page's tables are two more."""
    return ("class" if front == "app" else "class-page") + ("" if busy == 0 else "-load")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
