"""Servers on a free local port (`streamlit run app.py`, JupyterLab) and a headless Debian chromium
driven by Playwright, for the browser tests, ``bench/screenshot.py`` and ``bench/dashboard.py``. Never
``playwright install``: the system chromium is used; waits are on DOM conditions, never sleeps. Logs and
screenshots go to test-artifacts/. It lives in bench/ so that the tie runs one way: tests import bench,
bench imports nothing of tests/ (tests/test_suite_shape.py)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
INSTALL_HINT = "install it with: apt-get update && apt-get install -y chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_browser() -> None:
    """Skip (locally) or fail (RANKLAB_REQUIRE_BROWSER=1, CI) when chromium or Playwright is missing."""
    import pytest  # here: bench/screenshot.py imports this module without pytest

    problem = None
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing: {INSTALL_HINT}"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "the playwright Python package is missing: pip install playwright (never `playwright install`)"
    if problem:
        if os.environ.get("RANKLAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"RANKLAB_REQUIRE_BROWSER=1 but {problem}")
        pytest.skip(problem)


@contextlib.contextmanager
def serve(name: str, cmd: list[str], ready: Callable[[], bool], cwd: Path = ROOT, env: dict[str, str] | None = None,
          timeout: float = 60.0) -> Iterator[subprocess.Popen]:
    """Start a server process, poll ``ready()`` until it answers, yield the process; always stop it.
    Its output goes to test-artifacts/NAME.log, named in the error if it exits or never answers."""
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / f"{name}.log", "w")
    proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {proc.returncode}; see {log.name}")
            try:
                if ready():
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not answer within {timeout:.0f} s; see {log.name}")
            time.sleep(0.2)  # polling a server that is starting, not waiting for the page
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _answers(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.read().decode()


@contextlib.contextmanager
def streamlit_process(env: dict[str, str] | None = None, timeout: float = 60.0,
                      app: Path = ROOT / "app.py") -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """Start ``app`` (the dashboard), wait until /_stcore/health says ok, yield (its URL, the process, its log)."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal"]
    url, name = f"http://127.0.0.1:{port}", f"streamlit-{port}"
    with serve(name, cmd, lambda: _answers(f"{url}/_stcore/health").strip() == "ok", env=env,
               timeout=timeout) as proc:
        yield url, proc, ARTIFACTS / f"{name}.log"


@contextlib.contextmanager
def class_process(env: dict[str, str] | None = None,
                  timeout: float = 60.0) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """Start the class page's server (``python -m lab.dashboard.class_server``), wait until its page answers,
    yield (its URL, the process, its log)."""
    port = free_port()
    cmd = [sys.executable, "-m", "lab.dashboard.class_server", "--address", "127.0.0.1", "--port", str(port)]
    url, name = f"http://127.0.0.1:{port}", f"class-server-{port}"
    with serve(name, cmd, lambda: "<h2>" in _answers(url), env=env, timeout=timeout) as proc:
        yield url, proc, ARTIFACTS / f"{name}.log"


@contextlib.contextmanager
def streamlit_server(env: dict[str, str] | None = None, timeout: float = 60.0) -> Iterator[str]:
    """Start the app, wait until /_stcore/health says ok, yield its URL."""
    with streamlit_process(env, timeout) as (url, _, _):
        yield url


# JupyterLab user settings for the tests: no news poll (offline; its question would cover the page).
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"}}


@contextlib.contextmanager
def jupyterlab_server(root_dir: Path, env: dict[str, str] | None = None, timeout: float = 120.0) -> Iterator[str]:
    """JupyterLab on 127.0.0.1 serving ``root_dir``; yields its URL with the token (``?token=...``).

    Config, runtime, settings and workspace folders live in ``root_dir/.jupyter-test`` (nothing is
    written to the user's or the repository's). Kernels import this checkout's ``lab``."""
    port, token = free_port(), secrets.token_hex(16)
    home = root_dir / ".jupyter-test"
    for rel, settings in LAB_SETTINGS.items():
        (home / "settings" / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / "settings" / rel).write_text(json.dumps(settings))
    dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_RUNTIME_DIR": "runtime", "JUPYTER_DATA_DIR": "data",
            "JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces", "IPYTHONDIR": "ipython"}
    lab_env = {name: str(home / sub) for name, sub in dirs.items()}
    lab_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root_dir}", "--ServerApp.allow_root=True"]  # CI containers run as root
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        return "started" in json.loads(_answers(f"{url}/api/status?token={token}"))

    with serve(f"jupyterlab-{port}", cmd, ready, cwd=root_dir, env={**lab_env, **(env or {})}, timeout=timeout):
        yield f"{url}/?token={token}"


@contextlib.contextmanager
def chromium_page(width: int = 1500, height: int = 1000) -> Iterator:
    """A Playwright page in the system's headless chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Until the app is rendered and no script run is in progress (the status widget is gone)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stSidebar"]', timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=timeout_ms)


def wait_visible(page, locator, what: str, timeout_ms: int = 60_000, text_of: str = "body") -> None:
    """Wait for ``locator``; on a timeout fail with the URL, the page's text (of ``text_of``) and a
    screenshot, so a CI failure says what the page showed instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        locator.wait_for(timeout=timeout_ms)
    except PlaywrightTimeout:
        fail_with_screenshot(page, what, f"not shown within {timeout_ms / 1000:.0f} s", text_of)


def fail_with_screenshot(page, what: str, problem: str, text_of: str = "body") -> None:
    import pytest

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower())}.png"
    page.screenshot(path=str(shot), full_page=True)
    text = page.locator(text_of).first.inner_text()[-3000:]
    pytest.fail(f"{what} {problem}; url={page.url}; screenshot {shot}; page text:\n{text}")


# The Reproduction view (app_pages/results.py) as the page shows it, on every animation frame from
# a click until ``title``'s study is shown (its title marked in bold: its row of the studies' table, or
# the line above a study's claims table; and only its figures visible): the milliseconds from the
# click (caught on the document, so a Playwright click is timed from when the page receives it) and
# every frame where a visible figure belonged to another study than the marked one (a stale figure
# under a new verdict).
WATCH_STUDY = """([title, timeoutMs]) => { window.__study = new Promise(done => {
  const state = () => {
    const row = document.querySelector('.st-key-repro_table strong');
    const captions = [...document.querySelectorAll('.st-key-repro_figure [data-testid="stImage"]')]
      .filter(e => getComputedStyle(e).visibility !== 'hidden' && e.getBoundingClientRect().height > 0)
      .map(e => (e.innerText || '').split(': figure')[0].trim());
    return {row: row ? row.innerText.trim() : null, captions};
  };
  const mixed = [];
  let clicked = null;
  document.addEventListener('click', () => { if (clicked === null) clicked = performance.now(); },
                            {capture: true, once: true});
  const t0 = performance.now();
  const frame = () => {
    const s = state();
    if (clicked !== null && s.row && s.captions.some(c => c !== s.row)) mixed.push(s);
    if (clicked !== null && s.row === title && s.captions.length && s.captions.every(c => c === title)) {
      done({ms: performance.now() - clicked, mixed}); return; }
    if (performance.now() - t0 > timeoutMs) { done({ms: null, mixed, last: s}); return; }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}); }"""


def show_study(page, title: str, open_view: bool = False, timeout_ms: int = 120_000) -> dict:
    """Open the Reproduction view (``open_view``) or pick study ``title`` in it, and wait until that
    study is shown: {"ms": from the click, "mixed": frames with another study's figure visible}."""
    if open_view:
        page.evaluate(WATCH_STUDY, [title, timeout_ms])  # armed before the click
        page.get_by_role("radio", name="Reproduction", exact=True).click()
    else:
        page.get_by_test_id("stMainBlockContainer").get_by_test_id("stSelectbox").click()
        option = page.get_by_role("option", name=title, exact=True)
        option.wait_for()
        page.evaluate(WATCH_STUDY, [title, timeout_ms])  # armed once the list is open: times the option's click
        option.click()
    return page.evaluate("() => window.__study")


PROGRESS = '[data-testid="stProgress"]'  # the dashboard's progress bar, its text the run's state
# What a page shows when a click was not answered: its progress, Streamlit's status widget (a rerun in
# progress, "Connecting"), a dialog (a lost connection), an exception, the sidebar's buttons.
PAGE_STATE = """() => { const q = s => [...document.querySelectorAll(s)].map(e => e.innerText.trim()).join(' | ');
  return {progress: q('%s'), status: q('[data-testid="stStatusWidget"]'), dialog: q('[role="dialog"]'),
          exception: q('[data-testid="stException"]').slice(0, 160),
          buttons: [...document.querySelectorAll('[data-testid="stSidebar"] button')].filter(b => b.innerText.trim())
                   .map(b => b.innerText.trim() + (b.disabled ? ' (disabled)' : '')).join(', '),
          stale: document.querySelectorAll('[data-stale="true"]').length}; }""" % PROGRESS


def watch_events(page) -> None:
    """Keep the page's errors, crashes, navigations and closed websockets (``page.events``, last 20), for
    ``page_state``: a page found blank at N = 12 had to say why."""
    events: list[str] = []
    page.events = events

    def note(kind: str, text: Any) -> None:
        events.append(f"{time.strftime('%H:%M:%S')} {kind}: {str(text)[:200]}")
        del events[:-20]

    page.on("pageerror", lambda e: note("pageerror", e))
    page.on("console", lambda m: m.type in ("error", "warning") and note(f"console.{m.type}", m.text))
    page.on("crash", lambda _: note("crash", "the renderer crashed"))
    page.on("framenavigated", lambda f: f == page.main_frame and note("navigated", f.url))
    page.on("websocket", lambda ws: ws.on("close", lambda _: note("websocket closed", ws.url)))


def page_state(page, name: str) -> str:
    """One line on what ``page`` shows, its events (``watch_events``), and a screenshot in $TMPDIR/page_``name``.png."""
    try:
        state = page.evaluate(PAGE_STATE)
    except Exception as e:  # noqa: BLE001 - a page that does not answer is itself the finding
        return f"{name}: the page did not answer ({type(e).__name__})"
    shot = Path(os.environ.get("TMPDIR", "/tmp")) / f"page_{name}.png"
    try:
        page.screenshot(path=str(shot), timeout=10_000)
    except Exception:  # noqa: BLE001 - the state line is what matters
        shot = None
    events = getattr(page, "events", [])
    return (f"{name}: " + ", ".join(f"{k} {v!r}" for k, v in state.items()) + (f" (screenshot {shot})" if shot else "")
            + "".join(f"\n      {e}" for e in events))
