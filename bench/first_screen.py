"""What a first screen of the dashboard costs in CPU: chromium's (all its processes) and the Streamlit server's.

    .venv/bin/python -m bench.first_screen            # ~1 min on 2 cores; prints, writes nothing

On one server, first the teacher's page (cold: the server imports the app and starts its workers), then one page
at a time three times and six pages at once twice, each a new browser context (no cache, as a student's first
visit), timed from the navigation to the sidebar's Start button and the header drawn (bench/class_load.py's
WATCH_PAGE). CPU seconds are read from /proc (user + system, reaped children included) before the navigations
and once every page has its first screen. With the browsers on the server's cores, six pages cost the machine
six times chromium's share: that is the floor of bench/class_load.py's first screen at N = 6, whatever the
server does.
"""
from __future__ import annotations

import os
import time

from bench.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_process
from bench.class_load import WATCH_PAGE

TICK = os.sysconf("SC_CLK_TCK")


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


def batch(browser, url: str, n: int, tag: str) -> None:
    pages = []
    for _ in range(n):
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
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
        page.context.close()
    time.sleep(3)


def main() -> None:
    from playwright.sync_api import sync_playwright

    with streamlit_process(env={"RANKLAB_FAST": "0"}, timeout=300) as (url, _, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        batch(browser, url, 1, "teacher (cold)")
        for k in range(3):
            batch(browser, url, 1, f"one page #{k}")
        for k in range(2):
            batch(browser, url, 6, f"six pages #{k}")
        browser.close()


if __name__ == "__main__":
    main()
