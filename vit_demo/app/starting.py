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

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 7860  # Gradio's, when GRADIO_SERVER_NAME / _PORT are not set
POLL_MS = 500

PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Starting: what does a Vision Transformer look at?</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 0; min-height: 100vh; display: grid; place-items: center;
         background: #fff; color: #111; }}
  main {{ max-width: 36rem; padding: 2rem; text-align: center; }}
  h1 {{ font-size: 2rem; margin: 0 0 1rem; }}
  p {{ font-size: 1.15rem; line-height: 1.5; }}
  .dots::after {{ content: ""; animation: dots 1.5s steps(4) infinite; }}
  @keyframes dots {{ 0% {{ content: ""; }} 25% {{ content: "."; }} 50% {{ content: ".."; }} 75% {{ content: "..."; }} }}
</style></head>
<body><main>
  <h1>Starting<span class="dots"></span></h1>
  <p>The app is loading its Vision Transformers and warming them up. This page opens it by itself as soon as it is
  ready, usually within half a minute.</p>
</main>
<script>
  // Ask again until the app itself answers (200); a refused connection is the moment the app takes the port over.
  async function openWhenReady() {{
    try {{
      const answer = await fetch(window.location.href, {{ cache: "no-store" }});
      if (answer.ok) {{ window.location.reload(); return; }}
    }} catch (error) {{}}
    setTimeout(openWhenReady, {POLL_MS});
  }}
  setTimeout(openWhenReady, {POLL_MS});
</script>
</body></html>
""".encode()


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

    def do_POST(self) -> None:  # noqa: N802
        self._answer(body=True)

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
