"""The app in a real browser: Playwright driving Debian's Chromium against the running server."""

import contextlib
import json
import os
import time
from pathlib import Path

import pytest
from PIL import Image
from conftest import (CHROMIUM, FIRST_SCREEN_WORDS, PHOTOS, REPO, app_page, check_talk_mode_fits, assert_curves_drawn,
                      draw, draw_digit, label_text, pixel_bomb_png, read_live_map, read_live_payload, serving,
                      small_texts, top_bars, views_label, visible_words, wait_for_label)

from vit_demo.data.preprocess import MAX_FILE_BYTES

pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not os.path.exists(CHROMIUM):
    pytest.skip("Chromium is not installed (apt-get install -y chromium)", allow_module_level=True)


@pytest.fixture
def page(browser, app_url):
    with app_page(browser, app_url) as page:
        yield page




def test_draw_a_digit_and_explore_its_attention(page, tmp_path):
    page.wait_for_selector("#canvas canvas.vd-draw[data-model=page]", timeout=30000)  # (until then, the server reads)
    draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7
    wait_for_label(page, "7")
    for view, shows in (("digit-first", "map"), ("digit-selected", "6/mean"), ("digit-cls-grid", "grid"),
                        ("digit-rollout", "map")):
        wait_for_live(page, view, shows)
    assert "ms in this page" in page.locator("#digit-info").inner_text()  # read by the page's own model
    # Where it looks: first the map most faithful to this model (weights/mnist/faithfulness.json: rollout), the same
    # numbers as rollout's own view; raw attention one click away, in its place.
    assert page.locator("#digit-first canvas").is_visible() and not page.locator("#digit-selected").is_visible()
    assert page.locator("#digit-first canvas").get_attribute("data-numbers") == \
        page.locator("#digit-rollout canvas").get_attribute("data-numbers")
    raw_attention(page)
    assert not page.locator("#digit-first").is_visible() and page.locator("#digit-layer").is_visible()
    assert "Where [CLS] attends: layer 6 of 6" in page.locator("#digit-selected").inner_text()  # captioned
    settled(page)  # the drawing's last answer has landed
    start = page.evaluate("() => window.vdLive.digit.patch")  # the patch the query view starts at
    wait_for_live(page, "digit-patches", f"patch {start}")
    wait_for_live(page, "digit-query", f"query {start}")

    # Another layer and head: the page redraws the large view itself, without a request.
    before = len(page.requests_made)
    page.locator("#digit-head label", has_text="head 2").click()
    wait_for_live(page, "digit-selected", "6/2")
    page.locator("#digit-layer input[type='number']").fill("2")
    page.locator("#digit-layer input[type='number']").press("Enter")
    wait_for_live(page, "digit-selected", "2/2")
    assert page.requests_made[before:] == []

    # Click the top-left patch of "what the model sees": the query view follows it, from patch 0's maps, which the
    # page's own model computes (no request); back and forth again costs nothing.
    first = live_pixels(page, "digit-query")
    page.locator("#digit-patches canvas").click(position={"x": 5, "y": 5})  # scrolled into view first
    wait_for_live(page, "digit-query", "query 0")
    # The click shows its effect where the visitor looks: the patches view itself shows where patch 0 looks.
    wait_for_live(page, "digit-patches", "patch 0 looks")
    assert "Patch 0 (outlined) looks at the bright patches" in page.locator("#digit-patches").inner_text()
    assert "Where patch 0 looks" in page.locator("#digit-query").inner_text()
    assert (live_pixels(page, "digit-query") != first).any()
    assert page.requests_made[before:] == []
    before = len(page.requests_made)
    page.evaluate(f"() => window.vdLive.digit.choose({start})")
    wait_for_live(page, "digit-query", f"query {start}")
    page.locator("#digit-patches canvas").click(position={"x": 5, "y": 5})
    wait_for_live(page, "digit-query", "query 0")
    assert page.requests_made[before:] == []

    page.locator("#digit-map input[value=first]").check()  # back to the first map, raw attention out of the way
    assert page.locator("#digit-first canvas").is_visible() and not page.locator("#digit-layer").is_visible()
    screenshot = Path(os.environ.get("VIT_DEMO_SCREENSHOT", tmp_path / "app.png"))  # the first screen, after a click
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000
    assert page.outside_requests == [], "the page must not call any outside server"
    assert page.console_errors == []


def raw_attention(page, panel: str = "digit") -> None:
    """Choose raw attention (one layer and head) in place of a tab's first map (views/first.js)."""
    page.locator(f"#{panel}-map input[value=attention]").check()
    page.locator(f"#{panel}-selected").wait_for(state="visible")


def live_pixels(page, elem_id: str):
    """The picture a live view's canvas shows now, as (H, W, 3) uint8."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    url = page.evaluate(f"() => document.querySelector('#{elem_id} canvas').toDataURL('image/png')")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def test_the_page_draws_the_large_view_as_the_server_draws_it(page):
    """One colour map and one overlay rule: the page's drawing of a layer and head against render.overlay of the
    same numbers, for a digit (crisp input) and a photo (smoothed input)."""
    import numpy as np

    from vit_demo.pictures import render

    page.locator("#canvas .vd-examples button[title='example: 3']").click()
    wait_for_label(page, "3")
    views = {"digit": ((6, "mean", 4), (2, "head 3", 2)), "photo": ((7, "mean", 6), (1, "head 5", 4))}
    labels = {"digit": "3", "photo": "airplane"}
    for panel, chosen in views.items():
        if panel == "photo":
            page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
            page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "airplane.png"))
            wait_for_label(page, "airplane", panel="photo")
        for layer, head, column in chosen:  # column: the map's place among the heads and their mean
            raw_attention(page, panel)
            page.locator(f"#{panel}-head label", has_text=head).click()
            page.locator(f"#{panel}-layer input[type='number']").fill(str(layer))
            page.locator(f"#{panel}-layer input[type='number']").press("Enter")
            wait_for_live(page, f"{panel}-selected", f"{layer}/{head.split()[-1]}")
            image, maps = read_live_payload(page.evaluate(f"() => window.vdLive[{panel!r}].numbers()"))
            served = np.asarray(render.overlay(image, maps[layer - 1, column], 336), dtype=int)
            difference = np.abs(live_pixels(page, f"{panel}-selected").astype(int) - served)
            assert difference.mean() < 0.5 and np.quantile(difference, 0.999) <= 2, (panel, layer, head)
        # The layer x head grid: each tile as render.overlays draws it at the grid's thumbnail size.
        wait_for_live(page, f"{panel}-cls-grid", "grid")
        origins = page.evaluate(f"() => JSON.parse(document.querySelector('#{panel}-cls-grid canvas').dataset.origins)")
        grid = live_pixels(page, f"{panel}-cls-grid").astype(int)
        columns = maps.shape[1]
        for tile in (0, columns + 1, len(origins) - 1):  # layer 1 head 1, layer 2 head 2, the last layer's mean
            x, y = origins[tile]
            served = np.asarray(render.overlay(image, maps[tile // columns, tile % columns], 96), dtype=int)
            difference = np.abs(grid[y : y + 96, x : x + 96] - served)
            assert difference.mean() < 0.5 and np.quantile(difference, 0.999) <= 2, (panel, "grid", tile)
        for view, shows in (("rollout", "map"), ("relevance", f"relevance {labels[panel]}")):  # one map each
            wait_for_live(page, f"{panel}-{view}", shows)
            numbers = page.evaluate(f"() => document.querySelector('#{panel}-{view} canvas').dataset.numbers")
            served = np.asarray(render.overlay(image, read_live_map(numbers), 336), dtype=int)
            difference = np.abs(live_pixels(page, f"{panel}-{view}").astype(int) - served)
            assert difference.mean() < 0.5 and np.quantile(difference, 0.999) <= 2, (panel, view)
    assert page.console_errors == []


@contextlib.contextmanager
def reading_the_example_three(browser, app_url, where: str = "page"):
    """The app, its forward pass ``where`` ("page", or "server": ?model=server), once its example 3 is read and every
    answer for it has landed."""
    with app_page(browser, app_url + ("?model=server" if where == "server" else "")) as page:
        page.wait_for_selector(f"#canvas canvas.vd-draw[data-model={where}]", timeout=30000)
        page.locator("#canvas .vd-examples button[title='example: 3']").click()
        wait_for_label(page, "3")
        settled(page)
        yield page


def steps_shown(page, panel: str = "digit") -> dict:
    return json.loads(page.evaluate(f"() => document.querySelector('#{panel}-steps').dataset.steps || '{{}}'"))


def open_the_steps(page) -> dict:
    """Go deeper to "How attention is computed" (the address kept: scrolled to, not reloaded); its numbers."""
    address = page.url
    page.locator("#tab-digit details.vd-deeper summary").click()
    page.locator("a[href='#digit-steps-title']").click()
    assert page.url == address
    page.wait_for_function("() => document.querySelector('#digit-steps').dataset.steps", timeout=20000)
    return steps_shown(page)


def test_with_the_model_on_the_server_every_view_reads_as_in_the_page(browser, app_url):
    """?model=server (as in a browser without WebAssembly): the forward pass runs on the server, and every view of
    the digit tab is drawn from numbers the page makes of its raw outputs, the same as with the model in the page."""
    import numpy as np

    views = {"digit-patches": "patch {patch}", "digit-selected": "6/mean", "digit-cls-grid": "grid",
             "digit-rollout": "map", "digit-relevance": "relevance 3", "digit-query": "query {patch}",
             "digit-training": "trained", "digit-lens": "lens"}
    read, steps = {}, {}
    for where in ("page", "server"):
        with reading_the_example_three(browser, app_url, where) as page:
            patch = page.evaluate("() => window.vdLive.digit.patch")
            for view, shows in views.items():  # (each view's numbers from the server's answers: a busy CI waits)
                wait_for_live(page, view, shows.format(patch=patch), timeout=60_000)
            read[where] = json.loads(page.evaluate("() => window.vdLive.digit.numbers()"))
            steps[where] = open_the_steps(page)  # how attention is computed
            assert page.console_errors == []
    for name in ("query", "scores", "weights", "output"):
        np.testing.assert_allclose(steps["server"][name], steps["page"][name], atol=1e-4, err_msg=name)
    page_numbers, server_numbers = read["page"], read["server"]
    assert "on the server" in server_numbers["info"] and "in this page" in page_numbers["info"]
    assert server_numbers["label"] == page_numbers["label"] == "3" and server_numbers["patch"] == page_numbers["patch"]
    np.testing.assert_allclose(server_numbers["probs"], page_numbers["probs"], atol=1e-5)
    (image, maps), (server_image, server_maps) = (read_live_payload(json.dumps(n)) for n in read.values())
    np.testing.assert_array_equal(image, server_image)
    assert np.abs(maps - server_maps).max() <= 1 / 255 + 1e-9  # float32 on two runtimes: a level at most


def test_the_prediction_follows_the_pen_and_clear_clears(page):
    box = page.locator("#canvas canvas.vd-draw").bounding_box()
    page.mouse.move(box["x"] + 0.5 * box["width"], box["y"] + 0.15 * box["height"])
    page.mouse.down()
    page.mouse.move(box["x"] + 0.5 * box["width"], box["y"] + 0.85 * box["height"], steps=4)
    wait_for_label(page, "1", views=False)  # a 1, read while the pen is still down
    assert views_label(page) is None  # the views wait for the pen to lift
    page.mouse.up()
    draw(page, [(0.5, 0.15), (0.3, 0.5), (0.7, 0.5)])  # add strokes to make a 4
    draw(page, [(0.62, 0.3), (0.62, 0.85)])
    wait_for_label(page, "4")
    page.locator("#canvas button.vd-clear").click()
    wait_for_label(page, "")
    assert "Draw a digit" in page.locator("#digit-info").inner_text()
    wait_for_live(page, "digit-cls-grid", "")  # the views follow: empty


def test_examples_are_one_click_away(page):
    """Every example digit, drawn on the canvas as a click draws it, reads as its class and is not called unfamiliar
    (scripts/make_examples.py picks them so): an example must not mislead a room."""
    for digit in "0123456789":
        page.locator(f"#canvas .vd-examples button[title='example: {digit}']").click()
        wait_for_label(page, digit)
        assert page.locator("#digit-notice").is_hidden(), digit


def test_the_page_starts_with_an_example_drawn_and_explained(browser, app_url):
    """Before anyone draws, each tab shows an example with every view, from numbers that came with the page: no
    request to the model; the pen's first touch clears the example."""
    with app_page(browser, app_url) as page:
        wait_for_label(page, "2")
        for view, shows in (("digit-selected", "6/mean"), ("digit-cls-grid", "grid"), ("digit-rollout", "map"),
                            ("digit-relevance", "relevance 2")):
            wait_for_live(page, view, shows)
        assert "An example" in page.locator("#digit-info").inner_text()
        assert (live_pixels(page, "digit-selected") > 0).any()
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        wait_for_label(page, "horse", panel="photo")
        wait_for_live(page, "photo-cls-grid", "grid")
        asked = [url for url in page.requests_made if "component_server" in url or "queue/join" in url]
        assert asked == []  # all of it came with the page
        page.get_by_role("tab", name="Draw a digit (MNIST)").click()
        ink = page.evaluate("""() => { const c = document.querySelector('#canvas canvas.vd-draw');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let dark = 0; for (let i = 0; i < d.length; i += 4) dark += d[i] < 128; return dark; }""")
        assert ink > 500  # the example's ink on the canvas
        draw(page, [(0.5, 0.15), (0.5, 0.85)])  # a 1, on a canvas the pen cleared first
        wait_for_label(page, "1")
        assert page.outside_requests == [] and page.console_errors == []


def shown_confidence(page, panel: str = "digit") -> float:
    """The top class's probability as the info line under the label shows it: '**7** (99.8%) · ...'."""
    text = page.locator(f"#{panel}-info").inner_text()
    return float(text.split("(", 1)[1].split("%", 1)[0]) / 100


def test_a_clean_digit_is_sure_and_a_plus_sign_is_only_a_guess(page):
    """Calibrated probabilities for a clean 7, near certain; a '+' is said to be no digit, and its label is shown as
    the guess it is: no percentage anywhere, its closest classes by name alone."""
    draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a clean 7
    wait_for_label(page, "7")
    assert shown_confidence(page) > 0.99
    assert page.locator("#digit-label .vd-prob-row").count() == 3  # the top three, each with its probability
    page.locator("#canvas button.vd-clear").click()
    wait_for_label(page, "")
    draw(page, [(0.2, 0.5), (0.8, 0.5)])  # a plus sign
    draw(page, [(0.5, 0.2), (0.5, 0.8)])
    # A plus sign is no digit (vit_demo/interpret/unfamiliar.py): the notice says so above the label.
    page.locator("#digit-notice").wait_for(state="visible", timeout=20000)
    settled(page)
    assert "does not look like a digit" in page.locator("#digit-notice").inner_text()
    said = page.locator("#digit-prediction").inner_text()
    assert "%" not in said and page.locator("#digit-label .vd-prob-row").count() == 0, said
    assert page.locator("#digit-info").inner_text().startswith("No percentage: the model cannot read this image")
    guesses = page.locator("#digit-label .vd-guesses b").all_inner_texts()
    assert len(guesses) == 3 and guesses[0] == label_text(page)
    page.locator("#canvas button.vd-clear").click()
    draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7 again: no notice, its percentages back
    wait_for_label(page, "7")
    assert not page.locator("#digit-notice").is_visible() and shown_confidence(page) > 0.99


def test_a_photo_unlike_any_class_is_flagged_above_the_label(page, tmp_path):
    from PIL import Image

    from vit_demo.data.outside_photos import outside_photos

    page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
    classes = page.locator("#photo-classes").inner_text()
    assert all(name in classes for name in ("airplane", "automobile", "frog", "truck"))
    moon = dict(outside_photos())["moon.png"]  # no CIFAR-10 class
    Image.fromarray(moon).save(tmp_path / "moon.png")
    page.locator("#photo-input input[type='file']").set_input_files(str(tmp_path / "moon.png"))
    page.locator("#photo-notice").wait_for(state="visible", timeout=20000)
    assert "unlike the photos the model knows" in page.locator("#photo-notice").inner_text()
    said = page.locator("#photo-label").inner_text() + page.locator("#photo-info").inner_text()
    assert "%" not in said and "No percentage" in said  # a guess, with no percentage that reads as a sure answer
    notice, label = (page.locator(f"#photo-{name}").bounding_box() for name in ("notice", "label"))
    assert notice["y"] + notice["height"] <= label["y"] + 1  # above the label
    weight = "() => getComputedStyle(document.querySelector('#photo-label .vd-top-class')).fontWeight"
    assert int(page.evaluate(weight)) < 700  # the label is the guess it is, not in a sure answer's bold type
    wait_for_live(page, "photo-reads", "input")  # the square the model reads, beside the whole photo
    assert page.locator("#photo-reads canvas").evaluate("canvas => canvas.width") == 128
    # The first map's caption names the guess, with no percentage either.
    page.wait_for_function("() => document.querySelector('#photo-first .vd-caption').innerText.includes('Why')")
    assert "%" not in page.locator("#photo-first .vd-caption").inner_text()
    # A photo of one of its classes: no notice.
    page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))
    wait_for_label(page, "ship", panel="photo")
    page.locator("#photo-notice").wait_for(state="hidden", timeout=20000)
    assert int(page.evaluate(weight)) >= 700
    assert page.outside_requests == [] and page.console_errors == []


def test_also_try_things_it_was_never_taught_each_with_its_lesson(page):
    """The "Also try" rows: a letter A and a smiley for the digits, a person and a rocket for photos, each read as
    an example is, with a line that says what it teaches; the tab's next input takes the line away. The person is
    flagged; the rocket, read as a ship at 97%, is not (docs/calibration.md)."""
    page.wait_for_selector("#canvas canvas.vd-draw[data-model=page]", timeout=30000)
    assert page.locator("#canvas .vd-tries img").evaluate_all("(imgs) => imgs.map((i) => i.alt)") == ["letter-a",
                                                                                                        "smiley"]
    page.locator("#canvas .vd-tries button").first.click()
    page.wait_for_function("() => document.querySelector('#digit-notice').innerText.includes('does not look like')")
    assert "A letter is no digit" in page.inner_text("#tab-digit .vd-lesson")
    page.click("#canvas button.vd-clear")
    assert page.locator("#tab-digit .vd-lesson").is_hidden()
    page.locator("#canvas .vd-tries button").last.click()  # the smiley, as the lesson asks: is it warned of? It is
    page.wait_for_function("() => document.querySelector('#digit-notice').innerText.includes('does not look like')")
    assert "A smiley is no digit" in page.inner_text("#tab-digit .vd-lesson")
    draw(page, [(0.1, 0.1), (0.15, 0.15)])  # drawing over it: the lesson goes
    assert page.locator("#tab-digit .vd-lesson").is_hidden()
    page.click("[data-tab=photo]")
    page.locator("#photo-input .vd-tries button[data-src$='astronaut.png']").click()  # as its lesson asks: it warns
    page.locator("#photo-notice").wait_for(state="visible", timeout=60000)
    assert "unlike the photos the model knows" in page.locator("#photo-notice").inner_text()
    assert "Does it warn you?" in page.inner_text("#tab-photo .vd-lesson")
    page.locator("#photo-input .vd-tries button[data-src$='rocket.png']").click()
    wait_for_label(page, "ship", panel="photo", timeout=60)  # sure of it, and wrong: the lesson says so
    assert "a high percentage does not make it right" in page.inner_text("#tab-photo .vd-lesson")
    assert page.locator("#photo-notice").is_hidden()  # the warning misses it
    page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))  # dropped: no click
    page.locator("#tab-photo .vd-lesson").wait_for(state="hidden", timeout=5000)
    assert page.console_errors == []


def test_upload_a_photo(page):
    """The page reads an upload with its own model once the photo tab has opened (the photo model loads then): no
    request reaches the server."""
    page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
    page.wait_for_selector("#tab-photo[data-ready]", timeout=60000)
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/queue/" in r.url or "component_server" in r.url else None)
    page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))
    if not (REPO / "weights" / "cifar10" / "config.json").is_file():
        # The tab says plainly that the model is not trained yet, and nothing fails.
        assert "python train.py --dataset cifar10" in page.locator("#photo-info").inner_text()
        assert page.locator("#photo-info").is_visible()
        return
    wait_for_label(page, "ship", panel="photo")
    for view, shows in (("photo-rollout", "map"), ("photo-relevance", "relevance ship")):  # drawn in the page
        wait_for_live(page, view, shows)
    wait_for_text(page, "photo-relevance", "Why ship?")
    assert "ms in this page" in page.locator("#photo-info").inner_text()
    assert asked == [], asked
    # The 32x32 upload fills its box (Gradio's "scale-down" shows it at 32 pixels).
    assert page.evaluate("() => getComputedStyle(document.querySelector('#photo-input img')).objectFit") == "contain"
    assert page.outside_requests == []


def test_the_views_dim_while_a_slow_photo_is_read(page):
    """A photo whose file takes a second to arrive (an example held back here, as on a slow link): the views dim
    until its numbers are in, so the last photo's answer never looks like this one's, then come back."""
    if not (REPO / "weights" / "cifar10" / "config.json").is_file():
        pytest.skip("no CIFAR-10 weights: the upload tab only says how to train them")
    def slowly(route):
        time.sleep(1.0)  # the page waits for the file meanwhile; its views dim after 150 ms (store.setWaiting)
        route.continue_()

    page.route("**/frog.png", slowly)
    page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
    page.wait_for_selector("#tab-photo[data-ready]", timeout=60000)
    page.evaluate("""() => { window.__dimmed = false;
        new MutationObserver(() => { if (document.querySelector('.vd-live.vd-waiting')) window.__dimmed = true; })
          .observe(document.body, { subtree: true, attributes: true, attributeFilter: ['class'] }); }""")
    page.locator("#photo-input .vd-examples button[title='example: frog']").click()
    wait_for_label(page, "frog", panel="photo")
    assert page.evaluate("() => window.__dimmed")
    page.wait_for_function("() => !document.querySelector('.vd-live.vd-waiting')")  # back once the numbers are in


def test_a_bad_upload_says_why_and_the_next_photo_works(page, tmp_path):
    if not (REPO / "weights" / "cifar10" / "config.json").is_file():
        pytest.skip("no CIFAR-10 weights: the upload tab only says how to train them")
    page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
    page.wait_for_selector("#tab-photo[data-ready]", timeout=60000)  # its model is loaded
    upload = page.locator("#photo-input input[type='file']")
    info = page.locator("#photo-info")
    bad = {"notes.png": (b"this is not an image", "this file is not an image"),
           "bomb.png": (pixel_bomb_png(), "too many pixels")}
    for name, (data, reason) in bad.items():
        (tmp_path / name).write_bytes(data)
        upload.set_input_files(str(tmp_path / name))
        page.wait_for_function(f"() => document.querySelector('#photo-info').innerText.includes({reason!r})",
                               timeout=20000)
        assert "Can't read this image: " in info.inner_text()  # (after the queue status, while one shows)
        assert label_text(page, "photo") == ""
    huge = tmp_path / "huge.png"
    huge.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(MAX_FILE_BYTES))  # refused before it is read
    upload.set_input_files(str(huge))
    page.wait_for_function("() => document.querySelector('#photo-info').innerText.includes('larger than 20 MB')",
                           timeout=20000)
    upload.set_input_files(str(PHOTOS / "ship.png"))
    wait_for_label(page, "ship", panel="photo")
    assert "Traceback" not in page.content()


def photo_of_a_written_digit(digit: str, path: Path) -> Path:
    """A digit written on paper and photographed, as a JPEG: grey ink on cream paper lit unevenly, with noise, the
    digit off centre in a wide picture."""
    import numpy as np

    rng = np.random.default_rng(0)
    ink = 1 - np.asarray(draw_digit(digit, 600, (260, 140, 300), 0.09).convert("L"), np.float32)[:, :, None] / 255
    ink = np.pad(ink, ((0, 0), (100, 100), (0, 0)))  # (600, 800, 1): a landscape photo
    light = np.linspace(0.86, 1.0, 800, dtype=np.float32)[None, :, None]  # brighter towards the right
    paper = np.array([232, 224, 205], np.float32) * light + rng.normal(0, 4, (600, 800, 3))
    photo = paper * (1 - ink) + np.array([55, 55, 70], np.float32) * ink
    Image.fromarray(np.clip(photo, 0, 255).astype(np.uint8)).save(path, quality=85)
    return path


def test_a_digit_written_on_paper_can_be_uploaded(page, tmp_path):
    upload = page.locator("#canvas .vd-upload input[type='file']")
    for digit in ("4", "7"):
        upload.set_input_files(str(photo_of_a_written_digit(digit, tmp_path / f"{digit}.jpg")))
        wait_for_label(page, digit)
        assert page.locator("#digit-notice").is_hidden()  # read as a digit, not flagged
    (tmp_path / "notes.png").write_bytes(b"this is not an image")
    upload.set_input_files(str(tmp_path / "notes.png"))
    page.wait_for_function("() => document.querySelector('#digit-info').innerText.includes('not an image')")
    assert "Can't read this image: " in page.locator("#digit-info").inner_text() and label_text(page) == ""
    draw(page, [(0.5, 0.15), (0.5, 0.85)])  # and the pen still draws after it
    wait_for_label(page, "1")
    assert page.outside_requests == [] and page.console_errors == []


@pytest.mark.parametrize("pointer", ["touch", "pen"])
def test_fingers_and_pens_draw_too(page, pointer):
    """Pointer events of another type (as a phone or a tablet pen sends them) draw like the mouse."""
    page.evaluate("""([pointer]) => {
        const canvas = document.querySelector('#canvas canvas.vd-draw');
        const box = canvas.getBoundingClientRect();
        const at = (fx, fy, type) => canvas.dispatchEvent(new PointerEvent(type, {
            pointerId: 7, pointerType: pointer, isPrimary: true, bubbles: true,
            clientX: box.left + fx * box.width, clientY: box.top + fy * box.height}));
        at(0.25, 0.2, 'pointerdown');
        for (let i = 1; i <= 10; i++) at(0.25 + 0.05 * i, 0.2, 'pointermove');
        for (let i = 1; i <= 10; i++) at(0.75 - 0.03 * i, 0.2 + 0.065 * i, 'pointermove');
        at(0.45, 0.85, 'pointerup');
    }""", [pointer])
    wait_for_label(page, "7")


def test_a_full_queue_leaves_the_pen_uploads_and_export_answered(browser, busy_app):
    """A room too big for the queue, where the server runs the model (?model=server: as in a browser without
    WebAssembly), while the API's requests fill the queue (/classify is told "busy, try again": tests/test_app_api.py).
    The page's forward passes go to its server function, outside the queue: the label still follows the pen, and the
    views follow once the server answers (here: held until the workers are free); export is made in the page.
    Nothing fails in the page."""
    shown = "() => window.vdLive.digit.state?.numbers.label"  # the drawing every view shows
    with app_page(browser, busy_app.url + "?model=server") as page:
        wait_for_label(page, "2")  # the example the page starts with
        busy_app.hold_views.set()  # as if each image's views took long too
        draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)], pause_ms=1000)  # a 7, while every worker is held
        wait_for_label(page, "7", views=False)  # read while the pen was down
        assert page.evaluate(shown) == "2"  # the stroke's views are still waiting
        busy_app.release.set()
        assert [job.result(timeout=60)["label"] for job in busy_app.jobs] == ["7"] * len(busy_app.jobs)
        page.wait_for_function(f"() => ({shown})() === '7'", timeout=20000)  # the held stroke's views
        with page.expect_download(timeout=20000) as download:
            page.locator("#digit-export-png").click()
        assert download.value.suggested_filename == "mnist-7-cls-grid.png"
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))
        wait_for_label(page, "ship", panel="photo")
        assert page.console_errors == []




def settled(page, panel: str = "digit", quiet: float = 1.5, timeout: float = 20) -> str:
    """The key of the image a tab's views show, once it has stayed the same for ``quiet`` seconds (the canvas sends
    a stroke more than once: its last answer has landed)."""
    started = changed = time.perf_counter()
    read = f"() => window.vdLive?.[{panel!r}]?.state?.key ?? ''"
    key = page.evaluate(read)
    while time.perf_counter() - changed < quiet:
        assert time.perf_counter() - started < timeout, f"the {panel} tab's image kept changing"
        time.sleep(0.1)
        if (now := page.evaluate(read)) != key:
            key, changed = now, time.perf_counter()
    return key


def wait_for_live(page, elem_id: str, shows: str, timeout: float = 20000) -> None:
    """Wait until a view the page draws itself (assets/page/live.js) shows layer/head ``shows``, e.g. "6/mean", looked
    at as a user would: scrolled to the top of the window where it is shown, as the page's "Go deeper" links do (the
    relevance view and the lens ask for their numbers only then; a view above that fills meanwhile, as the steps do,
    is kept out of the way by the browser's scroll anchoring, as it is for a user)."""
    page.evaluate(f"() => {{ const view = document.querySelector('#{elem_id}'); "
                  "if (view?.offsetParent) view.scrollIntoView({block: 'start'}); }")
    page.wait_for_function(f"() => document.querySelector('#{elem_id} canvas')?.dataset.drawn === {shows!r}",
                           timeout=timeout)


def wait_for_text(page, elem_id: str, text: str, timeout: float = 20000) -> None:
    page.wait_for_function(f"() => document.querySelector('#{elem_id}')?.innerText.includes({text!r})", timeout=timeout)


def test_why_this_class_why_not_another_and_how_far_to_trust_the_maps(page):
    draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7
    wait_for_label(page, "7")
    wait_for_text(page, "digit-relevance", "Why 7?")
    wait_for_live(page, "digit-relevance", "relevance 7")
    settled(page)
    seven = live_pixels(page, "digit-relevance")
    before = len(page.requests_made)
    page.locator("#digit-explain-class").select_option("8")
    wait_for_live(page, "digit-relevance", "relevance 8")
    assert "Why not 8?" in page.locator("#digit-relevance").inner_text()
    assert (live_pixels(page, "digit-relevance") != seven).any()  # drawn from the map that came with the caption
    # Relevance comes from the page's own relevance graph (its gradients traced in): no request.
    assert page.requests_made[before:] == []
    # Back to the predicted class and to 8 again: the page has both, no request.
    before = len(page.requests_made)
    for choice, shows in (("the predicted class", "relevance 7"), ("8", "relevance 8")):
        page.locator("#digit-explain-class").select_option(choice)
        wait_for_live(page, "digit-relevance", shows)
    assert page.requests_made[before:] == []
    # How far to trust each map: scored in the page (some 200 forward passes of its own model), no request.
    before = len(page.requests_made)
    page.locator("#digit-faithfulness button.vd-score").click()
    wait_for_live(page, "digit-faithfulness", "curves", timeout=60000)
    wait_for_text(page, "digit-faithfulness", "random rankings of this image")  # the verdict, with its noise
    assert "in this page" in page.locator("#digit-faithfulness .vd-caption").inner_text()
    assert page.requests_made[before:] == []
    assert_curves_drawn(page, "digit-faithfulness")
    # A new stroke explains the picked class for the new drawing, and the old chart goes.
    draw(page, [(0.3, 0.9), (0.7, 0.9)])
    wait_for_text(page, "digit-faithfulness", "Press")
    assert not page.locator("#digit-faithfulness canvas").is_visible()
    assert page.locator("#digit-faithfulness .vd-faithfulness-verdict").inner_text() == ""
    wait_for_live(page, "digit-relevance", "relevance 8")
    assert "Why not 8?" in page.locator("#digit-relevance").inner_text()
    assert page.outside_requests == [] and page.console_errors == []


def test_a_new_image_costs_the_server_one_forward_pass(browser, app_url):
    """?model=server: a new drawing is one call of the server's forward pass (its logits, attention and features);
    the views below the first screen (relevance, lens, how attention is computed) ask for theirs only once in view."""
    with reading_the_example_three(browser, app_url, "server") as page:
        before = len(page.requests_made)
        page.locator("#canvas .vd-examples button[title='example: 7']").click()
        wait_for_label(page, "7")
        settled(page)
        assert len(page.requests_made[before:]) == 1, page.requests_made[before:]


def test_how_attention_is_computed_step_by_step(browser, app_url):
    """The steps view: for the query patch, one head of one layer (its own choices), the query, the scores against
    every key, their softmax and the weighted sum of the values, with the model's numbers: its softmax is the same
    attention the query view draws, and a click on a patch there chooses it. (On the server it reads the same: above.)"""
    import numpy as np

    with reading_the_example_three(browser, app_url) as page:
        steps, numbers = open_the_steps(page), json.loads(page.evaluate("() => window.vdLive.digit.numbers()"))
        assert (steps["layer"], steps["head"], steps["patch"]) == (3, 0, numbers["patch"])  # layer 4 of 6, head 1
        weights = np.asarray(steps["weights"])  # [CLS], then the patches: where the patch looks, as drawn above
        query_map = np.asarray(numbers["query"]["maps"]).reshape(6, 5, 49)[3, 0]
        np.testing.assert_allclose(weights[1:] / weights[1:].sum(), query_map, atol=1e-5)
        text = page.inner_text("#digit-steps")
        for words in ("The query.", "Scores.", "Softmax.", "Values, mixed.", f"Patch {numbers['patch']}, layer 4"):
            assert words in text, words
        smallest = page.evaluate("() => Math.min(...[...document.querySelectorAll('#digit-steps *')].filter((e) => "
                                 "e.childNodes[0]?.nodeType === 3).map((e) => parseFloat(getComputedStyle(e).fontSize)))")
        assert smallest >= 14  # the numbers too, readable from further than a reader's chair
        before = len(page.requests_made)
        page.locator("#digit-steps .vd-token-grid [data-patch='20']").first.click()
        page.wait_for_function("() => JSON.parse(document.querySelector('#digit-steps').dataset.steps || '{}')"
                               ".patch === 20", timeout=20000)
        assert page.evaluate("() => window.vdLive.digit.patch") == 20  # the tab's query patch, every view's
        assert page.requests_made[before:] == []  # worked out in the page: no request
        page.locator("#digit-steps select.vd-steps-layer").select_option(index=0)
        page.wait_for_function("() => JSON.parse(document.querySelector('#digit-steps').dataset.steps || '{}')"
                               ".layer === 0", timeout=20000)
        assert page.console_errors == []


def test_inside_the_model(page, tmp_path):
    """The Inside-the-model tab: each model's pictures, loaded once the tab opens (the page's own: in detail in
    tests/test_static_space.py)."""
    loaded = """(model) => [...document.querySelectorAll(`[data-model=${model}] img`)].every((img) => img.complete
        && img.naturalWidth > 0)"""
    page.get_by_role("tab", name="Inside the model").click()
    page.wait_for_function(loaded, arg="mnist")
    assert page.locator("[data-model=mnist] .vd-position-caption").inner_text().startswith("Patch 24 ")
    page.locator("#inside-model label", has_text="Photos (CIFAR-10)").click()
    page.wait_for_function(loaded, arg="cifar10")
    assert page.locator("[data-model=cifar10] .vd-position-caption").inner_text().startswith("Patch 36 ")
    page.screenshot(path=str(tmp_path / "inside.png"), full_page=True)
    assert page.outside_requests == [] and page.console_errors == []


def test_the_training_slider_shows_the_drawing_through_earlier_models(browser, snapshot_weights):
    with serving(REPO / "app.py", VIT_DEMO_WEIGHTS=str(snapshot_weights)) as server, \
            app_page(browser, server.url) as page:
        draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])
        wait_for_live(page, "digit-training", "trained")
        wait_for_text(page, "digit-training", "The trained model (epoch 4")
        trained = live_pixels(page, "digit-training")
        # The slider moved while the stroke's answers are still coming (the canvas sends a stroke more than once):
        # whichever lands last, the view shows epoch 1 for the last drawing.
        draw(page, [(0.3, 0.9), (0.7, 0.9)])
        slider = page.locator("#digit-training-position input")
        slider.fill("1")
        key = settled(page)
        wait_for_live(page, "digit-training", "snapshot 1")
        assert "Epoch 1 of 4" in page.locator("#digit-training").inner_text()
        assert page.evaluate("(key) => Boolean(window.vdLive.digit.kept.get(`snapshot/${key}/1`)?.value)", key)
        assert (live_pixels(page, "digit-training") != trained).any()  # the grid of the model at epoch 1
        # Back to the trained model: drawn from the tab's own numbers, no request. (Once what the views that came into
        # view with the slider asked for has landed: the steps view below it asks for its numbers once in view.)
        page.wait_for_function("() => [...window.vdLive.digit.kept.values()].every((entry) => !entry.pending)")
        before = len(page.requests_made)
        slider.fill("4")
        wait_for_live(page, "digit-training", "trained")
        assert page.requests_made[before:] == []
        assert page.outside_requests == [] and page.console_errors == []


def test_the_photo_tabs_training_slider_shows_the_shipped_models_snapshots(page):
    # The shipped photo model kept six snapshots of its 300 epochs: the slider's stops 1 to 6, the trained model 7.
    page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
    wait_for_label(page, "horse", panel="photo")  # the example the tab starts with
    wait_for_live(page, "photo-training", "trained")
    wait_for_text(page, "photo-training", "The trained model (epoch 300")
    trained = live_pixels(page, "photo-training")
    slider = page.locator("#photo-training-position input")
    slider.fill("1")
    wait_for_live(page, "photo-training", "snapshot 1")
    assert "Epoch 1 of 300" in page.locator("#photo-training").inner_text()
    assert (live_pixels(page, "photo-training") != trained).any()  # the grid of the model at epoch 1
    slider.fill("7")
    wait_for_live(page, "photo-training", "trained")
    assert page.outside_requests == [] and page.console_errors == []


CANVAS_TOP = "() => document.querySelector('#canvas canvas.vd-draw').getBoundingClientRect().top + scrollY"
VIEWS_THAT_FIT = """() => [...document.querySelectorAll('.vd-view')]  // every picture shown (a hidden one is not)
    .map(v => [v, [...v.querySelectorAll('img, canvas.vd-live-canvas')].find(e => e.offsetParent)])
    .filter(([v, shown]) => v.offsetParent && shown)
    .map(([v, shown]) => {
        const box = v.getBoundingClientRect(), img = shown.getBoundingClientRect();
        const buttons = v.querySelector('.icon-button-wrapper')?.getBoundingClientRect();
        const covered = buttons && buttons.width > 0 && !(buttons.bottom <= img.top || buttons.top >= img.bottom
            || buttons.right <= img.left || buttons.left >= img.right);
        // the picture whole: inside its box, and drawn at its own shape (not cropped to fit a height)
        const whole = shown.tagName !== "IMG" || Math.abs(img.width / img.height
            - shown.naturalWidth / shown.naturalHeight) < 0.02 * shown.naturalWidth / shown.naturalHeight;
        return [v.id, img.left >= box.left - 1 && img.right <= box.right + 1 && img.top >= box.top - 1
            && img.bottom <= box.bottom + 1 && img.width > 0 && whole, !covered];
    })"""


def views_that_fit(page) -> list:
    """[view id, inside its box, clear of its buttons] for every picture shown, each loaded first (they load lazily)."""
    page.evaluate("""async () => {  // each in sight until it has loaded: one scrolled past may never start
        for (const img of [...document.querySelectorAll('.vd-view img')].filter(i => i.offsetParent)) {
            // (the window scrolled, not img.scrollIntoView: that also scrolls a clipping frame, hiding a crop)
            scrollTo(0, scrollY + img.getBoundingClientRect().top - innerHeight / 2);
            if (!img.complete) await new Promise(done => img.addEventListener("load", done, { once: true }));
        }
    }""")
    page.wait_for_function("""() => [...document.querySelectorAll('.vd-view img')].filter(i => i.offsetParent)
        .every(i => i.complete && i.naturalWidth > 0)""", timeout=20000)
    return page.evaluate(VIEWS_THAT_FIT)


@pytest.mark.parametrize("width", [390, 1280, 1920])
def test_every_view_fits_its_box_on_phones_and_projectors(browser, app_url, width, tmp_path):
    """Every picture inside its box, none under its buttons; every tab one tap away; on a phone, the prediction
    in sight while drawing (above the canvas)."""
    with app_page(browser, app_url, width) as page:
        assert page.locator("button[aria-label='More tabs']:visible").count() == 0
        assert page.get_by_role("tab").count() == 3
        empty = page.evaluate(CANVAS_TOP)
        draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])
        wait_for_label(page, "7")
        assert abs(page.evaluate(CANVAS_TOP) - empty) <= 2  # the first answer does not move the canvas under the pen
        wait_for_live(page, "digit-relevance", "relevance 7")
        settled(page)  # the stroke's last update has landed: no view will change now
        assert not page.locator("#vd-keys").is_visible()  # talk mode's keys: in talk mode alone
        if width < 600:  # the answer and the first map side by side, and the whole canvas under them, on screen
            label, first, canvas = (page.locator(s).bounding_box() for s in
                                    ("#digit-label", "#digit-first canvas", "#canvas canvas.vd-draw"))
            assert label["x"] + label["width"] <= first["x"] and first["width"] >= 120
            assert max(label["y"] + label["height"], first["y"] + first["height"]) <= canvas["y"]
            assert page.evaluate(CANVAS_TOP) + canvas["height"] <= 844
        checked = views_that_fit(page)
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))
        wait_for_label(page, "ship", panel="photo")
        wait_for_live(page, "photo-relevance", "relevance ship")
        checked += views_that_fit(page)
        page.screenshot(path=str(tmp_path / f"photo-{width}.png"), full_page=True)
        page.get_by_role("tab", name="Inside the model").click()
        inside = views_that_fit(page)
        assert {view for view, _, _ in inside} >= {"inside-mnist-filters", "inside-mnist-positions",
                                                   "inside-mnist-reliability"}
        checked += inside
        assert len(checked) >= 17  # the digit tab's views, the photo tab's and the inside tab's
        assert [view for view, inside, clear in checked if not (inside and clear)] == []


def layer_and_head(page) -> tuple[str, str]:
    return tuple(page.evaluate("""() => [document.querySelector('#digit-layer input[type=range]').value,
        [...document.querySelectorAll('#digit-head input')].find(r => r.checked)?.value]"""))


def test_talk_mode_shows_one_large_view_and_answers_its_keys(browser, app_url, tmp_path):
    with app_page(browser, app_url.rstrip("/") + "/?view=talk", 1280, 720) as page:
        page.wait_for_function("() => document.querySelector('#vd-app.vd-talk')")
        assert page.locator("#talk-mode input").is_checked()
        draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7
        wait_for_label(page, "7")
        wait_for_live(page, "digit-first", "map")
        # Nothing but the input, the prediction and one large view, side by side and all on a 1280x720 screen.
        for hidden in ("#vd-intro", "#digit-cls-grid", "#digit-rollout", "#digit-export-png", "#digit-selected"):
            assert not page.locator(hidden).is_visible(), hidden
        canvas, label, view = (page.locator(s).bounding_box() for s in
                               ("#canvas canvas.vd-draw", "#digit-label", "#digit-first canvas"))
        assert canvas["x"] + canvas["width"] <= label["x"] and label["x"] + label["width"] <= view["x"]
        assert view["width"] >= 400 and view["y"] + view["height"] <= 720
        for part in ("#digit-map", "#vd-keys"):  # the map's choice, and the keys
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        big = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#digit-label .vd-top-class')).fontSize)")
        assert big >= 80  # px: legible from the back of a room
        assert small_texts(page) == []  # and nothing on screen under 18 px
        page.screenshot(path=str(Path(os.environ.get("VIT_DEMO_TALK_SCREENSHOT", tmp_path / "talk.png"))))

        # The keys: left/right the layer, up/down the head (round the list) of raw attention, which the first key
        # shows in place of the first map; c clears.
        assert layer_and_head(page) == ("6", "mean")
        for key, expected in (("ArrowLeft", ("5", "mean")), ("ArrowDown", ("5", "head 1")),
                              ("ArrowUp", ("5", "mean")), ("ArrowUp", ("5", "head 4")), ("ArrowRight", ("6", "head 4")),
                              ("ArrowRight", ("6", "head 4"))):  # the last layer stays the last
            page.keyboard.press(key)
            page.wait_for_function(f"() => document.querySelector('#digit-layer input[type=range]').value === {expected[0]!r}")
            assert layer_and_head(page) == expected, key
        wait_for_live(page, "digit-selected", "6/4")  # the view follows, drawn in the page
        assert small_texts(page) == []
        for part in ("#digit-selected canvas", "#digit-head", "#digit-layer"):  # in place of the first map, on screen
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        assert page.locator("#digit-selected canvas").bounding_box()["x"] >= label["x"] + label["width"]
        before = len(page.requests_made)
        page.keyboard.press("ArrowLeft")
        wait_for_live(page, "digit-selected", "5/4")
        assert page.requests_made[before:] == []  # a key costs no request: it answers in a frame
        page.keyboard.press("c")
        wait_for_label(page, "")
        # On the photo tab, c removes the photo.
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))
        wait_for_label(page, "ship", panel="photo")
        # The photo tab fits 1280x720 too: the photo, its examples and what to try, the prediction and the large view.
        for part in ("#photo-input", "#photo-label", "#photo-first canvas", "#photo-map"):
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        assert small_texts(page) == []
        examples = page.locator("#photo-input .vd-examples button").all()
        assert len(examples) == 12 and all(e.bounding_box()["y"] + e.bounding_box()["height"] <= 720 for e in examples)
        page.keyboard.press("c")
        wait_for_label(page, "", panel="photo")
        page.get_by_role("tab", name="Draw a digit (MNIST)").click()

        # Off again: the whole page is back, and the address no longer asks for talk mode.
        page.locator("#talk-mode input").click()
        page.wait_for_function("() => !document.querySelector('#vd-app.vd-talk')")
        assert "view=talk" not in page.url and page.locator("#vd-intro").is_visible()
        assert page.outside_requests == [] and page.console_errors == []


def test_talk_mode_fits_720_on_every_tab_in_every_state_and_lists_its_keys(browser, app_url):
    """Talk mode at 1280x720: "?" lists the keys, → walks the layers one by one from the first map
    (conftest.check_talk_keys); and on each tab, in each state (its first image answered, raw attention, each "Also
    try", a warning among them, no image: conftest.talk_heights), nothing lies under the projector's edge."""
    with app_page(browser, app_url.rstrip("/") + "/?view=talk", 1280, 720) as page:
        check_talk_mode_fits(page)


def test_the_probability_bars_are_readable_on_a_phone(browser, app_url):
    """At 390x844, as the page and in talk mode, the top class's bar is a bar, not a stub, on both tabs."""
    for query in ("", "?view=talk"):
        with app_page(browser, app_url.rstrip("/") + "/" + query, 390, 844) as page:
            for panel in ("digit", "photo"):
                page.click(f"[data-tab={panel}]")
                track, fill = top_bars(page, panel)
                assert track >= 48 and fill >= 40, (query, panel, track, fill)  # (app.css: 3em at least)


def test_the_toggle_turns_talk_mode_on_and_keys_do_nothing_without_it(page):
    page.locator("#canvas .vd-examples button[title='example: 3']").click()
    wait_for_label(page, "3")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("c")
    time.sleep(0.5)
    assert layer_and_head(page) == ("6", "mean") and label_text(page) == "3"
    page.locator("#talk-mode input").click()
    page.wait_for_function("() => document.querySelector('#vd-app.vd-talk')")
    assert "view=talk" in page.url and not page.locator("#digit-cls-grid").is_visible()
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("() => document.querySelector('#digit-layer input[type=range]').value === '5'")


def test_export_a_view_and_a_gif_for_slides(page, tmp_path):
    """Made in the page, as in the static Space (each view and the patch box: tests/test_page_export.py)."""
    from PIL import Image

    page.locator("#canvas .vd-examples button[title='example: 3']").click()
    wait_for_label(page, "3")
    for button, name, width in (("#digit-export-png", "mnist-3-cls-grid.png", 1600),
                                ("#digit-export-gif", "mnist-3-layers-mean.gif", 600)):
        with page.expect_download(timeout=20000) as download:  # one click, one download
            page.locator(button).click()
        assert download.value.suggested_filename == name
        assert page.locator("#digit-export-file").inner_text() == f"Downloaded {name} · download again"
        saved = tmp_path / name
        download.value.save_as(saved)
        with Image.open(saved) as picture:
            assert picture.width >= width
    assert page.outside_requests == [] and page.console_errors == []


def test_a_cold_start_shows_a_starting_page_that_opens_the_app_by_itself(browser, tmp_path):
    with serving(REPO / "app.py", until_200=False, TMPDIR=str(tmp_path)) as server:
        assert server.seconds_to_answer < 30
        context = browser.new_context()
        page = context.new_page()
        answer = page.goto(server.url)
        assert answer.status == 503  # the app is still warming up
        assert "Starting" in page.locator("h1").inner_text()
        # Once the app has the port, the page opens it with no click.
        page.wait_for_selector("#canvas canvas.vd-draw[data-ready]", timeout=120_000)
        page.locator("#canvas .vd-examples button[title='example: 3']").click()
        wait_for_label(page, "3")
        context.close()
        assert list(tmp_path.glob("vit-demo-page-*/inside/mnist/filters.png"))  # the Inside pictures it serves
    # Stopped as a Space or a service manager stops it (SIGTERM), it closes as on Ctrl-C and takes its pictures away
    # (what stays is Gradio's own cache, which its sweep empties).
    assert server.process.returncode == 0 and not list(tmp_path.glob("vit-demo-page-*"))


def test_talk_mode_with_heads_off_still_fits_a_projector(browser, app_url):
    """Heads switched off before the talk view: the notice says so over the prediction, and the Head control is still
    on the 1280x720 screen."""
    with app_page(browser, app_url, 1280, 720) as page:
        page.locator("#canvas .vd-examples button[title='example: 3']").click()
        wait_for_label(page, "3")
        page.locator("#digit-board").scroll_into_view_if_needed()
        page.locator("#digit-board button.vd-board-layer[data-layer='2']").click()
        page.locator("#digit-board button.vd-board-toggle[data-index='17']").click()
        page.wait_for_function("() => document.querySelector('#digit-selected canvas').dataset.ablated === "
                               "'mean:8.9.10.11.17'")
        raw_attention(page)
        page.locator("#talk-mode input").click()
        page.wait_for_function("() => document.querySelector('#vd-app.vd-talk')")
        page.evaluate("() => window.scrollTo(0, 0)")
        assert "5 heads switched off" in page.locator("#digit-ablated").inner_text()
        head = page.locator("#digit-head").bounding_box()
        assert head["y"] + head["height"] <= 720


def test_talk_mode_with_a_warning_still_fits_a_projector(browser, app_url, tmp_path):
    """A drawing that is no digit, and a photo of none of the ten classes: the warning over the label, and the label,
    the large view, its controls and the keys all on the 1280x720 screen."""
    from PIL import Image

    from vit_demo.data.outside_photos import outside_photos

    with app_page(browser, app_url.rstrip("/") + "/?view=talk", 1280, 720) as page:
        page.wait_for_function("() => document.querySelector('#vd-app.vd-talk')")
        draw(page, [(0.2, 0.5), (0.8, 0.5)])  # a plus sign
        draw(page, [(0.5, 0.2), (0.5, 0.8)])
        page.wait_for_function("() => !document.querySelector('#digit-notice').hidden")
        settled(page)
        page.evaluate("() => window.scrollTo(0, 0)")
        for part in ("#vd-keys", "#digit-notice", "#digit-label", "#digit-first canvas", "#digit-map"):
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        raw_attention(page)
        for part in ("#digit-selected canvas", "#digit-head"):
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        Image.fromarray(dict(outside_photos())["moon.png"]).save(tmp_path / "moon.png")
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        page.locator("#photo-input input[type='file']").set_input_files(str(tmp_path / "moon.png"))
        page.wait_for_function("() => !document.querySelector('#photo-notice').hidden")
        page.evaluate("() => window.scrollTo(0, 0)")
        for part in ("#photo-notice", "#photo-label", "#photo-first canvas", "#photo-map"):
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        raw_attention(page, "photo")
        for part in ("#photo-selected canvas", "#photo-head"):
            box = page.locator(part).bounding_box()
            assert box["y"] + box["height"] <= 720, part
        assert small_texts(page) == []  # the warning, the guesses and the controls: none under 18 px
        page.screenshot(path=str(tmp_path / "talk-warning.png"))


def test_the_first_screen_tells_the_story_in_four_steps(browser, app_url):
    """At 1400x900: draw, the patches it reads, where it looks, the answer, left to right, each titled with one
    sentence, all on the first screen, with the way to every other view under them."""
    with app_page(browser, app_url, 1400, 900) as page:
        page.locator("#canvas .vd-examples button[title='example: 3']").click()
        wait_for_label(page, "3")
        wait_for_live(page, "digit-patches", f"patch {page.evaluate('() => window.vdLive.digit.patch')}")
        steps = page.evaluate("""() => [...document.querySelectorAll('.vd-top h3.vd-step')]
            .filter((h) => h.offsetParent).map((h) => h.innerText.trim())""")  # the digit tab's: the shown ones
        assert steps[:4] == ["Draw a digit", "The patches it reads", "Where it looks", "The answer"]
        boxes = [page.locator(s).bounding_box() for s in
                 ("#canvas canvas.vd-draw", "#digit-patches canvas", "#digit-first canvas", "#digit-label")]
        assert all(a["x"] + a["width"] <= b["x"] for a, b in zip(boxes, boxes[1:]))  # left to right
        assert all(box["y"] + box["height"] <= 900 for box in boxes)
        deeper = page.locator(".vd-deeper").first
        assert deeper.is_visible() and deeper.bounding_box()["y"] < 900
        assert not deeper.locator("a").first.is_visible()  # until "Go deeper" is opened
        deeper.locator("summary").click()
        assert deeper.locator("a").count() == 9 and deeper.locator("a").first.is_visible()
        # Each link says where it goes (its section's title) and lands on it with the title whole, on screen.
        for link in deeper.locator("a").all():
            page.evaluate("() => window.scrollTo(0, 0)")
            title = page.locator(link.get_attribute("href"))
            assert title.inner_text().lower() == link.inner_text().lower()
            link.click()
            page.wait_for_function("(t) => { const box = t.getBoundingClientRect(); return box.top >= 0 && "
                                   "box.bottom <= innerHeight && box.top < 0.8 * innerHeight; }", arg=title.element_handle())
        page.evaluate("() => window.scrollTo(0, 0)")
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()  # its story, the notes under the answer
        wait_for_live(page, "photo-reads", "input")
        links = page.locator(".vd-deeper:visible")
        assert links.is_visible() and links.bounding_box()["y"] + links.bounding_box()["height"] <= 900
        notes, answer = page.locator("#photo-classes").bounding_box(), page.locator("#photo-label").bounding_box()
        assert notes["y"] >= answer["y"] + answer["height"] and abs(notes["x"] - answer["x"]) < 20
        assert page.console_errors == []


def test_each_tabs_first_screen_is_a_few_dozen_words_and_a_question_mark_opens_the_rest(browser, app_url):
    with app_page(browser, app_url, 1400, 900) as page:
        wait_for_label(page, "2")  # the example it starts with
        for tab, panel, label in (("Draw a digit (MNIST)", "digit", "2"), ("Upload a photo (CIFAR-10)", "photo", "horse")):
            page.get_by_role("tab", name=tab).click()
            wait_for_label(page, label, panel=panel)
            page.wait_for_function(f"() => document.querySelector('#{panel}-first canvas').dataset.drawn")  # settled
            page.evaluate("() => window.scrollTo(0, 0)")
            words = visible_words(page)
            assert len(words) <= FIRST_SCREEN_WORDS, " ".join(words)
            # A step's "?" opens the sentence behind it, in plain words, and closes again.
            more = page.locator(f"#tab-{panel} .vd-patches-step .vd-more")
            more.locator("summary").click()
            assert "[CLS]" in more.inner_text() and len(visible_words(page)) > len(words)
            more.locator("summary").click()
            assert len(visible_words(page)) == len(words)
        assert page.console_errors == []


def test_talk_mode_on_a_phone_is_one_column_with_the_prediction_first(browser, app_url):
    """A talk's link opened in the audience: talk mode on a 390 px phone."""
    with app_page(browser, app_url.rstrip("/") + "/?view=talk", 390) as page:
        page.wait_for_function("() => document.querySelector('#vd-app.vd-talk')")
        empty = page.evaluate(CANVAS_TOP)
        page.locator("#canvas .vd-examples button[title='example: 7']").click()  # the layout is the point here
        wait_for_label(page, "7")
        assert abs(page.evaluate(CANVAS_TOP) - empty) <= 2  # the first answer does not move the canvas
        wait_for_live(page, "digit-first", "map")
        label, canvas, view = (page.locator(s).bounding_box() for s in
                               ("#digit-label", "#canvas canvas.vd-draw", "#digit-first canvas"))
        assert label["y"] + label["height"] <= canvas["y"] < canvas["y"] + canvas["height"] <= view["y"]
        assert 300 <= view["width"] and view["x"] + view["width"] <= 390


def test_switch_heads_off_and_every_view_follows(page):
    """The board: a layer and a head switched off is one request, answered with the knocked-out model's prediction
    and maps; the prediction says so, the logit difference is heads.knockout's, the large view, the [CLS] grid and
    the training view are redrawn from the ablated maps, the query, lens and relevance views ask for theirs with the
    heads off; all heads on again redraws the intact views without a request."""
    import numpy as np
    import torch

    from vit_demo import load_model
    from vit_demo.interpret import heads
    page.locator("#canvas .vd-examples button[title='example: 3']").click()
    wait_for_label(page, "3")
    key = settled(page)
    wait_for_live(page, "digit-selected", "6/mean")
    intact = live_pixels(page, "digit-selected")
    page.locator("#digit-board").scroll_into_view_if_needed()
    # The heads that matter most (head_importance.json) are marked, and the board says what one head alone costs.
    record = heads.read_head_importance(REPO / "weights" / "mnist")
    top = sorted(np.argsort(-np.asarray(record["importance"]).ravel(), kind="stable")[:3].tolist())
    marked = page.evaluate("() => [...document.querySelectorAll('#digit-board .vd-matters')].map((b) => "
                           "Number(b.dataset.index))")
    assert sorted(marked) == top
    assert "matter most" in page.locator("#digit-board .vd-board-status").inner_text()
    before, asked = len(page.requests_made), []
    page.on("request", lambda r: asked.append(json.loads(r.post_data)["fn_name"]) if "component_server" in r.url else None)
    page.locator("#digit-board button.vd-board-layer[data-layer='2']").click()  # the whole of layer 3
    page.locator("#digit-board button.vd-board-toggle[data-index='17']").click()  # and head 2 of layer 5
    off = "mean:8.9.10.11.17"
    page.wait_for_function(f"() => document.querySelector('#digit-board .vd-board').dataset.shown === {off!r}")
    page.wait_for_function(f"() => document.querySelector('#digit-selected canvas').dataset.ablated === {off!r}")
    page.wait_for_function(f"() => document.querySelector('#digit-cls-grid canvas').dataset.ablated === {off!r}")
    # The views that ask for numbers of their own ask with the same heads off, once each as they come into view;
    # the training view's trained model is drawn from the board's answer.
    for view in ("digit-training", "digit-query", "digit-lens", "digit-relevance"):
        page.locator(f"#{view}").scroll_into_view_if_needed()
        page.wait_for_function(f"() => document.querySelector('#{view} canvas').dataset.ablated === {off!r}")
    assert "with 5 heads off" in page.locator("#digit-query").inner_text()
    assert "with 5 heads off" in page.locator("#digit-relevance").inner_text()
    # The page's own model answers the board, the query, the lens and the relevance views: no request.
    assert asked == [], asked
    page.locator("#digit-ablated").scroll_into_view_if_needed()
    assert "5 heads switched off" in page.locator("#digit-ablated").inner_text()
    assert "with 5 of 24 heads off" in page.locator("#digit-info").inner_text()
    assert "with 5 heads off" in page.locator("#digit-selected").inner_text()
    assert (live_pixels(page, "digit-selected") != intact).any()
    # The logit difference the page shows, against heads.knockout on the pixels the page holds.
    image, _ = read_live_payload(page.evaluate("() => window.vdLive.digit.numbers()"))
    classifier = load_model("mnist", device="cpu")
    means = heads.read_head_means(classifier.info.folder, classifier.model)
    expected = heads.knockout(classifier.model, torch.from_numpy(image).float()[None, None],
                              [(2, None), (4, 1)], means)
    held = f"window.vdLive.digit.kept.get({'knockout/' + key + '/' + off!r}).value"  # the board's answer
    shown = page.evaluate(f"() => {held}.logit_diff")
    assert shown["intact"] == pytest.approx(float(expected.logit_diff[0]), abs=1e-3)
    assert shown["ablated"] == pytest.approx(float(expected.ablated_logit_diff[0]), abs=1e-3)
    bars = page.locator("#digit-board .vd-logit-diff").inner_text()
    assert f"{shown['intact']:.2f}" in bars and f"{shown['ablated']:.2f}" in bars
    holds = page.evaluate(f"() => ({{ label: {held}.label, intact: {held}.intact }})")
    says = "The answer holds without them" in page.locator("#digit-board .vd-board-status").inner_text()
    assert says == (holds["label"] == holds["intact"]["label"] and shown["ablated"] >= 0.8 * shown["intact"])
    # All heads on, from the notice over the prediction: the intact views again, drawn from the page's own numbers.
    before = len(page.requests_made)
    page.locator("#digit-ablated button.vd-heads-reset").click()
    page.wait_for_function("() => document.querySelector('#digit-selected canvas').dataset.ablated === ''")
    assert not page.locator("#digit-ablated").is_visible()
    assert np.array_equal(live_pixels(page, "digit-selected"), intact)
    assert page.requests_made[before:] == []
    assert page.outside_requests == [] and page.console_errors == []


def test_patch_a_three_into_an_eight_and_read_the_lens(page):
    """Keep a 3 as clean and an 8 as corrupt: both directions' grids, heads and residual stream, in one request; the
    lens strip of the image in hand, asked for once it is on screen."""
    for digit, slot in (("3", "clean"), ("8", "corrupt")):
        page.locator(f"#canvas .vd-examples button[title='example: {digit}']").click()
        wait_for_label(page, digit)
        settled(page)
        page.locator(f"#digit-patching button.vd-use[data-slot='{slot}']").click()
    page.wait_for_function("() => document.querySelector('#digit-patching .vd-patching').dataset.drawn"
                           ".endsWith('/true')", timeout=30000)
    patching = page.locator("#digit-patching")
    assert "Logit difference 3 − 8" in patching.inner_text() and "How to read it" in patching.inner_text()
    assert patching.locator("canvas.vd-patch-heads").count() == 2
    assert patching.locator("canvas.vd-patch-residual").count() == 2
    assert "read as 3" in patching.locator(".vd-slot[data-slot='clean']").inner_text()
    # The lens: the 8 in hand, layer by layer, ending with the model's answer.
    page.locator("#digit-lens").scroll_into_view_if_needed()
    wait_for_live(page, "digit-lens", "lens")
    cells = page.locator("#digit-lens .vd-lens-cell")
    assert cells.count() == 6 and cells.nth(5).locator("b").inner_text() == "8"
    assert page.outside_requests == [] and page.console_errors == []


def test_the_page_reads_drawings_with_its_own_model(page):
    """The page runs the digit model itself (onnxruntime-web): a stroke, its views and another patch's map cost no
    request at all."""
    page.wait_for_selector("#canvas canvas.vd-draw[data-model=page]", timeout=30000)
    asked, loaded = [], []  # what the page asks the server's functions for (their names), and files it loads
    page.on("request", lambda r: asked.append(json.loads(r.post_data)["fn_name"]) if "component_server" in r.url
            else loaded.append(r.url))
    draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)], pause_ms=200)  # a 7, read while the pen is down too
    wait_for_label(page, "7")
    wait_for_live(page, "digit-cls-grid", "grid")
    settled(page)
    page.locator("#digit-patches canvas").click(position={"x": 5, "y": 5})  # patch 0
    wait_for_live(page, "digit-query", "query 0")
    # No view asks the server: relevance too comes from the page (its relevance graph).
    assert asked == [], asked
    # Besides: graphs the page loads as it needs them: the relevance graph once its view is on screen, the training
    # snapshots' once the first drawing is read (the slider works offline).
    assert all(url.endswith(".onnx") and ("/snapshots/epoch-" in url or url.endswith("/relevance.onnx"))
               for url in loaded), loaded
    assert "ms in this page" in page.locator("#digit-info").inner_text()


def test_without_webassembly_the_server_reads_the_drawings(browser, app_url):
    """A browser that can't run the page's model: the page still reads every stroke and photo and makes every view's
    numbers, with the forward pass on the server (the canvas' and the photo reader's server function)."""
    with app_page(browser, app_url, init_script="delete globalThis.WebAssembly;") as page:
        asked = len(page.requests_made)
        draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7
        wait_for_label(page, "7")
        assert page.evaluate("document.querySelector('#canvas canvas.vd-draw').dataset.model") == "server"
        assert "ms on the server" in page.locator("#digit-info").inner_text()
        assert any("gradio_api" in url for url in page.requests_made[asked:])
        page.locator("#digit-faithfulness button.vd-score").click()  # the maps scored with the server's model
        wait_for_live(page, "digit-faithfulness", "curves", timeout=60000)
        assert "on the server" in page.locator("#digit-faithfulness .vd-caption").inner_text()
        assert_curves_drawn(page, "digit-faithfulness")
        page.get_by_role("tab", name="Upload a photo (CIFAR-10)").click()
        page.locator("#photo-input input[type='file']").set_input_files(str(PHOTOS / "ship.png"))
        wait_for_label(page, "ship", panel="photo")
        assert "ms on the server" in page.locator("#photo-info").inner_text()
        assert page.console_errors == []


def test_the_app_page_keeps_drawing_offline(browser, app_url):
    """Once the page has its model, the network can go (a talk's Wi-Fi): drawings are still read, views drawn."""
    with app_page(browser, app_url) as page:
        page.wait_for_selector("#canvas canvas.vd-draw[data-model=page]", timeout=30000)
        page.context.set_offline(True)
        draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7
        wait_for_label(page, "7")
        wait_for_live(page, "digit-rollout", "map")
