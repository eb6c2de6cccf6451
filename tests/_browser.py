"""A `streamlit run app.py` server on a free local port and a headless Debian chromium driven by
Playwright, for the browser tests and ``bench/screenshot.py``. Never ``playwright install``:
the system chromium is used; waits are on DOM conditions, never sleeps."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
INSTALL_HINT = "install it with: apt-get update && apt-get install -y chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict[str, str] | None = None, timeout: float = 60.0) -> Iterator[str]:
    """Start the app, wait until /_stcore/health says ok, yield its URL; always kill it."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal"]
    log = open(ROOT / "test-artifacts" / f"streamlit-{port}.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not answer /_stcore/health within {timeout:.0f} s")
            time.sleep(0.2)  # polling a server that is starting, not waiting for the page
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


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
