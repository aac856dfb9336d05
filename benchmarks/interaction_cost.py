"""What one interaction in the page costs the server, in headless Chromium, against one do-nothing event.

    python benchmarks/interaction_cost.py [--repeat 6] [--events 20]

It starts the app (app.py) and the do-nothing app (benchmarks/noop_app.py) on local ports. Against the app, with the
server reading the drawings (``?model=server``, as for a browser without WebAssembly: the page's own model asks the
server nothing), a Chromium page repeats each interaction ``--repeat`` times: a pen stroke (a new drawing each
time), a layer change, a head change, a click on a patch whose maps the page has not got yet and on one it has, a
class to explain, new and seen, and the training slider moved to a snapshot, new and seen. For each it prints the
requests the page made, the kilobytes it received, the server's CPU (from /proc, less what the same server burns
over an idle spell as long right after: ``ServerCpu``; the server on a core of its own) and, for strokes, the time
from the pen's lift until the page's numbers stopped changing (polled every 10 ms). Against the do-nothing app, one
event, Gradio's own cost, measured two ways (``noop_costs``): from the do-nothing app's own page in Chromium, the
baseline of the goal (a page's event against a page's stroke), and as benchmarks/crowd.py sends it from a Python
client, the leanest an event gets. Only the ratios mean anything across machines.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import serving  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)
from crowd import APPS, Page, page_events, server_cpu_seconds  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
QUIET_SECONDS = 0.5  # a stroke's answers have all landed once the page's numbers stayed the same this long
KEY = "() => window.vdLive?.digit?.state?.key ?? ''"


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """Each of a process's threads' CPU time so far, in ns (Linux /proc/PID/task/TID/schedstat)."""
    times = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            times[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            pass
    return times


class ServerCpu:
    """A server's CPU over what a client does, less its CPU over an idle spell as long, right after.

    An idle Gradio server is not idle: its queue wakes every millisecond to look for work, and how much CPU that
    takes varies from one second to the next (more so when the client's browser is busy on the same cores, and
    when this virtual machine's host is busy: hence the medians of ``main``). Subtracting an idle rate measured once would add an error of several ms to every
    figure, so each measurement is paired with an idle spell of its own length, and the server runs on a core of
    its own (``pinned``). CPU time is read to the nanosecond from the server's threads (its process total counts in
    10 ms ticks), or from that total over a spell in which a thread ended (taking its count with it).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def read(self) -> tuple[dict[int, int], float]:
        return thread_cpu_ns(self.pid), server_cpu_seconds(self.pid)

    def spent(self, before: tuple[dict[int, int], float]) -> float:
        """Seconds of CPU since ``before`` (``read``)."""
        (threads, total), (threads_now, total_now) = before, self.read()
        if threads.keys() <= threads_now.keys():
            return sum(threads_now[tid] - threads.get(tid, 0) for tid in threads_now) / 1e9
        return total_now - total

    def of(self, act: Callable[[], object]) -> tuple[object, float]:
        """``act``'s result and its CPU cost to the server, in ms."""
        before, started = self.read(), time.perf_counter()
        result = act()
        busy, seconds = self.spent(before), time.perf_counter() - started
        before = self.read()
        time.sleep(seconds)
        return result, 1000 * (busy - self.spent(before))


@contextlib.contextmanager
def pinned(script: Path) -> Iterator:
    """``serving(script)`` on the first core alone, this process (and the browser it starts) on the others, so that
    the client's work does not stall the server's; on a machine with one core, shared."""
    cores = os.sched_getaffinity(0)
    if len(cores) < 2:
        with serving(script) as server:
            yield server
        return
    first = min(cores)
    os.sched_setaffinity(0, {first})  # the server inherits it
    try:
        with serving(script) as server:
            os.sched_setaffinity(0, cores - {first})
            yield server
    finally:
        os.sched_setaffinity(0, cores)


class Meter:
    """Requests, bytes and server CPU over one interaction of a page."""

    def __init__(self, page, pid: int) -> None:
        self.page, self.cpu = page, ServerCpu(pid)
        self.requests = 0
        self.bytes = 0
        page.on("requestfinished", self.count)

    def count(self, request) -> None:
        sizes = request.sizes()
        self.requests += 1
        self.bytes += sizes["responseBodySize"] + sizes["responseHeadersSize"]

    def measure(self, act: Callable[[], float | None]) -> dict:
        """``act`` does the interaction and waits for its result (returning a time in ms, or None); then the
        figures, once nothing more happens."""
        self.page.wait_for_timeout(300)
        requests, received = self.requests, self.bytes

        def interaction() -> float | None:
            ms = act()
            self.page.wait_for_timeout(300)  # a late request is counted too
            return ms

        ms, cpu_ms = self.cpu.of(interaction)
        return {"requests": self.requests - requests, "kb": (self.bytes - received) / 1024, "ms": ms, "cpu_ms": cpu_ms}


STROKE_STEP_MS = 80  # between the pen's moves: a stroke of 6 moves lasts about half a second, as a hand draws a 7


def stroke(page, index: int) -> float:
    """A 7 drawn at a place of its own (a new image), at a hand's pace (the canvas reads it while the pen is down);
    ms from the pen's lift until the numbers stop changing."""
    canvas = page.locator("#canvas canvas.vd-draw")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    dx = 0.02 * (index % 5)
    points = [(0.25 + dx, 0.2), (0.7 + dx, 0.2), (0.45 + dx, 0.85)]
    xy = [(box["x"] + fx * box["width"], box["y"] + fy * box["height"]) for fx, fy in points]
    page.mouse.move(*xy[0])
    page.mouse.down()
    for (x0, y0), (x1, y1) in zip(xy, xy[1:]):
        for step in (1, 2, 3):
            page.mouse.move(x0 + (x1 - x0) * step / 3, y0 + (y1 - y0) * step / 3)
            page.wait_for_timeout(STROKE_STEP_MS)
    before = page.evaluate(KEY)
    page.mouse.up()
    lifted = last = time.perf_counter()
    key = before
    while time.perf_counter() - last < QUIET_SECONDS:
        time.sleep(0.01)
        if (now := page.evaluate(KEY)) != key:
            key, last = now, time.perf_counter()
    return 1000 * max(last - lifted, 0.0)


def wait_drawn(page, view: str, shows: str) -> None:
    page.wait_for_function(f"() => document.querySelector('#digit-{view} canvas')?.dataset.drawn === {shows!r}",
                           timeout=20000)


def interactions(page) -> dict[str, Callable[[int], float | None]]:
    """Each interaction, given its repeat's index."""
    grid = page.evaluate("() => window.vdLive.digit.state.numbers.grid")
    classes = ["0", "1", "2", "3", "4", "5", "8"]  # none of them the 7's own

    def layer(i: int) -> None:
        page.locator("#digit-layer input[type='number']").fill(str(1 + i % 6))
        page.locator("#digit-layer input[type='number']").press("Enter")
        wait_drawn(page, "selected", f"{1 + i % 6}/mean")

    def head(i: int) -> None:
        page.locator("#digit-head label", has_text=f"head {1 + i % 4}").click()
        page.wait_for_function("() => document.querySelector('#digit-selected canvas')?.dataset.drawn"
                               f".endsWith('/{1 + i % 4}')", timeout=20000)

    def patch(number: int) -> None:
        canvas = page.locator("#digit-patches canvas")
        box = canvas.bounding_box()
        step = box["width"] / grid
        canvas.click(position={"x": (number % grid + 0.5) * step, "y": (number // grid + 0.5) * step})
        wait_drawn(page, "query", f"query {number}")

    def explain(name: str) -> None:
        picker = page.locator("#digit-explain-class")
        picker.scroll_into_view_if_needed()  # the relevance view below it asks for numbers only while on screen
        picker.select_option(name)
        wait_drawn(page, "relevance", f"relevance {name}")

    def slide(position: int) -> None:
        page.locator("#digit-training-position input").fill(str(position))
        wait_drawn(page, "training", f"snapshot {position}")

    return {
        "pen stroke (a new drawing)": lambda i: stroke(page, i),
        "layer change": layer,
        "head change": head,
        "patch click, maps not in the page yet": lambda i: patch(i),
        "patch click, maps in the page": lambda i: patch(i),
        "class to explain, not in the page yet": lambda i: explain(classes[i % len(classes)]),
        "class to explain, in the page": lambda i: explain(classes[i % len(classes)]),
        "training slider, snapshot not in the page yet": lambda i: slide(1 + i % 3),
        "training slider, snapshot in the page": lambda i: slide(1 + i % 3),
    }


def browser_page(p, url: str, width: int = 1400):
    browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": width, "height": 1000})
    page.goto(url)
    return browser, page


def app_costs(repeat: int) -> dict[str, list[dict]]:
    with pinned(APPS["app"]) as server, sync_playwright() as p:
        browser, page = browser_page(p, server.url + "?model=server")  # with the page's model a stroke asks nothing
        page.wait_for_selector("#canvas canvas.vd-draw[data-ready]")
        stroke(page, 99)  # untimed: the session and the page's first numbers exist
        page.locator("#digit-map input[value=attention]").check()  # raw attention: the layer and head controls
        meter = Meter(page, server.process.pid)
        figures: dict[str, list[dict]] = {}
        for name, act in interactions(page).items():
            if name.startswith("pen stroke"):
                figures[name] = [meter.measure(lambda i=i, act=act: act(i)) for i in range(repeat)]
                stroke(page, 99)  # the image the other interactions explore (a 7, not measured)
            else:
                figures[name] = [meter.measure(lambda i=i, act=act: act(i)) for i in range(min(repeat, 3))]
        browser.close()
    return figures


NOOP_ANSWER_MS = 300  # a do-nothing event has been answered this long after its page sent it (some 10 ms here)


def noop_costs(events: int) -> dict[str, dict]:
    """One do-nothing event, Gradio's own cost, two ways: from the do-nothing app's page in Chromium (its drawing
    box changed, one event answered: the baseline of the goal, a page event against a page's stroke), and as
    crowd.py sends it, from a Python client (the leanest an event gets: no browser headers, no page)."""
    with pinned(APPS["do-nothing"]) as server, sync_playwright() as p:
        browser, page = browser_page(p, server.url)
        meter = Meter(page, server.process.pid)
        cpu = meter.cpu
        box = page.locator("#stroke textarea")  # the drawing's box: its change is the stroke event
        box.fill("untimed")
        page.wait_for_timeout(1000)
        requests, received = meter.requests, meter.bytes
        page_ms = [cpu.of(lambda i=i: (box.fill(f"stroke {i}"), page.wait_for_timeout(NOOP_ANSWER_MS)))[1]
                   for i in range(events)]
        from_page = {"requests": (meter.requests - requests) / events, "kb": (meter.bytes - received) / 1024 / events,
                     "cpu_ms": statistics.median(page_ms)}
        browser.close()
        _, fn, trigger = page_events(server.url)["label"]  # the do-nothing app's stroke event
        client = Page(server.url)
        client.event(fn, trigger, ["untimed"])
        client.requests = client.bytes = 0
        client_ms = [cpu.of(lambda i=i: client.event(fn, trigger, [f"stroke {i}"]))[1] for i in range(events)]
        client.close()
    return {"page": from_page, "client": {"requests": client.requests / events, "kb": client.bytes / 1024 / events,
                                          "cpu_ms": statistics.median(client_ms)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=6, help="pen strokes measured (other interactions: up to 3)")
    parser.add_argument("--events", type=int, default=20, help="do-nothing events measured, each way")
    args = parser.parse_args()
    bases = noop_costs(args.events)
    costs = app_costs(args.repeat)
    for how, base in (("from its page in Chromium", bases["page"]), ("from a Python client", bases["client"])):
        print(f"do-nothing event (benchmarks/noop_app.py, {args.events} events {how}): {base['requests']:.1f} requests, "
              f"{base['kb']:.1f} KB, {base['cpu_ms']:.1f} ms of server CPU (median)")
    page, client = bases["page"]["cpu_ms"], bases["client"]["cpu_ms"]
    print("| interaction | times | requests | KB | server CPU ms (median) | x do-nothing page event | x client event | "
          "ms until settled |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, runs in costs.items():
        mean = {k: statistics.mean(r[k] for r in runs) for k in ("requests", "kb")}
        mean["cpu_ms"] = statistics.median(r["cpu_ms"] for r in runs)  # a spell of the host's own load is one outlier
        settled = [r["ms"] for r in runs if r["ms"] is not None]
        print(f"| {name} | {len(runs)} | {mean['requests']:.1f} | {mean['kb']:.1f} | {mean['cpu_ms']:.1f} | "
              f"{mean['cpu_ms'] / page:.1f}x | {mean['cpu_ms'] / client:.1f}x | "
              + (f"{statistics.median(settled):.0f}" if settled else "") + " |")


if __name__ == "__main__":
    main()
