"""The model in the page against the model on the server, in headless Chromium.

    python benchmarks/page_model.py [--strokes 20] [--photos 10] [--model DIR ...]

It writes the static Space into a temporary folder (``python -m vit_demo static``), serves it with
``python -m http.server``, starts the app (python app.py), and measures:
- mouse-up to every view drawn: from the pointer-up of a stroke (an example photo's click) to the moment the tab's
  views have drawn the new image's numbers (``live.receive`` has returned for its last answer), median and p95, on
  three paths: the static page, the app with the page's model (its default), and the app with the server's
  (``?model=server``, the baseline);
- requests per stroke on each path;
- page weight: the bytes a first visit downloads before its first prediction (as served, and as gzip -6 would
  send them), for the digit tab, and what opening the photo tab adds; and the time to the first prediction of a
  drawing, cold (a new browser profile) and warm (a reload, with the browser's cache);
- with ``--model DIR`` (an imported model, say), that model's tab in the static page: the bytes opening it
  downloads, and an example photo's click to its views drawn; and in the app (``python app.py --model DIR``), an
  example photo's click to its views drawn with the page's model and with the server's (``?model=server``): which is
  quicker for a model of that size.

Needs Debian's Chromium (apt-get install -y chromium) and playwright (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import REPO, free_port, p50_p95, serving  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)

from vit_demo.deploy.static_space import write_static  # noqa: E402
from vit_demo.page.layout import added_tab  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The page warms its model up once loaded (source.js warmUp, at most half a second of runs): the measures start when a
# visitor would, some seconds after the page (or the photo tab) opens.
WARM_UP_MS = 2000
STROKES = [[(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)], [(0.5, 0.15), (0.5, 0.85)],
           [(0.3, 0.25), (0.7, 0.25), (0.3, 0.8), (0.7, 0.8)]]  # a 7, a 1, a Z (read as 2 or 7)

# In page time (ms): each pointer-up or example click, and each time one of the tab's views was drawn, with the key of
# the image it drew (whatever brought the numbers: the canvas' answer, or the photo reader's).
RECORDER = """(panel) => {
    window.__starts = []; window.__draws = [];
    document.addEventListener('pointerup', () => window.__starts.push(performance.now()), true);
    document.addEventListener('click', (e) => {
        if (e.target.closest('.vd-examples')) window.__starts.push(performance.now()); }, true);
    const live = window.vdLive[panel];
    for (const view of live.views) {
        const draw = view.draw;
        view.draw = (...args) => { const begun = performance.now(), out = draw(...args), now = performance.now();
            window.__draws.push([now, live.reading ? null : live.state?.key ?? null,
                                 view.prediction || live.onScreen.has(view.name), view.element.id, now - begun]);
            return out; };
    }
}"""
KEY = "(panel) => { const live = window.vdLive[panel]; return live.reading ? null : live.state?.key ?? null; }"


@contextlib.contextmanager
def static_server(folder: Path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                                str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    try:
        yield f"http://127.0.0.1:{port}/index.html"
    finally:
        process.terminate()


def draw(page, points) -> None:
    canvas = page.locator("#canvas canvas.vd-draw")
    box = canvas.bounding_box()
    xy = [(box["x"] + fx * box["width"], box["y"] + fy * box["height"]) for fx, fy in points]
    page.mouse.move(*xy[0])
    page.mouse.down()
    for x, y in xy[1:]:
        page.mouse.move(x, y, steps=3)
    page.mouse.up()


def latencies(page, panel: str, count: int, act, settle: float) -> tuple[list[float], list[float], int, dict]:
    """Mouse-up (or click) to the views on screen drawn, and to every view drawn, for ``count`` actions, each giving
    a new image; the requests they made; and where the time went: {"numbers": mouse-up to the first view's draw
    (the image's numbers ready), view id: its draws' ms}."""
    page.wait_for_function("(panel) => window.vdLive?.[panel]?.receive", arg=panel, timeout=60000)  # views mounted
    page.evaluate(RECORDER, panel)
    requests = []  # to the server's functions and queue: not the files a page loads (graphs, scripts, pictures)
    page.on("request", lambda r: requests.append(r.url) if "/gradio_api/" in r.url and "/file=" not in r.url else None)
    seen, times, spent = [], [], {}
    for i in range(count):
        before = page.evaluate(KEY, panel)
        act(i)
        page.wait_for_function(f"(({KEY})({panel!r})) !== null && (({KEY})({panel!r})) !== {json.dumps(before)}",
                               timeout=60000)
        page.wait_for_timeout(settle * 1000)  # the last answer lands, and the views it redraws
        start, draws, key = page.evaluate(f"[window.__starts.at(-1), window.__draws, ({KEY})({panel!r})]")
        drawn = [(t, shown, view, ms) for t, k, shown, view, ms in draws if k == key and t >= start]
        times.append(max(t for t, *_ in drawn) - start)
        seen.append(max(t for t, shown, *_ in drawn if shown) - start)
        spent.setdefault("numbers", []).append(min(t - ms for t, _, _, ms in drawn) - start)
        for _, _, view, ms in drawn:
            spent.setdefault(view, []).append(ms)
    return seen, times, len(requests), spent


def stroke_times(page, strokes: int, settle: float) -> tuple[list[float], list[float], int, dict]:
    page.wait_for_timeout(WARM_UP_MS)
    def act(i):
        page.click("#canvas .vd-clear")
        draw(page, STROKES[i % len(STROKES)])
    return latencies(page, "digit", strokes, act, settle)


def photo_times(page, photos: int, settle: float, tab: str = "photo") -> tuple[list[float], list[float], int, dict]:
    """An example photo's click to its views drawn, on the photo tab ``tab`` (its prefix: "photo", or an added
    model's)."""
    page.click(f"[data-tab={tab}]")
    page.wait_for_selector(f"#tab-{tab}[data-ready]", timeout=120000)  # its model loads once the tab opens
    page.wait_for_timeout(WARM_UP_MS)
    buttons = page.locator(f"#{tab}-input .vd-examples button")
    count = buttons.count()
    return latencies(page, tab, photos, lambda i: buttons.nth(i % count).click(), settle)


RESOURCES = "performance.getEntriesByType('resource').map((e) => e.name)"  # the files a page has loaded


def first_answer(page, url: str, tab: str) -> tuple[float, set[str]]:
    """Open ``url``, then the tab ``tab`` once the page is up: seconds from the tab's click to its example's answer,
    and the files the page had loaded before the click."""
    page.goto(url)
    page.wait_for_selector("#canvas canvas.vd-draw[data-ready]")
    before, started = set(page.evaluate(RESOURCES)), time.perf_counter()
    page.click(f"[data-tab={tab}]")
    page.wait_for_function("(tab) => window.vdLive?.[tab]?.state?.numbers", arg=tab, timeout=300000)
    return time.perf_counter() - started, before


def added_models(browser, url: str, root: Path, models: list[str], photos: int, settle: float) -> list[tuple]:
    """For each added model's tab of the static page: the bytes opening it downloads (its graphs, as served and
    gzipped); seconds from its tab's click to its first answer, cold (a new profile) and warm (a reload, with the
    browser's cache); an example photo's click to the views on screen and to every view drawn."""
    rows = []
    for model in models:
        tab = added_tab(model).prefix
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        cold, before = first_answer(page, url, tab)
        seen, times, requests, _ = photo_times(page, photos, settle, tab)
        opened = [e for e in page.evaluate(RESOURCES) if e not in before and f"/models/{model}/" in e]
        files = [root / urllib.parse.unquote(urllib.parse.urlsplit(u).path).lstrip("/") for u in set(opened)]
        weight = (sum(f.stat().st_size for f in files), sum(len(gzip.compress(f.read_bytes(), 6)) for f in files))
        rows.append((model, weight, (cold, first_answer(page, url, tab)[0]), seen, times))
        context.close()
    return rows


# The files the page had asked for by the time its first prediction was drawn (the Resource Timing API, in page time).
FIRST_FILES = """() => {
    const drawn = window.__firstLabelAt;
    return performance.getEntriesByType('resource').filter((e) => e.startTime <= drawn).map((e) => e.name);
}"""
WATCH_LABEL = """(label) => new Promise((resolve) => {
    const seen = () => document.querySelector('#digit-label .vd-top-class')?.innerText.trim() === label
        && window.vdLive.digit.state?.numbers.label === label;
    const check = () => seen() ? resolve((window.__firstLabelAt = performance.now())) : requestAnimationFrame(check);
    check();
})"""


def first_prediction(page, url: str) -> tuple[float, list[str]]:
    """Open ``url``, draw a 7 once the canvas is ready; seconds from opening to its label, and the files asked for
    before it (the page's own address first)."""
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("#canvas canvas.vd-draw[data-ready]")
    page.click("#canvas .vd-clear")
    draw(page, STROKES[0])
    page.evaluate(WATCH_LABEL, "7")
    seconds = time.perf_counter() - started
    return seconds, [url, *page.evaluate(FIRST_FILES)]


def page_weight(browser, url: str, root: Path) -> dict:
    """Bytes a first visit to the static page asks for before its first prediction, and what opening the photo tab
    adds; seconds to the first prediction of a drawing, cold (a new profile) and warm (a reload, with its cache)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    cold, digit = first_prediction(page, url)
    print("Asked for before the first prediction:", *sorted(u.rsplit("/", 1)[-1] for u in digit))
    page.click("[data-tab=photo]")
    page.locator(".vd-photo .vd-examples button").nth(1).click()
    page.wait_for_function("window.vdLive.photo.state?.numbers", timeout=60000)
    photo = [e for e in page.evaluate(RESOURCES)
             if e not in digit and "/snapshots/" not in e]  # the digits' snapshots load after the first drawing
    warm, _ = first_prediction(page, url)
    context.close()

    def weigh(urls):
        files = {root / (urllib.parse.unquote(urllib.parse.urlsplit(u).path).lstrip("/") or "index.html")
                 for u in urls if u.startswith("http")}
        files = [f for f in files if f.is_file()]
        return {"files": len(files), "bytes": sum(f.stat().st_size for f in files),
                "gzip_bytes": sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)}

    return {"digit": weigh(digit), "photo_adds": weigh(photo), "first_prediction_cold_s": cold,
            "first_prediction_warm_s": warm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strokes", type=int, default=20)
    parser.add_argument("--photos", type=int, default=10)
    parser.add_argument("--settle", type=float, default=0.5, help="seconds to wait after each action")
    parser.add_argument("--model", action="append", default=[], metavar="DIR",
                        help="a weights folder (python -m vit_demo import ...) to measure on a tab of its own in the "
                             "static page, beside the shipped models (repeatable)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        root = Path(tmp) / "static"
        write_static(root, models=args.model)
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        rows = []
        with static_server(root) as url:
            weight = page_weight(browser, url, root)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_selector("#canvas canvas.vd-draw[data-ready]")
            strokes = stroke_times(page, args.strokes, args.settle)
            rows.append(("static page", *strokes[:3], *photo_times(page, args.photos, args.settle)[:3]))
            spent = strokes[3]
            page.close()
            added = added_models(browser, url, root, [Path(m).name for m in args.model], args.photos, args.settle)
        in_app = []  # the added models' tabs in the app: (model, path, photo times)
        with serving(REPO / "app.py", args=[f"--model={m}" for m in args.model]) as server:
            for name, query in (("app, page's model", ""), ("app, server's model", "?model=server")):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(server.url + query)
                page.wait_for_selector("#canvas canvas.vd-draw[data-ready]", timeout=60000)
                if not query:
                    page.wait_for_selector("#canvas canvas.vd-draw[data-model=page]", timeout=60000)
                strokes = stroke_times(page, args.strokes, args.settle)
                photos = photo_times(page, args.photos, args.settle)
                rows.append((name, *strokes[:3], *photos[:3]))
                for model in args.model:
                    tab = added_tab(Path(model).name).prefix
                    path = "app, its default" if not query else name  # (the page's model, or the server's)
                    in_app.append((Path(model).name, path, photo_times(page, args.photos, args.settle, tab)[:3]))
                page.close()
        browser.close()
    print("| path | stroke: mouse-up to the views on screen drawn, median ms | to every view drawn, median ms | p95 ms "
          "| requests per stroke | photo: click to the views on screen drawn, median ms | to every view, median ms "
          "| p95 ms | requests per photo |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, stroke_seen, strokes, stroke_requests, photo_seen, photos, photo_requests in rows:
        s50, s95 = p50_p95(strokes)
        f50, f95 = p50_p95(photos)
        print(f"| {name} | {p50_p95(stroke_seen)[0]:.1f} | {s50:.1f} | {s95:.1f} | {stroke_requests / args.strokes:.1f} "
              f"| {p50_p95(photo_seen)[0]:.1f} | {f50:.1f} | {f95:.1f} | {photo_requests / args.photos:.1f} |")
    print("\nWhere a stroke's time goes in the static page (median ms): mouse-up to the numbers ready "
          f"{statistics.median(spent.pop('numbers')):.1f}; drawing each view: "
          + ", ".join(f"{view} {statistics.median(ms):.1f}" for view, ms in sorted(spent.items())))
    d, ph = weight["digit"], weight["photo_adds"]
    print(f"\nStatic page, first visit: the digit tab downloads {d['files']} files, {d['bytes'] / 1e6:.2f} MB as "
          f"served ({d['gzip_bytes'] / 1e6:.2f} MB gzipped) before its first prediction; opening the photo tab adds "
          f"{ph['files']} files, {ph['bytes'] / 1e6:.2f} MB ({ph['gzip_bytes'] / 1e6:.2f} MB gzipped). First "
          f"prediction of a drawing: {weight['first_prediction_cold_s']:.2f} s cold (a new profile), "
          f"{weight['first_prediction_warm_s']:.2f} s warm (a reload).")
    if added:
        print("\n| added model, static page | opening its tab downloads MB (gzipped) | its first answer, cold s "
              "| warm s | photo: click to the views on screen drawn, median ms | to every view, median ms | p95 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for model, (size, zipped), (cold, warm), seen, times in added:
            t50, t95 = p50_p95(times)
            print(f"| {model} | {size / 1e6:.2f} ({zipped / 1e6:.2f}) | {cold:.2f} | {warm:.2f} "
                  f"| {p50_p95(seen)[0]:.1f} | {t50:.1f} | {t95:.1f} |")
        print("\n| added model | path | photo: click to the views on screen drawn, median ms "
              "| to every view, median ms | p95 ms | requests per photo |")
        print("|---|---|---:|---:|---:|---:|")
        for model, name, (seen, times, requests) in in_app:
            t50, t95 = p50_p95(times)
            print(f"| {model} | {name} | {p50_p95(seen)[0]:.1f} | {t50:.1f} | {t95:.1f} "
                  f"| {requests / args.photos:.1f} |")


if __name__ == "__main__":
    main()
