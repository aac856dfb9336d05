"""Time from the end of a stroke to the new prediction on the page, in headless Chromium.

    python benchmarks/browser_latency.py [--strokes 10]

It starts two servers on local ports and drives each with the same strokes:
- the app (python app.py), with its own light canvas;
- a baseline: Gradio's stock Sketchpad wired to the same classifier and the same label output.
For each stroke it records, in the page, the pointer-up time and the time of the last update of the
prediction that follows it (the page settles for --settle seconds after each stroke); a stroke after
which nothing updates is counted in the "updated after" column.

Needs Debian's Chromium (apt-get install -y chromium) and playwright (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

BASELINE_APP = textwrap.dedent("""
    import os
    import time
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    import gradio as gr
    from vit_demo.preprocess import NothingDrawn
    from vit_demo.ui import classifier

    def predict(sketch):
        if sketch is None or sketch.get("composite") is None:
            return None, ""
        try:
            result = classifier("mnist").predict(sketch["composite"])
        except NothingDrawn:
            return None, ""
        return result.probs, f"{result.label} {time.time()}"

    with gr.Blocks() as demo:
        pad = gr.Sketchpad(elem_id="pad", brush=gr.Brush(default_size=10))
        label = gr.Label(num_top_classes=3, elem_id="digit-label")
        info = gr.Markdown(elem_id="digit-info")
        pad.change(predict, pad, [label, info])
    demo.queue().launch()
""")

# Records pointer-up times and every change of the prediction's text, in page time (ms).
RECORDER = """() => {
    window.__ups = []; window.__updates = [];
    document.addEventListener('pointerup', () => window.__ups.push(performance.now()), true);
    const observer = new MutationObserver(() => window.__updates.push(performance.now()));
    for (const id of ['#digit-label', '#digit-info'])
        observer.observe(document.querySelector(id), {subtree: true, childList: true, characterData: true});
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port), "VIT_DEMO_DEVICE": "cpu",
           "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return server, url
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise RuntimeError(f"{command} did not start")


def stroke_latencies(page, canvas_selector: str, strokes: int, prepare, settle: float) -> list[float]:
    prepare(page)
    canvas = page.locator(canvas_selector)
    box = canvas.bounding_box()
    page.evaluate(RECORDER)
    latencies = []
    for i in range(strokes):
        x = box["x"] + box["width"] * (0.2 + 0.6 * (i % 5) / 4)
        page.mouse.move(x, box["y"] + 0.2 * box["height"])
        page.mouse.down()
        page.mouse.move(x + 0.05 * box["width"], box["y"] + 0.8 * box["height"], steps=3)
        page.mouse.up()
        time.sleep(settle)  # let every update that follows this stroke arrive
        up = page.evaluate("() => window.__ups[window.__ups.length - 1]")
        updates = page.evaluate("() => window.__updates")
        after = [t for t in updates if t > up]
        if after:
            latencies.append(max(after) - up)
    return latencies


def prepare_stock(page) -> None:
    page.locator("#pad button[aria-label='Brush']").click()
    page.keyboard.press("Escape")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strokes", type=int, default=10)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait after each stroke")
    args = parser.parse_args()
    baseline_file = REPO / "benchmarks" / ".stock_sketchpad_app.py"
    baseline_file.write_text(BASELINE_APP)
    results = {}
    try:
        for name, command, selector, prepare in (
            ("app: light canvas", [sys.executable, "app.py"], "#canvas canvas.vd-draw", lambda page: None),
            ("baseline: stock gr.Sketchpad", [sys.executable, str(baseline_file)], "#pad .pixi-target canvas",
             prepare_stock),
        ):
            server, url = start(command)
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.goto(url)
                    page.wait_for_selector(selector)
                    results[name] = stroke_latencies(page, selector, args.strokes, prepare, args.settle)
                    browser.close()
            finally:
                server.terminate()
                server.wait(timeout=30)
    finally:
        baseline_file.unlink(missing_ok=True)
    print(f"end of stroke -> last prediction update on the page, {args.strokes} strokes each, headless Chromium")
    print("| canvas | updated after | median ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for name, values in results.items():
        values = sorted(values)
        if not values:
            print(f"| {name} | 0/{args.strokes} | - | - | - |")
            continue
        p95 = values[math.ceil(0.95 * len(values)) - 1]  # nearest rank
        print(f"| {name} | {len(values)}/{args.strokes} | {statistics.median(values):.0f} | {p95:.0f} | {values[-1]:.0f} |")
    for name, values in results.items():
        print(f"{name}, stroke by stroke (ms): {', '.join(f'{v:.0f}' for v in values)}")


if __name__ == "__main__":
    main()
