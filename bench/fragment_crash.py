"""Streamlit's front end blanking a page, reproduced without the lab: the live panel's shape alone.

    .venv/bin/python -m bench.fragment_crash --pages 12 --load 4 --seconds 180   # ~4 min on 2 cores

At N = 12, ``bench/class_load.py`` found 1-2 training pages blank in about one run in four, each after the
front end threw ``Bad delta path index 1 (should be between [0, 0])``. ``SHAPE_PAGE`` keeps only the shape of
``app_pages/live.py``: one keyed container holding two timed fragments (1 s and 2 s), columns and an optional
keyed container in the first, a plotly chart in the second, and a full rerun asked from a fragment now and
then; no training, no worker, no lab import. Its N pages open on one server with ``--load`` busy loops
beside them; every 10 s it prints which pages threw. By hand, 2026-11-29 (Streamlit 1.67.0, chromium on the
same 2 cores; the first two runs from a scratch copy of this page): 12 pages for 3 min, none threw with no
busy loop; with 4 busy loops page 3 threw that error 2 min in; a third run (4 loops, 150 s) saw none: the
error is rare, and a run without it proves nothing. Prints only; writes nothing.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Optional

from bench.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_process, watch_events
from bench.dashboard import load

SHAPE_PAGE = '''import random, time
import plotly.graph_objects as go
import streamlit as st

st.sidebar.button("Start")
st.header("The live panel's shape")
st.session_state.setdefault("t0", time.time())
st.html("<style>.st-key-live {}</style>")


def progress():
    n = int(time.time() - st.session_state.t0)
    a, b = st.columns([3, 2])
    a.progress(min(1.0, n / 1000), text=f"Step {n}")
    if n % 25 < 12:
        with b.container(key="latest"):
            st.html(f"<b>R@1 {random.random():.3f}</b>")
    if random.random() < 0.05:
        st.rerun()


def content():
    n = int(time.time() - st.session_state.t0)
    if n < 5:
        st.info("building")
        return
    st.plotly_chart(go.Figure(go.Scatter(y=[random.random() for _ in range(n)])), key="curves")


with st.container(key="live"):
    st.fragment(run_every=1.0)(progress)()
    st.fragment(run_every=2.0)(content)()
'''


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=12, help="pages on the one server")
    parser.add_argument("--load", type=int, default=4, help="busy loops beside them")
    parser.add_argument("--seconds", type=float, default=180.0, help="how long the pages run")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "shape.py"
        app.write_text(SHAPE_PAGE)
        with load(args.load, int(args.seconds) + 120), streamlit_process(app=app) as (url, _, _), \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            pages = []
            for _ in range(args.pages):
                page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
                watch_events(page)
                page.goto(url, wait_until="commit")
                pages.append(page)
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                pages[0].wait_for_timeout(10_000)
                threw = [i for i, page in enumerate(pages) if any(" pageerror: " in e for e in page.events)]
                print(f"{time.strftime('%H:%M:%S')} pages whose front end threw: {threw}", flush=True)
            for i, page in enumerate(pages):
                for event in page.events:
                    if " pageerror: " in event:
                        print(f"page {i}: {event}", flush=True)
            browser.close()


if __name__ == "__main__":
    main()
