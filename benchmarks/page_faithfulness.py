"""What scoring the maps costs when the page does it (vit_demo/page/assets/page/source.js' faithfulness, with
assets/page/faithfulness.js: the model and relevance graphs run by the page's own onnxruntime-web, WebAssembly, one
thread, here under Node), beside PyTorch on the same image in the same run (interpret.faithfulness, one thread, as
the export's chart computes it): each map's deletion and insertion curves and random's 8 rankings, some 200 forward
passes in the page (the whole and the blank image run once) and some 240 in PyTorch.

    python benchmarks/page_faithfulness.py [--repeat 3] [--chromium]

Each figure is the page's answer's own ``ms`` (from the request to the answer, the graphs already loaded), and
PyTorch's whole work, the median over the examples and repeats. With ``--chromium``, also the
static page (``python -m vit_demo static`` into a temporary folder, served by ``python -m http.server``) in headless
Chromium: each example's first scoring (as a click on Score the maps asks it) and the median of the repeats.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from common import free_port, node_and_torch, page_source  # noqa: E402  (benchmarks/ is on sys.path)
from vit_demo import load_model  # noqa: E402
from vit_demo.interpret.faithfulness import RANDOM_RANKINGS, faithfulness  # noqa: E402
from vit_demo.page.captions import image_text  # noqa: E402

EXAMPLES = ROOT / "examples"
# Not the examples the tabs start with (a 2, a horse): in Chromium, a click on each must change the image.
IMAGES = {"mnist": ("digits/7.png", "digits/1.png"), "cifar10": ("photos/ship.png", "photos/cat.png")}


def page_times(model: str, requests: list[dict], repeat: int) -> list[float]:
    """The page's ``ms`` for each request asked ``repeat`` times, after one untimed answer (the runtime warming)."""
    asked = requests[:1] + [request for request in requests for _ in range(repeat)]
    with tempfile.TemporaryDirectory() as tmp:
        answers = page_source(model, [("faithfulness", request) for request in asked], tmp)["answers"]
    for found in answers:
        if "error" in found:
            raise SystemExit(f"{model}: the page says {found['error']}")
    return [found["ms"] for found in answers[1:]]


def chromium_times(repeat: int) -> dict[str, tuple[list[float], list[float]]]:
    """In the static page in headless Chromium, per model: each example's first scoring and its repeats' ``ms``."""
    from playwright.sync_api import sync_playwright

    from vit_demo.deploy.static_space import write_static

    found = {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright, contextlib.ExitStack() as stack:
        root, port = Path(tmp) / "static", free_port()
        write_static(root)
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                   "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(server.terminate)
        time.sleep(1)
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        stack.callback(browser.close)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}/index.html")
        page.wait_for_selector("#canvas canvas.vd-draw[data-ready]")
        for name, prefix, paths in (("mnist", "digit", IMAGES["mnist"]), ("cifar10", "photo", IMAGES["cifar10"])):
            first, warm = [], []
            if prefix == "photo":
                page.click("[data-tab=photo]")
            for path in paths:
                button = (f"#canvas .vd-examples button[title='example: {Path(path).stem}']" if prefix == "digit"
                          else f".vd-photo button[data-src='examples/{path}']")
                key = f"() => window.vdLive.{prefix}?.state?.key ?? ''"
                before = page.evaluate(key)
                page.click(button)
                page.wait_for_function(f"() => ({key})() !== {json.dumps(before)}", timeout=60_000)
                time.sleep(1)  # the example's last answer in (the canvas reads a drawn example more than once)
                times = page.evaluate(f"""async (n) => {{ const live = window.vdLive.{prefix}, times = [];
                    for (let i = 0; i <= n; i++) times.push((await live.source.faithfulness(
                        {{ image: live.state.numbers.image }})).ms);
                    return times; }}""", repeat)
                first.append(times[0])
                warm.extend(times[1:])
            found[name] = first, warm
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chromium", action="store_true", help="also time the static page in headless Chromium")
    args = parser.parse_args()
    node_and_torch(f"{args.repeat} x {len(IMAGES['mnist'])} examples")
    print("| model | examples | page median ms | PyTorch median ms |")
    print("|---|---|---:|---:|")
    for name, paths in IMAGES.items():
        classifier = load_model(name, device="cpu")
        images = [classifier.preprocess(EXAMPLES / path) for path in paths]
        page = statistics.median(page_times(name, [{"image": image_text(image)} for image in images], args.repeat))
        def curves(image):  # as the page scores them: every map, and RANDOM_RANKINGS random rankings
            return faithfulness(classifier.model, classifier.batch([image]), classifier.info.dataset.name,
                                temperature=classifier.temperature, random_rankings=RANDOM_RANKINGS)

        curves(images[0])  # warm
        times = []
        for image in images:
            for _ in range(args.repeat):
                started = time.perf_counter()
                curves(image)
                times.append(1000 * (time.perf_counter() - started))
        python = statistics.median(times)
        print(f"| {name} | {', '.join(Path(path).stem for path in paths)} | {page:.0f} | {python:.0f} |", flush=True)
    if args.chromium:
        print("\nThe static page in headless Chromium (WebAssembly, 1 thread: the page is not cross-origin isolated)")
        print("| model | first scoring ms (each example) | then median ms |")
        print("|---|---|---:|")
        for name, (first, warm) in chromium_times(args.repeat).items():
            print(f"| {name} | {', '.join(f'{ms:.0f}' for ms in first)} | {statistics.median(warm):.0f} |")


if __name__ == "__main__":
    main()
