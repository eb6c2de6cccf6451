"""Streamlit's front end blanking a page, reproduced in 40 s without the lab, and the layout that stops it.

    .venv/bin/python -m bench.fragment_crash --layout shared   # the live panel's layout before 5b2befe
    .venv/bin/python -m bench.fragment_crash --layout own      # today's: app_pages.fragments.fragment_in_container

At N = 12, ``bench/class_load.py`` found 1-2 training pages blank in about one run in four, each after the
front end threw ``Bad delta path index 1 (should be between [0, 0])``. ``SHAPE_PAGE`` keeps only the shape
of ``app_pages/live.py`` (two timed fragments in one keyed container, columns, a plotly chart, a full rerun
asked from a fragment now and then), with ticks 3x faster than the dashboard's so that the rare event is
common. ``--layout shared`` puts the two fragments side by side in the container, as the live panel did;
``--layout own`` gives each a container of its own (``app_pages/fragments.py`` says why that helps).

Every page's websocket frames are decoded (Streamlit's ``ForwardMsg``): the report counts the runs whose
end never reached the page ("cut") and, for the first page whose front end threw, prints the messages
before the error: the evidence for the mechanism. By hand, 2026-11-29 (Streamlit 1.67.0, 6 pages, 40 s, no
busy loop): ``shared`` blanked 1 or 2 pages of 6 in each of 5 runs (4 of them with a scratch copy of this
page), ``own`` none in 6 (4 by hand, 2 of tests/test_fragment_layout.py).

Every frame a page sends is kept too (``Sent``: its rerun requests), and a page that received nothing in its
last seconds gets its last messages printed: with ``--load 4``, 2 of 9 runs had such a page, whose timers a
lost full run had cleared (``app_pages/fragments.py`` says how, and how each fragment run now restores them:
0 of 11 runs after, 2026-11-30). ``timers`` says which fragments' timers the full runs and the fragment runs set.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from bench.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_process
from bench.dashboard import load

SHAPE_PAGE = '''import random, sys, time
import plotly.graph_objects as go
import streamlit as st
sys.path.insert(0, {root!r})  # the dashboard's own layout helper (it imports only Streamlit)
from app_pages.fragments import fragment_in_container

st.sidebar.button("Start")
st.header("The live panel's shape")
st.session_state.setdefault("t0", time.time())
st.html("<style>.st-key-live {{}}</style>")


def progress():
    n = int(10 * (time.time() - st.session_state.t0))
    a, b = st.columns([3, 2])
    a.progress(min(1.0, n / 10000), text=f"Step {{n}}")
    if n % 25 < 12:
        with b.container(key="latest"):
            st.html(f"<b>R@1 {{random.random():.3f}}</b>")
    if random.random() < {rerun}:
        st.rerun()


def content():
    n = int(time.time() - st.session_state.t0)
    if n < 2:
        st.info("building")
        return
    st.plotly_chart(go.Figure(go.Scatter(y=[random.random() for _ in range(n)])), key="curves")


with st.container(key="live"):
    if {own}:
        fragment_in_container("live_progress", progress, run_every={tick})
        fragment_in_container("live_view", content, run_every={chart_tick})
    else:
        st.fragment(run_every={tick})(progress)()
        st.fragment(run_every={chart_tick})(content)()
'''


def shape_page(layout: str = "own", tick: float = 0.3, rerun: float = 0.15) -> str:
    """The page's source: ``layout`` "own" (each fragment in its own container) or "shared"."""
    if layout not in ("own", "shared"):
        raise ValueError(f"layout={layout!r}: accepted values are 'own' and 'shared'")
    return SHAPE_PAGE.format(root=str(ROOT), own=layout == "own", tick=tick, chart_tick=2 * tick, rerun=rerun)


class Sent(bytes):
    """A frame the page sent (a ``BackMsg``: a rerun request, a heartbeat); received frames are plain bytes."""


def describe(frame: Any) -> str:
    """One line for a websocket frame: the message type, its delta path, run and fragment ids; for a frame
    the page sent, "sent" and the request (a fragment's rerun, auto or not)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if isinstance(frame, str):
        return frame
    if isinstance(frame, Sent):
        back = BackMsg()
        back.ParseFromString(bytes(frame))
        kind = back.WhichOneof("type")
        if kind != "rerun_script":
            return f"sent {kind}"
        state = back.rerun_script
        return f"sent rerun fragment {state.fragment_id[:6] or '-'} auto {state.is_auto_rerun}"
    msg = ForwardMsg()
    msg.ParseFromString(frame)
    kind, meta = msg.WhichOneof("type"), msg.metadata
    line = f"{kind} {list(meta.delta_path)}"
    if meta.HasField("run"):
        line += f" run {meta.run.script_run_id[:6]} fragments {[f[:6] for f in meta.run.fragment_ids]}"
    if kind == "delta":
        what = msg.delta.WhichOneof("type")
        part = msg.delta.new_element if what == "new_element" else msg.delta.add_block
        line += f" {what}:{part.WhichOneof('type')} fragment {msg.delta.fragment_id[:6] or '-'}"
    elif kind == "script_finished":
        line += f" {ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)}"
    elif kind == "auto_rerun":
        line += f" fragment {msg.auto_rerun.fragment_id[:6]} every {msg.auto_rerun.interval:g} s"
    return line


def received(frames: list[tuple[float, Any]]) -> Iterator[Any]:
    """The ``ForwardMsg`` of each frame a page received, in order (its errors and sent frames skipped)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    for _, frame in frames:
        if not isinstance(frame, (str, Sent)):
            msg = ForwardMsg()
            msg.ParseFromString(frame)
            yield msg


def timers(frames: list[tuple[float, Any]]) -> tuple[set[str], set[str]]:
    """(fragments whose timer a full run set, fragments whose timer a fragment run set again) in a page's
    received frames: the ``auto_rerun`` messages, each counted in the run that sent it."""
    by_full, by_fragment = set(), set()
    in_fragment_run = False
    for msg in received(frames):
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            in_fragment_run = bool(msg.metadata.run.fragment_ids)
        elif kind == "auto_rerun":
            (by_fragment if in_fragment_run else by_full).add(msg.auto_rerun.fragment_id)
    return by_full, by_fragment


def cut_runs(frames: list[tuple[float, Any]]) -> tuple[int, int]:
    """(runs that a new run followed before their script_finished arrived, runs) among a page's frames."""
    cut = runs = 0
    running = False
    for msg in received(frames):
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            runs, cut, running = runs + 1, cut + running, True
        elif kind == "script_finished":
            running = False
    return cut, runs


def run(pages: int = 6, seconds: float = 40.0, layout: str = "own", busy: int = 0, tick: float = 0.3,
        rerun: float = 0.15, trail: int = 40, quiet: bool = False) -> dict:
    """Open ``pages`` chromium pages on one server of the shape page for ``seconds``, with ``busy`` busy
    loops beside them. Returns {"threw": pages whose front end threw, "errors": their messages,
    "silent": seconds since each page's last frame, "cut": cut runs per page, "runs": runs per page,
    "timers": per page, [fragments whose timer a full run set, those a fragment run set again]}."""
    from playwright.sync_api import sync_playwright

    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "shape.py"
        app.write_text(shape_page(layout, tick, rerun))
        with load(busy, int(seconds) + 120), streamlit_process(app=app) as (url, _, _), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            frames: list[list[tuple[float, Any]]] = []
            for _ in range(pages):
                page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
                log: list[tuple[float, Any]] = []
                page.on("websocket", lambda ws, log=log: (
                    ws.on("framereceived", lambda f, log=log: log.append((time.time(), f))),
                    ws.on("framesent", lambda f, log=log: log.append((time.time(), Sent(_bytes(f)))))))
                page.on("pageerror", lambda e, log=log: log.append((time.time(), f"ERROR {e}"[:160])))
                page.goto(url, wait_until="commit")
                frames.append(log)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                browser.contexts[0].pages[0].wait_for_timeout(5_000)  # Playwright delivers events while it waits
                say(f"{time.strftime('%H:%M:%S')} pages whose front end threw: "
                    f"{[i for i, log in enumerate(frames) if _errors(log)]}")
            now = time.time()
            browser.close()
    threw = [i for i, log in enumerate(frames) if _errors(log)]
    if threw and trail:
        log = frames[threw[0]]
        at = next(k for k, (_, f) in enumerate(log) if isinstance(f, str))
        say(f"page {threw[0]}: the last {trail} messages before its error (s from the error)")
        for t, frame in log[max(0, at - trail):at + 1]:
            say(f"  {t - log[at][0]:+7.3f} {describe(frame)}")
    got = [[(t, f) for t, f in log if not isinstance(f, Sent)] for log in frames]
    silent = [round(now - log[-1][0], 1) if log else None for log in got]
    for i, quiet_for in enumerate(silent):
        if trail and quiet_for is not None and quiet_for > max(5.0, 10 * tick) and i not in threw:
            log = frames[i]
            say(f"page {i} received nothing for its last {quiet_for} s; its last {trail} messages (s from the last)")
            for t, frame in log[-trail:]:
                say(f"  {t - got[i][-1][0]:+7.3f} {describe(frame)}")
    counts = [cut_runs(log) for log in frames]
    return {"threw": threw, "errors": sorted({e for log in frames for e in _errors(log)}),
            "silent": silent,
            "cut": [c for c, _ in counts], "runs": [r for _, r in counts],
            "timers": [[sorted(ids) for ids in timers(log)] for log in frames]}


def _bytes(frame: Any) -> bytes:
    return frame if isinstance(frame, bytes) else frame.encode()


def _errors(log: list[tuple[float, Any]]) -> list[str]:
    return [f for _, f in log if isinstance(f, str)]


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=["own", "shared"], default="own",
                        help="each fragment in a container of its own (the dashboard's), or side by side")
    parser.add_argument("--pages", type=int, default=6, help="pages on the one server")
    parser.add_argument("--seconds", type=float, default=40.0, help="how long the pages run")
    parser.add_argument("--load", type=int, default=0, help="busy loops beside them")
    parser.add_argument("--tick", type=float, default=0.3, help="the progress fragment's period (charts: twice)")
    args = parser.parse_args(argv)
    result = run(args.pages, args.seconds, args.layout, args.load, args.tick)
    print(f"layout {args.layout}: {len(result['threw'])} of {args.pages} pages threw {result['errors']}; "
          f"runs per page {result['runs']}, cut {result['cut']}; seconds since each page's last message "
          f"{result['silent']}")


if __name__ == "__main__":
    main()
