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
import statistics
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import REPO, serving  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Records pointer-up times and every change of the prediction's text, in page time (ms).
RECORDER = """() => {
    window.__ups = []; window.__updates = [];
    document.addEventListener('pointerup', () => window.__ups.push(performance.now()), true);
    const observer = new MutationObserver(() => window.__updates.push(performance.now()));
    for (const id of ['#digit-label', '#digit-info'])
        observer.observe(document.querySelector(id), {subtree: true, childList: true, characterData: true});
}"""


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
    results = {}
    for name, script, selector, prepare in (
        ("app: light canvas", REPO / "app.py", "#canvas canvas.vd-draw",
         lambda page: page.wait_for_selector("#canvas canvas.vd-draw[data-ready]")),  # its script is listening
        ("baseline: stock gr.Sketchpad", REPO / "benchmarks" / "stock_sketchpad_app.py", "#pad .pixi-target canvas",
         prepare_stock),
    ):
        with serving(script) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(server.url)
            page.wait_for_selector(selector)
            results[name] = stroke_latencies(page, selector, args.strokes, prepare, args.settle)
            browser.close()
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
