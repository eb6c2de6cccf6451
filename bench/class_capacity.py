"""What one server trains for a class whose browsers are on the students' own machines: N sessions on the
dashboard's worker pool, no browser and no Streamlit on this machine.

    .venv/bin/python -m bench.class_capacity --pages 1 3 6 12      # ~1 min per N on 2 cores

``bench/class_load.py`` measures a class with its N chromium pages on the server's own cores, as a teacher's
laptop would run them; there the browsers take most of the CPU. Here the same pool the server starts
(``lab.dashboard.pool.server_pool``'s sizes: RANKLAB_WORKERS, RANKLAB_RUNS_PER_WORKER, the default settings
as its warm data) trains N sessions (``RemoteSession``, what a page holds), each on the page's defaults with
its own seed, all started together; each session is touched every second, as its page's tick does. Measured:
Start → step 1 per admitted session, steps/s per session over ``--window`` seconds, the sessions queued, and
each Pause until the page's view says "paused" (the page's own answer, from shared memory). Not measured: the
Streamlit server's own work per page (0.04 of a core per training page, bench/class_load.py's pages).
Writes the "class-capacity" section of docs/benchmarks.md (``--no-write``: print only).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
from bench.class_load import _stat
from bench.measure import machine, publish


def one_class(n: int, window: float, budget: float) -> dict[str, Any]:
    from lab.core.env import dashboard_threads, dashboard_workers, runs_per_worker
    from lab.dashboard import Settings, run_labels, to_configs
    from lab.dashboard.pool import Pool
    from lab.dashboard.remote_session import RemoteSession

    loads = [os.getloadavg()[0]]
    pool = Pool(dashboard_workers(), runs_per_worker(), threads=dashboard_threads(),
                warm=to_configs(Settings())[0]).start()
    sessions = []
    try:
        for i in range(n):
            s = Settings(seed=i, steps=100_000)
            sessions.append(RemoteSession(pool, to_configs(s), run_labels(s), s.steps, s.steps_per_tick,
                                          s.eval_every))
        started = time.monotonic()
        for session in sessions:
            session.start()
        queued = sum(bool(session.view.queue) for session in sessions)
        admitted = [session for session in sessions if not session.view.queue]
        first: list[Optional[float]] = []
        for session in admitted:
            ok = _wait_touching(sessions, lambda: session.view.step_count >= 1, started + budget)
            first.append(time.monotonic() - started if ok else None)
        before = [(time.monotonic(), session.view.step_count) for session in sessions]
        _wait_touching(sessions, lambda: False, time.monotonic() + window)
        rates = [(session.view.step_count - s) / (time.monotonic() - t) for session, (t, s) in zip(sessions, before)]
        loads.append(os.getloadavg()[0])
        pauses = []
        for session in sessions:
            t = time.perf_counter()
            session.pause()
            pauses.append(time.perf_counter() - t if session.view.status == "paused" else None)
    finally:
        for session in sessions:
            session.close()
        pool.shutdown()
    return {"pages": n, "workers": f"{dashboard_workers()} x {runs_per_worker()}", "queued": queued,
            "first": first, "rates": rates, "pauses": pauses, "loads": loads}


def _wait_touching(sessions: list, done, until: float) -> bool:
    """Wait for ``done()`` until ``until`` (monotonic), touching every session each second as its page would."""
    while time.monotonic() < until:
        for session in sessions:
            session.touch()
        if done():
            return True
        time.sleep(min(1.0, max(0.0, until - time.monotonic())))
    return done()


def section(rows: list[dict[str, Any]], window: float, note: str) -> str:
    table = []
    for r in rows:
        training = [x for x in r["rates"] if x > 0]
        rate = f"{statistics.median(training):.2f} ({min(training):.2f}-{max(training):.2f})" if training else "–"
        table.append(f"| {r['pages']} | {min(r['loads']):.1f}-{max(r['loads']):.1f} | {_stat(r['first'])} | "
                     f"{r['queued']} | {rate} | {sum(r['rates']):.2f} | {_stat(r['pauses'], '{:.3f} s')} |")
    return "\n".join([
        "## A class whose browsers are elsewhere (`python -m bench.class_capacity`)", "",
        f"{machine()}; the server's worker pool ({rows[0]['workers']} runs at once, full mode), N sessions on the "
        f"page's default settings, each its own seed, started together and touched every second as a page's tick "
        f"does; no browser and no Streamlit on the machine{f' ({note})' if note else ''}, "
        f"{time.strftime('%Y-%m-%d')}. Start → step 1: from the Starts to the session's first step (the sessions "
        f"admitted at once); steps/s over {window:.0f} s, per session median (min-max) and summed; Pause: until "
        "the page's view says paused. Median / max over the sessions.", "",
        "| N | load (1 min) | Start → step 1 | queued | steps/s per student | steps/s, all | Pause |",
        "|---:|---|---|---:|---|---:|---|", *table, ""])


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[1, 3, 6, 12], help="class sizes N")
    parser.add_argument("--window", type=float, default=20.0, help="seconds all sessions train while measured")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds at most to wait for a first step")
    parser.add_argument("--note", default="", help="what else ran on the machine, for the section")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    rows = []
    for n in args.pages:
        r = one_class(n, args.window, args.budget)
        rows.append(r)
        print(f"N={n}: Start→step 1 {_stat(r['first'])}, queued {r['queued']}, steps/s "
              f"{[round(x, 2) for x in r['rates']]} (sum {sum(r['rates']):.2f}), "
              f"Pause {_stat(r['pauses'], '{:.3f} s')}, "
              f"load {min(r['loads']):.1f}-{max(r['loads']):.1f}", flush=True)
    publish("class-capacity", section(rows, args.window, args.note), dry_run=args.no_write)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
