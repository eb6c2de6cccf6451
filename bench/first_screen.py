"""What a first screen of the dashboard costs in CPU: chromium's (all its processes) and the Streamlit server's.

    .venv/bin/python -m bench.first_screen                 # ~1 min on 2 cores; prints, writes nothing
    .venv/bin/python -m bench.first_screen --page bare     # the same for a bare Streamlit page (BARE_PAGE)
    .venv/bin/python -m bench.first_screen --cache shared  # every page in one browser context
    .venv/bin/python -m bench.first_screen --page my_app.py --single 1 --six 3  # any script, other trial counts

On one server, first the teacher's page (cold: the server imports the app and starts its workers), then one page
at a time three times and six pages at once twice, timed from the navigation to the sidebar's Start button and
the header drawn (bench/class_load.py's WATCH_PAGE). Each page is a new browser context (no cache, as a
student's first visit), or with ``--cache shared`` a tab of one context (its HTTP and code caches warm after
the first page, as a student's browser on a second visit). CPU seconds are read from /proc (user + system,
reaped children included) before the navigations and once every page has its first screen. With the browsers
on the server's cores, six pages cost the machine six times chromium's share: that is the floor of
bench/class_load.py's first screen at N = 6, whatever the server does. ``--page bare`` measures that floor for
Streamlit itself: a page with one Start button and one header, nothing of the dashboard.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_process
from bench.class_load import WATCH_PAGE

TICK = os.sysconf("SC_CLK_TCK")
# The least page WATCH_PAGE takes as a first screen: a Start button in the sidebar and a header (an h2).
BARE_PAGE = """import streamlit as st

with st.sidebar:
    st.button("▶ Start")
st.header("A bare Streamlit page")
"""


def cpu(match: str) -> float:
    """CPU seconds of every process whose command line contains ``match``."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                if match not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        total += sum(int(x) for x in fields[11:15]) / TICK  # utime, stime, cutime, cstime
    return total


def batch(browser, url: str, n: int, tag: str, shared=None) -> None:
    """``n`` pages opened at once, each in a new context, or as tabs of the context ``shared``."""
    pages = []
    for _ in range(n):
        page = (shared or browser.new_context(viewport={"width": 1280, "height": 720})).new_page()
        page.add_init_script(WATCH_PAGE)
        pages.append(page)
    chromium, server, t0 = cpu("chrom"), cpu("streamlit"), time.monotonic()
    for i, page in enumerate(pages):  # all at once: each navigation returns as soon as it commits
        page.goto(f"{url}/?seed={i}", wait_until="commit")
    firsts = []
    for page in pages:
        page.wait_for_function("() => window.__first !== null", timeout=120_000)
        firsts.append(page.evaluate("() => window.__first") / 1000)
    wall = time.monotonic() - t0
    chromium, server = cpu("chrom") - chromium, cpu("streamlit") - server
    print(f"{tag} n={n}: first screen median {sorted(firsts)[n // 2]:.2f} s max {max(firsts):.2f} s; "
          f"wall {wall:.2f} s; chromium {chromium:.2f} cpu-s ({chromium / n:.2f}/page), "
          f"server {server:.2f} cpu-s ({server / n:.2f}/page); load {os.getloadavg()[0]:.1f}", flush=True)
    for page in pages:
        page.close() if shared else page.context.close()
    time.sleep(3)


def main(argv: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(prog="python -m bench.first_screen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", default="app",
                        help="app (the dashboard, app.py), bare (BARE_PAGE, Streamlit's own floor) or a script's path")
    parser.add_argument("--cache", choices=("new", "shared"), default="new",
                        help="each page a new browser context (a first visit) or tabs of one context")
    parser.add_argument("--single", type=int, default=3, help="trials of one page at a time (default 3)")
    parser.add_argument("--six", type=int, default=2, help="trials of six pages at once (default 2)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "bare.py"
        app.write_text(BARE_PAGE)
        if args.page not in ("app", "bare"):
            app = Path(args.page).resolve()
            if not app.is_file():
                parser.error(f"--page: {args.page} is not a file (accepted: app, bare or a script's path)")
        with streamlit_process(env={"RANKLAB_FAST": "0"}, timeout=300,
                               **({} if args.page == "app" else {"app": app})) as (url, _, _), \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            shared = browser.new_context(viewport={"width": 1280, "height": 720}) if args.cache == "shared" else None
            print(f"page {args.page}, cache {args.cache}", flush=True)
            batch(browser, url, 1, "teacher (cold)", shared)
            for k in range(args.single):
                batch(browser, url, 1, f"one page #{k}", shared)
            for k in range(args.six):
                batch(browser, url, 6, f"six pages #{k}", shared)
            browser.close()


if __name__ == "__main__":
    main()
