"""A room drawing at once: N simulated users each draw M strokes, through the same events the page sends.

    python benchmarks/crowd.py [--users 50] [--strokes 4] [--apps do-nothing,app]

What one pen stroke costs the server where the page asks it to run the model (a browser without WebAssembly,
``?model=server``; elsewhere a stroke costs the server nothing), read from the app's own config: the page's server
function "forward" (on the ``gr.HTML`` that holds the page, elem_id "vd-page": one POST to
/gradio_api/component_server/ with the model and its graph's inputs as the page sends them, the drawing
preprocessed in the page) answers the graph's raw outputs, from which the page computes every view's numbers. Each
simulated user is a page session of its own (its own session hash, as a browser tab has). Against it, the
do-nothing app (benchmarks/noop_app.py) answers each stroke with one event that returns a label made at start-up:
Gradio's own cost of one event.

For each app, in the same run: every user sends one untimed stroke (sessions and caches exist), then all users
draw at once. It prints, per app: strokes per second the server sustained (all strokes / the time from the start
until the last answer), p50 and p95 stroke-to-label (the stroke sent until its answer came back: the label, and
for the app every view's numbers with it), the server's CPU per stroke (its utime + stime from
/proc, over the timed strokes), requests and kilobytes per stroke; then the app's figures as multiples of the
do-nothing app's. The clients run as threads in this process and share the 2 cores with the server, so only the
ratio means anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import REPO, example_drawings, forward_request, p50_p95, serving  # noqa: E402

APPS = {"do-nothing": REPO / "benchmarks" / "noop_app.py", "app": REPO / "app.py"}
PAGE = "vd-page"  # the elem_id of the gr.HTML that holds the page
BASELINE_STROKE = "stroke"  # the do-nothing app's api_name for one stroke
STROKE = "forward"  # the page's server function


def canvas_values(folder: Path) -> list[dict]:
    """The ten example digits as the page sends them to the server: each drawn (112x112 bytes, ink bright),
    preprocessed as the page preprocesses it, and put in the model graph's inputs."""
    from vit_demo.data.preprocess import preprocess_drawing
    from vit_demo.weights import read_weights_info, resolve_weights_folder

    config = read_weights_info(resolve_weights_folder("mnist"))[0].config
    values = []
    for path in example_drawings(folder):
        ink = 255 - np.asarray(Image.open(path).convert("L"), dtype=np.uint8)  # (112, 112), dark ink -> bright
        values.append(forward_request("mnist", preprocess_drawing(ink), config.depth, config.heads))
    return values


def server_cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Page:
    """One browser tab: a session hash, and the events it sends, over one HTTP connection."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.session = uuid.uuid4().hex[:11]
        self.http = httpx.Client(timeout=120)
        self.requests = 0
        self.bytes = 0

    def event(self, fn_index: int, trigger_id: int | None, data: list) -> list:
        """Send one event as the page's client does (queue join, then its event stream); its output data."""
        body = {"data": data, "fn_index": fn_index, "trigger_id": trigger_id, "session_hash": self.session,
                "event_data": None}
        joined = self.http.post(f"{self.url}/gradio_api/queue/join", json=body)
        joined.raise_for_status()
        self.requests += 1
        self.bytes += len(joined.content)
        event_id = joined.json()["event_id"]
        with self.http.stream("GET", f"{self.url}/gradio_api/queue/data",
                              params={"session_hash": self.session}) as stream:
            self.requests += 1
            for line in stream.iter_lines():
                self.bytes += len(line) + 1
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") == event_id and message.get("msg") == "process_completed":
                    if not message.get("success"):
                        raise RuntimeError(f"event {fn_index} failed: {message.get('output')}")
                    return message["output"]["data"]
        raise RuntimeError(f"event {fn_index}: the stream ended without an answer")

    def call(self, component_id: int, fn_name: str, data: object) -> object:
        """Call a component's server function as the page's JS does (``server.<fn_name>(data)``); its answer."""
        body = {"data": data, "component_id": component_id, "fn_name": fn_name, "session_hash": self.session}
        response = self.http.post(f"{self.url}/gradio_api/component_server/", json=body)
        response.raise_for_status()
        self.requests += 1
        self.bytes += len(response.content)
        return response.json()

    def close(self) -> None:
        self.http.close()


def page_events(url: str) -> dict:
    """A stroke's request, from the app's config: {"label": ("call", the page's id, its server function)} where the
    page has the server function ``STROKE``, else {"label": ("event", fn index, trigger id)}: the do-nothing app's
    stroke."""
    config = httpx.get(f"{url.rstrip('/')}/config").json()
    components = {c["id"]: c for c in config["components"]}
    for component in components.values():
        props = component.get("props", {})
        if props.get("elem_id") == PAGE and STROKE in (props.get("server_fns") or []):
            return {"label": ("call", component["id"], STROKE)}
    for index, dep in enumerate(config["dependencies"]):
        targets = [target for target, event in dep["targets"] if event == "change"]
        if targets and dep.get("api_name") == BASELINE_STROKE:
            return {"label": ("event", index, targets[0])}
    raise RuntimeError(f"{url}: no stroke to send (neither a page with a server function nor a stroke event)")


def stroke(page: Page, events: dict, value: dict) -> float:
    """One pen stroke, sent as the page sends it: seconds until its answer (the label and every view's numbers)."""
    started = time.perf_counter()
    kind, *how = events["label"]
    if kind == "call":
        component, fn = how
        answer = page.call(component, fn, value)
        if "error" in answer:
            raise RuntimeError(answer["error"])
    else:
        fn, trigger = how
        page.event(fn, trigger, [value["inputs"]["image"]["data"]])
    return time.perf_counter() - started


def crowd(script: Path, values: list[dict], users: int, strokes: int) -> dict:
    """Every user draws ``strokes`` strokes at once against ``script``'s server; its figures."""
    with serving(script) as server:
        events = page_events(server.url)
        pages = [Page(server.url) for _ in range(users)]
        for i, page in enumerate(pages):  # untimed: sessions, connections and caches exist
            stroke(page, events, values[i % len(values)])
        for page in pages:
            page.requests = page.bytes = 0
        times: list[float] = []
        errors: list[str] = []
        go = threading.Barrier(users + 1)

        def user(index: int, page: Page) -> None:
            go.wait()
            for j in range(strokes):
                try:
                    times.append(stroke(page, events, values[(index + j) % len(values)]))
                except Exception as exc:  # noqa: BLE001  (counted, by kind)
                    errors.append(type(exc).__name__)

        threads = [threading.Thread(target=user, args=(i, p)) for i, p in enumerate(pages)]
        for thread in threads:
            thread.start()
        cpu_before = server_cpu_seconds(server.process.pid)
        go.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        cpu = server_cpu_seconds(server.process.pid) - cpu_before
        for page in pages:
            page.close()
    done = len(times)
    label_p50, label_p95 = p50_p95([t * 1000 for t in times])
    return {"strokes": done, "errors": len(errors), "strokes_per_s": done / wall, "label_p50_ms": label_p50,
            "label_p95_ms": label_p95,
            "server_cpu_ms_per_stroke": 1000 * cpu / max(done, 1),
            "requests_per_stroke": sum(p.requests for p in pages) / max(done, 1),
            "kb_per_stroke": sum(p.bytes for p in pages) / 1024 / max(done, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--strokes", type=int, default=4, help="timed strokes per user")
    parser.add_argument("--apps", default="do-nothing,app")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        values = canvas_values(Path(folder))
    results = {name: crowd(APPS[name], values, args.users, args.strokes) for name in args.apps.split(",")}
    columns = ("strokes", "errors", "strokes_per_s", "label_p50_ms", "label_p95_ms", "server_cpu_ms_per_stroke",
               "requests_per_stroke", "kb_per_stroke")
    print(f"{args.users} users drawing {args.strokes} strokes each at once")
    print("| app | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, result in results.items():
        print(f"| {name} | " + " | ".join(f"{result[c]:.1f}" if isinstance(result[c], float) else str(result[c])
                                          for c in columns) + " |")
    if {"do-nothing", "app"} <= set(results):
        app, base = results["app"], results["do-nothing"]
        print(f"app / do-nothing: strokes per second {app['strokes_per_s'] / base['strokes_per_s']:.2f}x (goal: at "
              f"least 0.7x), p95 stroke-to-label {app['label_p95_ms'] / base['label_p95_ms']:.2f}x (goal: at most "
              f"1.5x), server CPU per stroke {app['server_cpu_ms_per_stroke'] / base['server_cpu_ms_per_stroke']:.1f}x"
              " (goal: at most 3x)")


if __name__ == "__main__":
    main()
