"""The class page's server: the dashboard's training view for a class whose browsers share the server's CPU.

    make class                                          # http://localhost:8502
    python -m lab.dashboard.class_server --port 8502 --address 127.0.0.1

Why: a first visit of the Streamlit dashboard costs a browser 2-5 CPU seconds (its front end, whatever the app
draws; docs/benchmarks.md, "What a first screen costs"), so six students whose browsers run on the server's
2 cores (thin clients, a remote desktop) waited 7-10 s for their first screens (the "class" table). The class
page is one small HTML page: the same settings and links (``?loss=fast_ap&seed=3``), the same sessions in the
same worker pool, the same progress text, curves and latest numbers, drawn by this server with the dashboard's
own functions (:mod:`lab.dashboard.class_pages`); its script puts them in place and polls once a second while a
run trains. The analysis views (embeddings, scores, toy losses, the reproduction) are the dashboard's (``make app``).

Every request is untrusted. ``GET /`` is the page. ``POST /api/open|act|view|leave`` take a JSON object: a
request that is not JSON is refused (a cross-site form cannot send JSON without a CORS preflight, which this
server never grants), so is a body over ``MAX_BODY`` bytes; a page's run is named by a random token that only
the page holds. Errors are one line of JSON, ``{"error": ...}``.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

from .class_page import CSP, page_html
from .class_pages import Gone, Pages

MAX_BODY = 64 * 1024  # bytes: a link's settings are at most a few hundred
SWEEP_SECONDS = 2.0
PORT = 8502  # beside the dashboard's 8501


def _text(data: dict, key: str, required: bool = True) -> str:
    value = data.get(key, None if required else "")
    if not isinstance(value, str) or len(value) > MAX_BODY:
        raise ValueError(f"{key}: expected a string")
    return value


def _query(data: dict) -> dict[str, str]:
    query = data.get("query", {})
    if not isinstance(query, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in query.items()):
        raise ValueError("query: expected an object of strings (the link's parameters)")
    return query


def _open(pages: Pages, data: dict) -> dict:
    token = data.get("token")
    if token is not None and not isinstance(token, str):
        raise ValueError("token: expected a string or null")
    return pages.open(_query(data), token)


def _leave(pages: Pages, data: dict) -> dict:
    pages.leave(_text(data, "token"))
    return {}


ROUTES: dict[str, Callable[[Pages, dict], dict]] = {
    "/api/open": _open,
    "/api/act": lambda pages, d: pages.act(_text(d, "token"), _text(d, "action")),
    "/api/view": lambda pages, d: pages.view(_text(d, "token"), _text(d, "have", required=False)),
    "/api/leave": _leave,
}


class Handler(BaseHTTPRequestHandler):
    server_version = "RankLab"
    server: "ClassServer"
    timeout = 30  # s a connection may stay silent: a client that opens one and sends nothing holds no thread

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        if url.path == "/favicon.ico":  # asked by every browser: none, and no error in its console
            return self._send(204, b"", "image/x-icon", {})
        if url.path != "/":
            return self._reply(404, {"error": f"no page at {url.path[:80]!r}: the class page is /"})
        body = page_html(parse_qs(url.query, keep_blank_values=True)).encode()
        self._send(200, body, "text/html; charset=utf-8", {"Content-Security-Policy": CSP})

    def do_POST(self) -> None:  # noqa: N802
        route = ROUTES.get(urlsplit(self.path).path)
        if route is None:
            return self._reply(404, {"error": f"no API at {self.path[:80]!r}"})
        if self.headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/json":
            return self._reply(415, {"error": "Content-Type: expected application/json"})
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._reply(411, {"error": "Content-Length: expected the body's length in bytes"})
        if not 0 <= length <= MAX_BODY:
            return self._reply(413, {"error": f"Content-Length={length}: at most {MAX_BODY} bytes"})
        try:
            data = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            return self._reply(200, route(self.server.pages, data))
        except Gone as e:
            return self._reply(410, {"error": e.args[0]})
        except ValueError as e:  # json.JSONDecodeError is one
            return self._reply(400, {"error": f"{self.path[:80]}: {str(e)[:200]}"})

    def _reply(self, code: int, payload: dict) -> None:
        self._send(code, json.dumps(payload).encode(), "application/json", {"Cache-Control": "no-store"})

    def _send(self, code: int, body: bytes, kind: str, headers: dict[str, str]) -> None:
        try:
            self.send_response(code)
            for name, value in {"Content-Type": kind, "Content-Length": str(len(body)), "X-Content-Type-Options":
                                "nosniff", "Referrer-Policy": "no-referrer", **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the page closed while its poll was answered: no one to tell
            self.close_connection = True

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        if not str(code).startswith("2"):  # a class polls every second: only what went wrong
            super().log_request(code, size)


class ClassServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], pages: Optional[Pages] = None) -> None:
        super().__init__(address, Handler)
        self.pages = pages or Pages()
        self.stopped = threading.Event()
        threading.Thread(target=self._sweep, name="class-pages-sweep", daemon=True).start()

    def _sweep(self) -> None:
        while not self.stopped.wait(SWEEP_SECONDS):
            self.pages.sweep()

    def server_close(self) -> None:
        self.stopped.set()
        super().server_close()
        self.pages.close_all()


def main(argv: Optional[list[str]] = None) -> int:
    """Serve the class page until SIGINT or SIGTERM; the training workers start first and stop last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1", help="127.0.0.1 (this machine) or 0.0.0.0 (a room)")
    parser.add_argument("--port", type=int, default=PORT)
    args = parser.parse_args(argv)
    from .pool import server_pool

    pool = server_pool()
    if pool is not None:
        pool.start()  # before the first page: its Start does not wait for the workers to import torch
    server = ClassServer((args.address, args.port))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"the class page: http://{args.address}:{server.server_address[1]}/ (Ctrl+C stops it)", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if pool is not None:
            pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
