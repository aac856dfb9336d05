"""A model of ImageNet's 1,000 classes, whose names are long ("great white shark, white shark, man-eater, man-eating
shark, Carcharodon carcharias"), in a tab of its own beside the shipped models', in the static page and in the app:
its views readable at 1400x900, at 390x844 and in talk mode at 1280x720. The lens above all
(assets/page/views/lens.js), whose strip of a card a layer cut every name to two letters ("co... ca... sto...") where
the cards were narrower than the names: its names now show whole, or two full lines of them.

The model is a small random ViT written as ``python -m vit_demo import`` writes a weights folder (as
tests/test_own_model_page.py's), with timm's ImageNet class names in the head's order; its head leans towards two of
the longest names, so that the lens and the prediction have long names to show. Six layers: twelve, as ViT-S and
ViT-B have, take minutes to export (the patching graphs); the page lays six cards of long names out in rows too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import REPO, app_page, check_talk_keys, imported_folder, run_cli, serving, small_texts, talk_heights
from test_static_space import serving as serving_folder
from test_static_space import static_page
from vit_demo.importing import distinct
from vit_demo.model import ViTConfig, VisionTransformer

PREFIX = "m-imagenet-vit"  # the tab's, from the folder's name (layout.added_tab)
READABLE = 14  # letters of a name that show, at least, where it does not show whole
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("many_classes")]  # (the model and its site made once)


@pytest.fixture(scope="module")
def imagenet_model(tmp_path_factory) -> Path:
    timm_data = pytest.importorskip("timm.data", reason="timm is not installed")
    names = timm_data.ImageNetInfo()
    classes = distinct([names.index_to_description(i) for i in range(1000)])
    torch.manual_seed(0)
    config = ViTConfig(image_size=64, patch_size=16, in_channels=3, num_classes=len(classes), dim=48, depth=6,
                       heads=3, mlp_dim=96, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), norm_eps=1e-6)
    model = VisionTransformer(config).eval()
    longest = sorted(range(len(classes)), key=lambda i: len(classes[i]))[-2:]  # ImageNet's two longest names
    with torch.no_grad():
        model.head.bias[longest[0]] += 6
        model.head.bias[longest[1]] += 5
    return imported_folder(tmp_path_factory.mktemp("imagenet") / "imagenet_vit", model, classes, "imagenet_vit")


@pytest.fixture(scope="module")
def imagenet_site(imagenet_model, tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("imagenet-site") / "site"
    result = run_cli("static", str(site), "--model", str(imagenet_model))
    assert result.returncode == 0, result.stderr
    return site


# Of each element the selector finds: its text, the letters (not spaces) of it in sight within its own box, all its
# letters, how many of those on its lines in sight lie outside it sideways (cut off), and the title of the card or row
# it is in (the whole name).
SHOWN = """(selector) => [...document.querySelectorAll(selector)].map((element) => {
    const box = element.getBoundingClientRect(), range = document.createRange(), text = element.textContent;
    let seen = 0, sideways = 0;
    for (const node of element.childNodes) {
      if (node.nodeType !== Node.TEXT_NODE) continue;
      for (let i = 0; i < node.length; i++) {
        if (/\\s/.test(node.data[i])) continue;
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const at = range.getBoundingClientRect();
        if (at.bottom > box.bottom + 1 || at.top < box.top - 1) continue; // a line not shown (two at most)
        if (at.right <= box.right + 1 && at.left >= box.left - 1) seen++;
        else sideways++;
      }
    }
    return { text, seen, sideways, letters: text.replace(/\\s/g, "").length,
             title: element.closest("[title]")?.title ?? "" };
  })"""


def assert_readable(names: list[dict], what: str) -> None:
    """Each name shows whole, or at least READABLE of its letters, none running out sideways; the whole in a title."""
    assert names, what
    for name in names:
        assert name["seen"] >= min(name["letters"], READABLE), (what, name)
        assert name["sideways"] == 0, (what, name)
        assert name["text"] in name["title"], (what, name)


def check_tab(page, width: int) -> None:
    """The added tab at this width: its prediction's names and the lens's readable, the page no wider than the window,
    and (once "Go deeper" is open) every view of it laid out within the window's width."""
    page.click(f"[data-tab={PREFIX}]")
    page.wait_for_function(f"() => document.querySelector('#{PREFIX}-label .vd-prob-row')", timeout=60_000)
    label = page.locator(f"#{PREFIX}-label .vd-top-class")
    assert len(label.inner_text()) > 40 and label.bounding_box()["height"] <= 170  # a long name, set smaller
    assert_readable(page.evaluate(SHOWN, f"#{PREFIX}-label .vd-prob-name"), f"the prediction at {width} px")
    page.evaluate(f"() => document.querySelector('#tab-{PREFIX} details.vd-deeper').open = true")
    page.evaluate(f"() => document.getElementById('{PREFIX}-lens').scrollIntoView({{block: 'start'}})")
    page.wait_for_function(f"() => document.querySelector('#{PREFIX}-lens canvas')?.dataset.drawn === 'lens'",
                           timeout=60_000)
    cards = page.locator(f"#{PREFIX}-lens .vd-lens-cell")
    assert cards.count() == 6
    lens = page.evaluate(SHOWN, f"#{PREFIX}-lens .vd-lens-label")
    assert_readable(lens, f"the lens at {width} px")
    assert any(name["letters"] > 40 for name in lens)  # (long names, to show)
    for i in range(cards.count()):  # each card: its map in it, within the window
        card, map_box = cards.nth(i).bounding_box(), cards.nth(i).locator("canvas.vd-lens-map").bounding_box()
        assert card["width"] >= 120 and card["x"] >= 0 and card["x"] + card["width"] <= width, i
        assert map_box["width"] >= 48 and card["y"] <= map_box["y"] <= card["y"] + card["height"], i
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    for view in page.locator(f"#tab-{PREFIX} .vd-view").all():
        box = view.bounding_box()
        assert box is None or box["x"] + box["width"] <= width + 1, view.get_attribute("id")
    assert page.console_errors == []


def check_talk(page) -> None:
    """The added tab in talk mode at 1280x720: within the screen in each state (an answer, raw attention, no image),
    its long top class set small enough, no text under 18 px; its keys as on the shipped tabs."""
    check_talk_keys(page, PREFIX)
    heights = talk_heights(page, PREFIX)
    assert max(heights.values()) <= 720, heights
    page.click(f"#{PREFIX}-input .vd-examples button >> nth=1")
    page.wait_for_function(f"() => window.vdLive['{PREFIX}'].state", timeout=60_000)
    page.wait_for_timeout(400)
    assert page.evaluate("() => document.documentElement.scrollHeight") <= 720
    assert small_texts(page) == []
    assert page.console_errors == []


def test_a_thousand_classes_read_in_the_static_page(imagenet_site, browser):
    with serving_folder(imagenet_site) as (url, _):
        for width, height in ((1400, 900), (390, 844)):
            with static_page(browser, url, width, height) as page:
                check_tab(page, width)
        with static_page(browser, url, 1280, 720, "index.html?view=talk") as page:
            check_talk(page)


def test_a_thousand_classes_read_in_the_app(imagenet_model, browser):
    with serving(REPO / "app.py", args=["--model", str(imagenet_model)]) as server:
        for width, height in ((1400, 900), (390, 844)):
            with app_page(browser, server.url, width, height) as page:
                check_tab(page, width)
        with app_page(browser, server.url + "?view=talk", 1280, 720) as page:
            check_talk(page)
