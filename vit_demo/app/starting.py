"""A "starting" page for the seconds of a cold start (imports, loading the models, warming them up).

``python app.py`` opens the app's port with this tiny standard-library server first, before anything heavy is
imported. It answers every request with 503 and a page that says the app is starting and opens it once it
answers; just before Gradio takes the port, the app closes it. Anything that waits for the app's HTTP 200 (a
Space's visitors, the benchmarks, the tests) keeps waiting through it, as before.
"""

from __future__ import annotations

import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 7860  # Gradio's, when GRADIO_SERVER_NAME / _PORT are not set

PAGE = (Path(__file__).parent / "starting.html").read_bytes()  # it asks again every half second


class _StartingHandler(BaseHTTPRequestHandler):
    def _answer(self, body: bool) -> None:
        self.send_response(HTTPStatus.SERVICE_UNAVAILABLE)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Retry-After", "1")
        self.end_headers()
        if body:
            self.wfile.write(PAGE)

    def do_GET(self) -> None:  # noqa: N802 (the names http.server calls)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        pass  # a visitor's every poll would be a log line


class StartingPage:
    """The starting page, served from a background thread on (host, port) until ``close``."""

    def __init__(self, host: str, port: int) -> None:
        self._server = ThreadingHTTPServer((host, port), _StartingHandler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}/"
        threading.Thread(target=self._server.serve_forever, name="starting-page", daemon=True).start()

    def close(self) -> None:
        """Stop answering and free the port (Gradio binds with SO_REUSEADDR, so it can take it at once)."""
        self._server.shutdown()
        self._server.server_close()


def open_starting_page() -> StartingPage | None:
    """Serve the starting page where the app will listen (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT, else Gradio's
    defaults); None when that port is taken, in which case Gradio will say so, or pick another, as it would."""
    host = os.environ.get("GRADIO_SERVER_NAME") or DEFAULT_HOST
    port = int(os.environ.get("GRADIO_SERVER_PORT") or DEFAULT_PORT)
    try:
        return StartingPage(host, port)
    except OSError:
        return None
