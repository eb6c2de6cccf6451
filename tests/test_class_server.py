"""The class page's server (lab.dashboard.class_server) against hostile requests: only JSON posts of bounded
size reach a page's run, a token nobody was given reaches none, the page runs only its own script (CSP hash),
a link's values are escaped in the form; and with the real worker pool, two pages started together train their
own runs. The page itself in a browser: tests/test_class_page_browser.py."""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
import urllib.error
import urllib.request

import pytest

from lab.dashboard import class_server
from lab.dashboard.class_pages import Pages
from tests._class_fakes import FakeSession


@contextlib.contextmanager
def server(pages: Pages):
    httpd = class_server.ClassServer(("127.0.0.1", 0), pages)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def call(url: str, data: bytes | None = None, kind: str = "application/json", method: str | None = None,
         headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": kind, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    code, _, raw = call(url + path, json.dumps(body).encode())
    return code, json.loads(raw)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    made = []
    with server(Pages(make=lambda *a: made.append(FakeSession(*a)) or made[-1])) as (url, httpd):
        yield url, made


def test_only_json_posts_of_bounded_size_reach_a_run(fake):
    url, made = fake
    code, opened = post(url, "/api/open", {"query": {"seed": "2"}})
    assert code == 200 and opened["token"] and len(made) == 1
    token = opened["token"]
    # a cross-site form can send text/plain or a urlencoded body, never JSON without a preflight: refused
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        code, _, raw = call(url + "/api/act", json.dumps({"token": token, "action": "start"}).encode(), kind)
        assert code == 415 and json.loads(raw) == {"error": "Content-Type: expected application/json"}
    assert made[0].pressed == []
    code, _, raw = call(url + "/api/open", b"x" * (class_server.MAX_BODY + 1))
    assert code == 413 and "at most 65536 bytes" in json.loads(raw)["error"]
    for body, problem in ((b"[1, 2]", "expected a JSON object"), (b"{not json", "Expecting property name"),
                          (b'{"token": 5, "action": "start"}', "token: expected a string"),
                          (b'{"query": {"seed": 3}}', "query: expected an object of strings")):
        code, _, raw = call(url + "/api/" + ("act" if b"action" in body else "open"), body)
        assert code == 400 and problem in json.loads(raw)["error"], raw
    code, answer = post(url, "/api/act", {"token": "guessed", "action": "start"})
    assert code == 410 and "reload the page" in answer["error"]
    code, answer = post(url, "/api/act", {"token": token, "action": "close"})
    assert code == 400 and "expected one of start, pause, step, reset" in answer["error"]
    assert made[0].pressed == [] and not made[0].closed
    code, answer = post(url, "/api/act", {"token": token, "action": "start"})
    assert code == 200 and made[0].pressed == ["start"] and answer["text"] == "Step 3 / 40 · paused"
    assert call(url + "/api/nothing", b"{}")[0] == 404 and call(url + "/etc/passwd")[0] == 404
    assert call(url + "/favicon.ico")[0] == 204


def test_a_page_that_closed_while_its_answer_was_sent_is_no_traceback():
    """A class bench's page closed during a poll: the server's log had a BrokenPipeError traceback."""
    class Closed:
        def write(self, data):
            raise BrokenPipeError(32, "Broken pipe")

    handler = class_server.Handler.__new__(class_server.Handler)
    handler.request_version, handler.requestline, handler.command = "HTTP/1.0", "POST /api/view HTTP/1.0", "POST"
    handler.client_address, handler.wfile, handler.close_connection = ("127.0.0.1", 1), Closed(), False
    handler._reply(200, {"text": "Step 1 / 9 · training"})
    assert handler.close_connection


def test_the_page_runs_only_its_own_script_and_quotes_a_link_escaped(fake):
    url, _ = fake
    hostile = 'x"><script>alert(1)</script>'
    code, headers, raw = call(f"{url}/?model={urllib.request.quote(hostile)}&a.tau=%3Cimg%20src%3Dx%3E")
    page = raw.decode()
    assert code == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 1 and "alert" not in scripts[0]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    csp = headers["Content-Security-Policy"]
    assert f"script-src 'sha256-{digest}';" in csp and "default-src 'none'" in csp and "'unsafe-eval'" not in csp
    assert "<script>alert" not in page and "<img src=x>" not in page
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_two_pages_on_the_real_pool_train_their_own_runs(monkeypatch):
    """The class server's pages are the dashboard's sessions in its worker pool: two pages started together
    each train, each pauses at once, and closing the server stops its pool's workers."""
    from lab.dashboard import pool as pool_module

    monkeypatch.setenv("RANKLAB_FAST", "1")
    monkeypatch.setenv("RANKLAB_WORKERS", "1")
    monkeypatch.setattr(pool_module, "_POOL", None)
    pool = pool_module.server_pool()
    try:
        with server(Pages()) as (url, httpd):
            tokens = [post(url, "/api/open", {"query": {"seed": str(i), "steps": "400"}})[1]["token"] for i in (1, 2)]
            for token in tokens:
                code, view = post(url, "/api/act", {"token": token, "action": "start"})
                assert code == 200 and view["running"] and "· training" in view["text"]
            for token in tokens:
                assert _wait(url, token, lambda v: v["version"] and int(v["text"].split()[1]) >= 3)
            for token in tokens:
                code, view = post(url, "/api/act", {"token": token, "action": "pause"})
                assert code == 200 and "· paused" in view["text"] and view["enabled"]["start"]
            sessions = [page.session for page in httpd.pages.pages.values()]
            assert len(sessions) == 2 and sessions[0].runs[0].config.seed != sessions[1].runs[0].config.seed
        assert all(not s.running for s in sessions) and not httpd.pages.pages  # closed with the server
    finally:
        pool.shutdown()
        monkeypatch.setattr(pool_module, "_POOL", None)


def _wait(url: str, token: str, done, seconds: float = 240.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        code, view = post(url, "/api/view", {"token": token})
        assert code == 200 and not view["error"], view
        if done(view):
            return True
        time.sleep(0.2)  # polling a server, as the page does once a second
    return False


def test_make_class_stops_on_sigterm_with_its_workers(tmp_path):
    """`make class` under a supervisor (systemd, a teacher's Ctrl+C): SIGTERM ends the server, closes its pages
    and stops its training processes, exit 0."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from bench.browser import free_port
    from lab.dashboard import pool as pool_module

    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-I", "-m", "lab.dashboard.class_server", "--port", str(port)],
                                cwd=os.getcwd(), env={**os.environ, "RANKLAB_FAST": "1", "RANKLAB_WORKERS": "1"},
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 120
        while True:
            try:
                opened = post(url, "/api/open", {"query": {}})[1]
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < end, log.read_text()
                time.sleep(0.2)  # polling a server that is starting
        code, view = post(url, "/api/act", {"token": opened["token"], "action": "start"})
        assert code == 200 and view["running"]
        workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                   text=True).stdout.split()]
        assert workers, "the server has no training process"
        proc.send_signal(signal.SIGTERM)
        # a worker finishes its step first, up to the pool's own bound on a loaded machine (then it is terminated)
        assert proc.wait(pool_module.STOP_SECONDS + 30) == 0, log.read_text()
        # its children (the training processes, multiprocessing's resource tracker) end with it, the tracker
        # a moment after: nothing is left running
        end = time.monotonic() + 30
        while (alive := [pid for pid in workers if _running(pid)]) and time.monotonic() < end:
            time.sleep(0.1)
        assert not alive, [open(f"/proc/{pid}/cmdline").read() for pid in alive]
        # a worker's tqdm lock was a named semaphore that its os._exit left behind (every server's log said so)
        assert "Traceback" not in log.read_text() and "leaked semaphore" not in log.read_text(), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read().lower()
    except FileNotFoundError:
        return False
