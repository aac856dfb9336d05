"""The static Space (``python -m vit_demo static DIR``): its files, and the page in real Chromium, served by
``python -m http.server`` with every request to another address blocked, drawing and reading photos with the model
run in the page, also once the server is gone. Uses the shipped weights and their committed ONNX graphs."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import http.server
import json
import math
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import (FIRST_SCREEN_WORDS, PHOTOS, app_page, check_talk_mode_fits, as_drawn, assert_curves_drawn, draw,
                      files_in, free_port, git_binaries, label_text, lfs_filters, map_levels, small_texts,
                      top_bars, visible_words, wait_for_label)
from vit_demo.app.service import classifier
from vit_demo.deploy import static_space
from vit_demo.page.layout import EXAMPLES
from vit_demo.deploy.space import needs_lfs
from vit_demo.progress import Steps

ZERO = [(0.5 + 0.28 * math.sin(2 * math.pi * i / 12), 0.5 - 0.36 * math.cos(2 * math.pi * i / 12)) for i in range(13)]
SEVEN = [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)]
ONE = [(0.5, 0.15), (0.5, 0.85)]


@pytest.fixture(scope="module")
def static_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("static") / "space"
    said = io.StringIO()  # (the command's stderr: vit_demo/progress.py)
    record = static_space.write_static(folder, progress=Steps("static", stream=said))
    assert record["files"] > 10
    begun = [line.split("] ", 1)[1] for line in said.getvalue().splitlines() if line.startswith("static [")]
    assert [step.split(" ", 1)[0] for step in begun] == ["laying", "copying", "writing"]  # each said as it begins
    return folder


@contextlib.contextmanager
def serving(folder: Path):
    """``python -m http.server`` on the folder, on 127.0.0.1; yields its address and the process."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url, timeout=1).close()
                break
            time.sleep(0.1)
        yield url, server
    finally:
        server.terminate()
        server.wait(timeout=10)


@contextlib.contextmanager
def static_page(browser, url: str, width: int = 1400, height: int = 1000, path: str = "index.html"):
    """A page on the static site (``path`` in it), every request outside 127.0.0.1 blocked and noted
    (``page.outside_requests``)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.outside_requests, page.console_errors = [], []

    def route(r):
        if r.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
            return r.continue_()
        page.outside_requests.append(r.request.url)
        return r.abort()

    context.route("**/*", route)
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.goto(url + path)
    page.wait_for_selector("#canvas canvas.vd-draw[data-ready]", timeout=30_000)
    try:
        yield page
    finally:
        context.close()


def saved_for_offline(page) -> None:
    """Wait until the page has kept the site in the browser (host.js: keepForOffline), as it says: a file server
    stopped before then fails the save under way (and the browser logs the failed request)."""
    page.wait_for_selector("#vd-offline[data-ready]", timeout=120_000)
    assert page.inner_text("#vd-offline") == "Saved: it works offline."


def levels(answer: dict, field: str = "maps") -> np.ndarray:
    """An answer's (7, 7) maps as the page draws them (conftest.as_drawn): levels 0..255, flat."""
    return np.round(as_drawn(np.asarray(answer[field], np.float32).reshape(-1, 7, 7)) * 255).ravel()


def clear_and_draw(page, *strokes) -> None:
    page.click("#canvas .vd-clear")
    for points in strokes:
        draw(page, points)


def test_folder_is_a_static_space(static_folder, tmp_path):
    readme = (static_folder / "README.md").read_text(encoding="utf-8")
    matter = yaml.safe_load(readme.split("---\n")[1])  # its front matter
    assert matter["sdk"] == "static" and matter["app_file"] == "index.html"
    assert len(matter["short_description"]) <= 60
    assert (static_folder / "index.html").is_file()
    # Every binary, and every file of 10 MiB or more, goes through LFS/Xet, as the Hub requires of a push: the Space
    # bundle's checks (tests/test_space.py), with git's own idea of binary and its own reading of .gitattributes.
    needing = {f for f in files_in(static_folder) if needs_lfs(static_folder / f)}
    assert git_binaries(static_folder, tmp_path) <= needing
    assert {"models/mnist/model.onnx", "vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.gz"} <= needing
    git_dir = tmp_path / "git"
    subprocess.run(["git", "init", "-q", str(git_dir)], check=True)
    filters = lfs_filters(static_folder, sorted(needing), git_dir / ".git")
    assert {f: filters[f] for f in needing if filters[f] != "lfs"} == {}
    # The vendored runtime is the one its checksums name (its WebAssembly binary once unpacked, as the page does).
    vendor = static_folder / "vendor" / "onnxruntime-web"
    for line in (vendor / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        packed = vendor / f"{name}.gz"
        data = gzip.decompress(packed.read_bytes()) if packed.is_file() else (vendor / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest
    # The graphs of both models, and the digit model's snapshots.
    page = json.loads((static_folder / "index.html").read_text().split('id="vd-page">')[1].split("</script>")[0])
    for model in page["models"].values():
        folder = static_folder / model["folder"]
        assert (folder / model["graph"]).is_file() and (folder / model["relevance"]).is_file()
        assert all((folder / s["graph"]).is_file() for s in model["snapshots"]) and model["pageGraphs"]
    assert len(page["models"]["digit"]["snapshots"]) == 6
    # Every file kept for offline use once the page has answered, but WebGPU's build of the runtime, which neither
    # shipped model is read with (an added model's tab's files, and that build where it needs it: once it is opened).
    assert not any(model["gpu"] for model in page["models"].values())
    assert set(static_space.WEBGPU_FILES) <= set(files_in(static_folder))  # (the build's files, by their names)
    assert set(page["offline"]["files"]) == {"./", *files_in(static_folder)} - {
        "README.md", ".gitattributes", *static_space.WEBGPU_FILES}  # (the Hub's, not the page's)
    assert page["offline"]["tabs"] == {}


def test_rewrites_its_own_folder_but_not_another(static_folder, tmp_path):
    static_space.write_static(static_folder)  # its own folder: rewritten
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        static_space.write_static(other)
    assert (other / "keep.txt").read_text() == "mine"


def test_draws_offline_in_the_page(static_folder, browser):
    """Draw a 1, a 7 and a 0: the model in the page reads them; then the server stops, and it still does."""
    with serving(static_folder) as (url, server), static_page(browser, url) as page:
        for strokes, expected in (([ONE], "1"), ([SEVEN], "7"), ([ZERO], "0")):
            clear_and_draw(page, *strokes)
            wait_for_label(page, expected)
        assert page.evaluate("document.querySelector('#digit-first canvas').dataset.drawn") == "map"  # rollout
        assert page.evaluate("document.querySelector('#digit-selected canvas').dataset.drawn") == "6/mean"
        # The relevance graph and the 6 snapshots' graphs, which the page loads a second after the first drawing.
        page.wait_for_function("""() => new Set(performance.getEntriesByType('resource').filter((e) => e.responseEnd > 0
            && /mnist[/](relevance|snapshots[/]epoch-[0-9]+)[.]onnx$/.test(e.name)).map((e) => e.name)).size === 7""",
                               timeout=30_000)
        saved_for_offline(page)
        server.terminate()
        server.wait(timeout=10)
        for strokes, expected in (([SEVEN], "7"), ([ONE], "1")):
            clear_and_draw(page, *strokes)
            wait_for_label(page, expected)
        page.evaluate("""() => { const s = document.querySelector('#digit-training-position input');
                                 s.value = 2; s.dispatchEvent(new Event('input')); }""")  # an earlier model, offline
        page.wait_for_function("document.querySelector('#digit-training canvas').dataset.drawn === 'snapshot 2'")
        page.locator("#digit-relevance").scroll_into_view_if_needed()  # why this class, offline
        page.wait_for_function("document.querySelector('#digit-relevance canvas').dataset.drawn === 'relevance 1'")
        page.click("#digit-faithfulness button.vd-score")  # how far to trust each map, offline: forward passes
        page.wait_for_function("document.querySelector('#digit-faithfulness canvas').dataset.drawn === 'curves'",
                               timeout=60_000)
        assert "in this page" in page.inner_text("#digit-faithfulness .vd-caption")
        assert_curves_drawn(page, "digit-faithfulness")
        assert page.outside_requests == []
        assert page.console_errors == []


def test_views_and_photos_in_the_page(static_folder, browser, tmp_path):
    """A patch click, a head, the training slider, a photo example, and an uploaded photo of none of the classes:
    each answered by the page's model."""
    from PIL import Image

    from vit_demo.data.outside_photos import outside_photos

    photos = sorted((EXAMPLES / "photos").glob("*.png"))
    moon = tmp_path / "moon.png"  # the page's unfamiliar rule (numbers.js, the probe) flags it, as the server's does
    Image.fromarray(dict(outside_photos())["moon.png"]).save(moon)
    moon_label = classifier("cifar10").predict(moon)
    with serving(static_folder) as (url, _), static_page(browser, url) as page:
        clear_and_draw(page, SEVEN)
        wait_for_label(page, "7")
        page.locator("#digit-patches canvas").click(position={"x": 20, "y": 20})  # patch 0
        page.wait_for_function("document.querySelector('#digit-query canvas').dataset.drawn === 'query 0'")
        page.check("#digit-map input[value=attention]")  # raw attention, in place of the first map
        page.check("#digit-head input[value='head 2']")
        assert page.evaluate("document.querySelector('#digit-selected canvas').dataset.drawn") == "6/2"
        page.evaluate("""() => { const s = document.querySelector('#digit-training-position input');
                                 s.value = 1; s.dispatchEvent(new Event('input')); }""")
        page.wait_for_function("document.querySelector('#digit-training canvas').dataset.drawn === 'snapshot 1'")
        assert "Epoch 1" in page.inner_text("#digit-training .vd-caption")
        page.click("[data-tab=photo]")
        for path in photos[:3]:
            expected = classifier("cifar10").predict(path).label
            page.click(f".vd-photo button[data-src='examples/photos/{path.name}']")
            wait_for_label(page, expected, panel="photo", timeout=60)
        assert label_text(page, "photo") == expected
        assert page.locator("#photo-notice").count() == 1 and page.locator("#photo-notice").is_hidden()
        assert moon_label.unfamiliar
        page.locator(".vd-photo input[type=file]").set_input_files(str(moon))
        # (its label may be the last example's, bird: so the notice, not the label, says its answer has come)
        page.wait_for_function("document.querySelector('#photo-notice').innerText.includes('unlike the photos the "
                               "model knows')", timeout=60_000)
        wait_for_label(page, moon_label.label, panel="photo", timeout=60)
        notes = tmp_path / "notes.png"
        notes.write_bytes(b"this is not an image")  # said why; the moon's photo and views go, as in the app
        page.locator(".vd-photo input[type=file]").set_input_files(str(notes))
        page.wait_for_function("document.querySelector('#photo-info').innerText.includes('this file is not an "
                               "image')", timeout=20_000)
        assert label_text(page, "photo") == "" and page.locator(".vd-photo-shown").is_hidden()
        page.click(f".vd-photo button[data-src='examples/photos/{photos[0].name}']")
        wait_for_label(page, classifier("cifar10").predict(photos[0]).label, panel="photo", timeout=60)
        assert page.locator(".vd-photo-shown").is_visible()
        assert page.outside_requests == []


def test_the_pages_answers_in_chromium_are_pythons(static_folder, browser):
    """What the page answers in Chromium (the views' questions: another patch, heads off, the lens, why a class, how
    attention is computed) against Python's for the same pixels (tests/test_page_source.py holds the same under Node)."""
    import torch

    from vit_demo.app.service import classifier
    from vit_demo.interpret import explain, heads

    clf = classifier("mnist")
    with serving(static_folder) as (url, _), static_page(browser, url) as page:
        clear_and_draw(page, SEVEN)
        wait_for_label(page, "7")
        numbers = json.loads(page.evaluate("window.vdLive.digit.numbers()"))
        image = np.asarray(numbers["image"], np.uint8).reshape(28, 28).astype(np.float32) / 255
        ask = """async (request) => { const live = window.vdLive.digit;  // its typed arrays as lists
            const reply = await live.source[request.kind]({ ...request, image: live.state.numbers.image });
            return JSON.parse(JSON.stringify(reply, (key, v) => (ArrayBuffer.isView(v) ? Array.from(v) : v))); }"""
        request = {"off": [[5, 0], [5, 2], [2, 1]], "mode": "mean"}
        off, means = [(5, 0), (5, 2), (2, 1)], heads.read_head_means(clf.info.folder, clf.model)

        page_knockout = page.evaluate(ask, {**request, "kind": "knockout"})
        python = heads.knockout(clf.model, clf.batch([image]), off, means)
        assert page_knockout["off"] == sorted(request["off"])
        assert page_knockout["logit_diff"]["intact"] == pytest.approx(float(python.logit_diff[0]), abs=1e-3)
        assert page_knockout["logit_diff"]["ablated"] == pytest.approx(float(python.ablated_logit_diff[0]), abs=1e-3)
        probs = torch.softmax(python.ablated[0] / clf.temperature, -1)
        assert page_knockout["label"] == clf.classes[int(probs.argmax())]
        np.testing.assert_allclose(page_knockout["probs"], probs.tolist(), atol=1e-4)

        page_lens = page.evaluate(ask, {**request, "kind": "lens"})
        with heads.switched_off(clf.model, off, means):
            lens = torch.softmax(heads.logit_lens(clf.model, clf.batch([image]))[0] / clf.temperature, -1)  # (L, K)
            lens_maps = heads.lens_maps(clf.model, clf.batch([image]))[0].numpy()
        for mine, row in zip(page_lens["layers"], lens):
            assert mine["label"] == clf.classes[int(row.argmax())]
            assert mine["probability"] == pytest.approx(float(row.max()), abs=2e-4)
        assert abs(np.asarray(page_lens["maps"]) * 255 - np.round(lens_maps * 255).ravel()).max() <= 1

        for label, pairs in (("7", []), ("1", []), ("7", off)):  # its answer, another class, heads off
            asked = {"label": label, "off": [list(p) for p in pairs], "mode": "mean"}
            page_relevance = page.evaluate(ask, {**asked, "kind": "relevance"})
            with heads.switched_off(clf.model, pairs, means):
                exact = clf.relevance_preprocessed([image], [label])[0]
            if not pairs:
                assert page_relevance["title"].startswith(f"<b>Why {'' if label == '7' else 'not '}{label}?</b>")
            assert abs(levels(page_relevance, "map") - np.round(exact / exact.max() * 255).ravel()).max() <= 1

        page_query = page.evaluate(ask, {"patch": 24, "kind": "query"})
        assert "Where patch 24 looks" in page_query["title"]
        attention = clf.predict_preprocessed([image])[0].attention
        assert abs(levels(page_query) - map_levels(attention, 25).ravel()).max() <= 1

        page_steps = page.evaluate(ask, {**request, "kind": "steps", "layer": 3, "head": 2, "patch": 24})
        with heads.switched_off(clf.model, off, means), torch.no_grad():
            qkv = clf.model.forward_activations(clf.batch([image]), qkv=True).qkv[0].numpy()
        python = explain.attention_steps(qkv, 3, 2, 25)
        assert (page_steps["layer"], page_steps["head"], page_steps["patch"]) == (3, 2, 24)
        for name in ("query", "scores", "weights", "output"):
            np.testing.assert_allclose(page_steps[name], python[name], atol=1e-4, err_msg=name)


def patch_three_into_eight(page) -> None:
    """Keep the example 3 as clean and the 8 as corrupt, and wait for both patching grids."""
    for digit, slot in (("3", "clean"), ("8", "corrupt")):
        page.click(f"#canvas .vd-examples button[title='example: {digit}']")
        wait_for_label(page, digit)
        page.click(f"#digit-patching button.vd-use[data-slot='{slot}']")
    page.wait_for_function("() => document.querySelector('#digit-patching .vd-patching').dataset.drawn"
                           ".endsWith('/true')", timeout=60_000)


def test_once_saved_it_reloads_and_runs_every_tab_with_the_network_gone(static_folder, browser):
    """After its first answer the page keeps every file of the site in the browser (sw.js answers from it) and says
    so; then, with its file server stopped, it reads an uploaded photo and an "Also try" photo, shows every Inside
    picture of both models, patches one digit into another, shows how attention is computed, and reloads and reads
    a drawing."""
    inside_loaded = """(model) => [...document.querySelectorAll(`[data-model=${model}] img`)].every((img) =>
        img.complete && img.naturalWidth > 0)"""
    with serving(static_folder) as (url, server), static_page(browser, url) as page:
        saved_for_offline(page)
        server.terminate()
        server.wait(timeout=10)
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        page.locator(".vd-photo input[type=file]").set_input_files(str(PHOTOS / "ship.png"))
        wait_for_label(page, "ship", panel="photo", timeout=60)
        key = page.evaluate("window.vdLive.photo.state.key")
        page.click("#photo-input .vd-tries button[data-src$='rocket.png']")  # kept too: read as a ship as well
        page.wait_for_function("(key) => window.vdLive.photo.state?.key > key", arg=key, timeout=60_000)
        assert label_text(page, "photo") == "ship" and "A rocket" in page.inner_text("#tab-photo .vd-lesson")
        page.click("[data-tab=inside]")
        page.wait_for_function(inside_loaded, arg="mnist", timeout=20_000)
        page.check("#inside-model input[value=cifar10]")
        page.wait_for_function(inside_loaded, arg="cifar10", timeout=20_000)
        page.click("[data-tab=digit]")
        patch_three_into_eight(page)
        page.locator("#tab-digit details.vd-deeper summary").click()
        page.locator("a[href='#digit-steps-title']").click()
        page.wait_for_function("() => document.querySelector('#digit-steps').dataset.steps", timeout=20_000)
        page.reload()
        page.wait_for_selector("#canvas canvas.vd-draw[data-ready]", timeout=30_000)
        clear_and_draw(page, SEVEN)
        wait_for_label(page, "7")
        assert page.outside_requests == [] and page.console_errors == []


def test_patching_in_the_page(static_folder, browser):
    """Keep a 3 as clean and an 8 as corrupt: the page's model patches one into the other, heads and residual stream
    (its patching graphs, loaded when the view first asks; tests/test_page_patching.py holds its numbers against the
    server's), with no server of ours."""
    with serving(static_folder) as (url, _), static_page(browser, url) as page:
        patch_three_into_eight(page)
        text = page.inner_text("#digit-patching")
        assert "Logit difference 3 − 8" in text and "ms in this page" in text
        assert page.locator("#digit-patching canvas.vd-patch-residual").count() == 2
        assert page.outside_requests == [] and page.console_errors == []


def test_a_host_that_unpacks_the_runtime_itself_works_too(static_folder, browser):
    """A host may send the runtime's .gz with Content-Encoding: gzip, so that the browser unpacks it before the page
    does: the page takes the binary as it comes."""

    class Unpacking(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(static_folder), **kwargs)

        def end_headers(self):
            if self.path.endswith(".wasm.gz"):
                self.send_header("Content-Encoding", "gzip")
            super().end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unpacking)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with static_page(browser, url) as page:
            clear_and_draw(page, SEVEN)
            wait_for_label(page, "7")
            assert "in this page" in page.inner_text("#digit-info")
    finally:
        server.shutdown()
        server.server_close()


def test_talk_mode_fits_a_projector_and_answers_its_keys(static_folder, browser):
    """?view=talk in the static page: the app's talk mode (its CSS, toggle and keys), within 1280 x 720."""
    with serving(static_folder) as (url, _), static_page(browser, url, 1280, 720, "index.html?view=talk") as page:
        assert page.evaluate("document.getElementById('vd-app').classList.contains('vd-talk')")
        clear_and_draw(page, SEVEN)
        wait_for_label(page, "7")
        page.keyboard.press("ArrowLeft")  # layer 5
        page.keyboard.press("ArrowDown")  # head 1
        page.wait_for_function("document.querySelector('#digit-selected canvas').dataset.drawn === '5/1'")
        assert not page.locator("#digit-cls-grid").is_visible()  # the detail views are hidden
        bottom = page.evaluate("Math.max(...['#digit-selected canvas', '#digit-head', '#canvas canvas.vd-draw']"
                               ".map((s) => document.querySelector(s).getBoundingClientRect().bottom))")
        assert bottom <= 720 and small_texts(page) == []  # and nothing on screen under 18 px
        page.click("[data-tab=photo]")  # the photo tab fits too: the photo, its examples, the answer, the large view
        wait_for_label(page, "horse", panel="photo", timeout=60)
        for part in ("#photo-input", "#photo-label", "#photo-first canvas", "#photo-map",
                     "#photo-input .vd-examples button >> nth=-1"):
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        page.click("[data-tab=digit]")
        page.uncheck("#talk-mode input")
        assert "view=talk" not in page.url and page.locator("#digit-cls-grid").is_visible()


def test_talk_mode_fits_720_on_every_tab_in_every_state_and_lists_its_keys_in_the_page_too(static_folder, browser):
    """As in the app (tests/test_browser.py): "?" lists the keys, → walks the layers from the first map, and each
    tab in each state (an answer, raw attention, each "Also try", a warning among them, no image) fits 1280x720;
    and at 390x844, as the page and in talk mode, the top class's bar is a bar, not a stub."""
    with serving(static_folder) as (url, _):
        with static_page(browser, url, 1280, 720, "index.html?view=talk") as page:
            check_talk_mode_fits(page)
        for path in ("index.html", "index.html?view=talk"):
            with static_page(browser, url, 390, 844, path) as page:
                for panel in ("digit", "photo"):
                    page.click(f"[data-tab={panel}]")
                    track, fill = top_bars(page, panel)
                    assert track >= 48 and fill >= 40, (path, panel, track, fill)


def test_each_tabs_first_screen_is_a_few_dozen_words_in_the_page_too(static_folder, browser):
    # The page a free host gets, once it has said it works offline: the same few dozen words as the app's.
    with serving(static_folder) as (url, _), static_page(browser, url, 1400, 900) as page:
        saved_for_offline(page)
        for tab, panel, label in (("digit", "digit", "2"), ("photo", "photo", "horse")):
            page.click(f"[data-tab={tab}]")
            wait_for_label(page, label, panel=panel, timeout=60)
            page.wait_for_function(f"() => document.querySelector('#{panel}-first canvas').dataset.drawn")  # settled
            page.evaluate("() => window.scrollTo(0, 0)")
            words = visible_words(page)
            assert "works offline" in " ".join(words) and len(words) <= FIRST_SCREEN_WORDS, " ".join(words)


# The type of every element of the page that holds text, by its place in the page: its font (family, weight, size,
# line height) and, for the few named, the width its text takes (the same font file, bold face included).
TYPE = """(named) => { const root = document.getElementById('vd-app'), type = {}, widths = {};
    const place = (e) => { const path = [];
      for (; e !== root; e = e.parentElement) {
        path.unshift(e.id ? `#${e.id}` : `${e.tagName}:${[...e.parentElement.children].indexOf(e)}`);
        if (e.id) break;
      }
      return path.join('>'); };
    for (const e of root.querySelectorAll('*')) {
      if (![...e.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim())) continue;
      const style = getComputedStyle(e);
      type[place(e)] = [style.fontFamily, style.fontWeight, style.fontSize, style.lineHeight];
    }
    for (const [name, selector] of Object.entries(named)) {
      const e = document.querySelector(selector), range = document.createRange(), style = getComputedStyle(e);
      range.selectNodeContents(e);
      widths[name] = [style.fontFamily, style.fontWeight, style.fontSize, range.getBoundingClientRect().width];
    }
    return [type, widths]; }"""
NAMED = ({"All layers together": "#digit-map label", "Attention through training": "#digit-training-title",
          "the title": "#vd-header h1"},  # on the digit tab
         {"the photo tab, chosen (bold)": "[data-tab=photo]", "a bold word": "#photo-classes b"})  # on the photo tab


def typeset(page) -> tuple[dict, dict]:
    """The TYPE of the page, on the digit tab and then the photo tab's named elements."""
    page.wait_for_function("() => document.querySelector('#digit-label .vd-prob-row') && "
                           "document.fonts.status === 'loaded'", timeout=30_000)  # its first answer, in its type
    everything, widths = page.evaluate(TYPE, NAMED[0])
    page.click("[data-tab=photo]")
    page.wait_for_function("() => document.fonts.status === 'loaded'")
    return everything, {**widths, **page.evaluate(TYPE, NAMED[1])[1]}


def test_the_app_sets_its_type_as_the_static_page_does(static_folder, browser, app_url):
    """The app's page (a gr.HTML in Gradio's theme, whose font is Source Sans Pro at 14 px with no bold face, headings
    at weight 600) in the static page's type: the same font family, weight, size and line height for every element
    that holds text, and the same widths for the tab's bold "CIFAR-10", "All layers together" and "Attention through
    training"."""
    with serving(static_folder) as (url, _), static_page(browser, url, 1400, 900) as page:
        static, static_widths = typeset(page)
    with app_page(browser, app_url, 1400, 900) as page:
        app, app_widths = typeset(page)
    for name, (family, weight, size, width) in static_widths.items():
        assert app_widths[name][:3] == [family, weight, size], name
        assert width > 20 and abs(app_widths[name][3] - width) < 0.5, name
    assert static_widths["the photo tab, chosen (bold)"][1] == "600" and "Source Sans" not in str(app_widths)
    both = set(static) & set(app)
    assert len(both) > 400  # (each page's own: the static page's line on offline use; what was drawn by then)
    assert {place: app[place] for place in both if app[place] != static[place]} == {}


def test_inside_the_model_in_the_page(static_folder, browser):
    """The Inside-the-model tab: the app's own pictures of both models, loaded once the tab opens; a click on the
    position grid outlines that cell and shows that patch's map (vit_demo/page/inside.py makes the pictures);
    after that, with the server gone, the other model's pictures are there too."""
    from PIL import Image

    from vit_demo.page import inside
    from vit_demo.page.layout import INSIDE, INSIDE_MODELS
    from vit_demo.pictures import render

    def large_map(model: str, patch: int) -> Image.Image:
        return render.position_similarity_large(inside.insides(model).similarity, patch, inside.LARGE)

    page_data = json.loads((static_folder / "index.html").read_text().split('id="vd-page">')[1].split("</script>")[0])
    for model in INSIDE_MODELS.values():
        found, folder = inside.insides(model), static_folder / INSIDE / model
        for name in ("filters", "distance", "reliability", "importance"):
            shown = np.asarray(Image.open(folder / f"{name}.png").convert("RGB"))
            np.testing.assert_array_equal(shown, np.asarray(getattr(found, name).convert("RGB")))
        g = found.similarity.shape[0]
        every_map = np.asarray(Image.open(folder / "position.png").convert("RGB"))
        for patch in (0, g + 2, g * g - 1):  # each patch's map, in its place in the picture of them all
            large, caption = large_map(model, patch), inside.position_caption(patch, g)
            row, col = divmod(patch, g)
            tile = every_map[row * large.height : (row + 1) * large.height, col * large.width : (col + 1) * large.width]
            np.testing.assert_array_equal(tile, np.asarray(large.convert("RGB")))
            assert page_data["inside"][model]["captions"][patch] == caption
    loaded = """(model) => [...document.querySelectorAll(`[data-model=${model}] img`)].every((img) => img.complete
        && img.naturalWidth > 0) && getComputedStyle(document.querySelector(`[data-model=${model}]
        .vd-position-large`)).backgroundImage.includes('position.png')"""
    with serving(static_folder) as (url, server), static_page(browser, url) as page:
        saved_for_offline(page)  # (and its note under the header shown: the layout measured below holds)
        assert page.locator("#tab-inside img[src]").count() == 0  # nothing loaded before the tab opens
        page.click("[data-tab=inside]")
        assert page.locator("#tab-digit").is_hidden() and page.locator("#tab-inside").is_visible()
        page.wait_for_function(loaded, arg="mnist")
        block = page.locator("[data-model=mnist]")
        caption = block.locator(".vd-position-caption")
        assert caption.inner_text().startswith("Patch 24 ")  # the centre of the digits' 7 x 7 grid
        grid = block.locator(".vd-positions-grid img")
        frame = grid.bounding_box()
        grid.click(position={"x": 3, "y": 3})  # on the labels: nothing changes
        assert caption.inner_text().startswith("Patch 24 ")
        left, top, right, bottom = page_data["inside"]["mnist"]["boxes"][9]
        grid.click(position={"x": (left + right) / 2 * frame["width"], "y": (top + bottom) / 2 * frame["height"]})
        assert caption.inner_text() == inside.position_caption(9, 7)
        mark = block.locator(".vd-positions-mark").bounding_box()
        assert mark["x"] == pytest.approx(frame["x"] + left * frame["width"], abs=1)
        assert mark["y"] == pytest.approx(frame["y"] + top * frame["height"], abs=1)
        assert mark["width"] == pytest.approx((right - left) * frame["width"], abs=1)
        large = block.locator(".vd-position-large")
        assert large.get_attribute("data-patch") == "9"
        shown = np.asarray(Image.open(io.BytesIO(large.screenshot())).convert("RGB")).astype(int)
        expected = np.asarray(large_map("mnist", 9).convert("RGB")).astype(int)
        assert abs(shown.shape[0] - expected.shape[0]) <= 1 and abs(shown.shape[1] - expected.shape[1]) <= 1
        # The element may start between two pixels, its screenshot a pixel off: the best of the shifts by one.
        h, w = expected.shape[0] - 2, expected.shape[1] - 2
        differences = [np.abs(shown[dy : dy + h, dx : dx + w] - expected[1 : 1 + h, 1 : 1 + w]).mean()
                       for dy in range(3) for dx in range(3) if shown[dy : dy + h, dx : dx + w].shape[:2] == (h, w)]
        assert min(differences) < 2  # patch 9's map, at its size
        server.terminate()
        server.wait(timeout=10)
        page.locator("#inside-model label", has_text="Photos (CIFAR-10)").click()
        assert block.is_hidden() and page.locator("[data-model=cifar10]").is_visible()
        page.wait_for_function(loaded, arg="cifar10")  # loaded with the tab, before the server went
        assert page.locator("[data-model=cifar10] .vd-position-caption").inner_text().startswith("Patch 36 ")
        assert page.outside_requests == [] and page.console_errors == []
