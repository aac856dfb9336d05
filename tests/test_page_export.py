"""Export for slides, made in the page (vit_demo/page/assets/page/export.js) of the static site: each file named as
vit_demo/pictures/slides.py names it, a PNG at least SLIDE_WIDTH wide, a GIF with a frame per layer; made with the file
server stopped once the page has loaded, since the export needs no network."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageSequence

from conftest import wait_for_label
from test_static_space import serving, static_page
from vit_demo.deploy import static_space
from vit_demo.pictures.slides import GIF_FRAME_MS, SLIDE_WIDTH

FILE = "#digit-export-file"


@pytest.fixture(scope="module")
def static_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("static") / "space"
    static_space.write_static(folder)
    return folder


def exported(page, button: str, tmp_path: Path) -> tuple[str, Image.Image]:
    """Press ``button`` (png or gif) once: the download that one click gives, the file's name and its picture; the
    status line says what was downloaded, with a link to download it again."""
    page.evaluate(f"document.querySelector({FILE!r}).replaceChildren()")  # (the status before, gone)
    with page.expect_download(timeout=60_000) as download:
        page.click(f"#digit-export-{button}")
    name = download.value.suggested_filename
    page.wait_for_selector(f"{FILE} a")
    assert page.inner_text(FILE) == f"Downloaded {name} · download again"
    assert page.get_attribute(f"{FILE} a", "download") == name
    download.value.save_as(tmp_path / name)
    return name, Image.open(tmp_path / name)


def test_export_for_slides_in_the_page_offline(static_folder, browser, tmp_path):
    with serving(static_folder) as (url, server), static_page(browser, url) as page:
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        page.click("#canvas .vd-clear")  # no image: no file, and why
        page.wait_for_function("!window.vdLive.digit.state")
        page.click("#digit-export-png")
        assert page.inner_text(FILE) == "Draw or upload an image first: the export is made from the image in hand."
        page.click("#canvas .vd-examples button[title='example: 3']")
        wait_for_label(page, "3")
        server.terminate()  # from here on, no network
        server.wait(timeout=10)

        name, picture = exported(page, "png", tmp_path)  # the default view: where [CLS] looks, every layer and head
        assert name == "mnist-3-cls-grid.png" and picture.width >= SLIDE_WIDTH
        page.evaluate(f"""() => {{ window.statuses = [];  // what the status line says while the GIF is made
            const box = document.querySelector({FILE!r});
            new MutationObserver(() => window.statuses.push(box.textContent))
              .observe(box, {{ childList: true, characterData: true, subtree: true }}); }}""")
        name, gif = exported(page, "gif", tmp_path)  # the mean of the heads, layer by layer
        assert [f"Making the GIF: layer {n} of 6…" for n in range(1, 7)] == [
            s for s in page.evaluate("window.statuses") if s.startswith("Making the GIF")]
        assert name == "mnist-3-layers-mean.gif" and gif.width >= 600
        assert len(list(ImageSequence.Iterator(gif))) == 6 and gif.info["duration"] == GIF_FRAME_MS

        page.select_option("#digit-export-view", "query")
        page.click("#digit-patches canvas", position={"x": 5, "y": 5})  # patch 0, as the query view shows it
        page.wait_for_function("window.vdLive.digit.patch === 0")
        name, picture = exported(page, "png", tmp_path)  # the patch box empty: the patch shown
        assert name == "mnist-3-patch0-grid.png" and picture.width >= SLIDE_WIDTH
        page.fill("#digit-export-patch", "12")
        assert exported(page, "png", tmp_path)[0] == "mnist-3-patch12-grid.png"
        page.fill("#digit-export-patch", "99")  # the digits' grid is 7 x 7
        page.click("#digit-export-png")
        assert "0 to 48" in page.inner_text(FILE) and page.locator(f"{FILE} a").count() == 0

        page.click("#canvas .vd-examples button[title='example: 7']")  # a new image: the patch typed is forgotten
        wait_for_label(page, "7")
        patch = page.evaluate("window.vdLive.digit.patch")
        assert exported(page, "png", tmp_path)[0] == f"mnist-7-patch{patch}-grid.png"
        assert page.input_value("#digit-export-patch") == ""
        assert errors == [] and page.outside_requests == []
