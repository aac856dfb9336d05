"""A model of one's own explained beside the shipped ones (app.py --model DIR, static DIR --model MODEL_DIR): its tab
in the static page, in real Chromium with the model run in the page, reads a real photo as Python does.

The model is a small random ViT written as ``python -m vit_demo import`` writes a weights folder: 30 classes (more than
the page lists, so the class to explain is typed), 16 patches of 16 px at 64 px, DeiT's distillation token (a second
prefix token), LayerNorm's eps of timm's ViTs, and timm's eval preprocessing (the shorter side resized by PIL, bicubic,
then the centre cropped)."""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import CHROMIUM, CHROMIUM_ARGS, REPO, free_port, imported_folder, run_cli, small_texts
from test_static_space import saved_for_offline, serving, static_page
from vit_demo import load_model
from vit_demo.interpret import explain
from vit_demo.model import ViTConfig, VisionTransformer

CLASSES = tuple(f"class number {i}" for i in range(30))
PREFIX = "m-own-vit"  # the tab's, from the folder's name (layout.added_tab)
HEADLESS = "m-own-dino"  # the tab of a model without a head (headless_model)
pytestmark = pytest.mark.xdist_group("own_model")  # in one process, so that the model and its site are made once


@pytest.fixture(scope="session")  # (and own_site: not module, as their tests share a worker but not one after another)
def own_model(tmp_path_factory):
    torch.manual_seed(0)
    config = ViTConfig(image_size=64, patch_size=16, in_channels=3, num_classes=len(CLASSES), dim=48, depth=2,
                       heads=3, mlp_dim=96, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), norm_eps=1e-6,
                       distillation_token=True)
    model = VisionTransformer(config).eval()
    with torch.no_grad():  # a head that tells photos apart a little, so that its answers are not all alike
        model.head.weight.mul_(40)
        model.head_dist.weight.mul_(40)
    return imported_folder(tmp_path_factory.mktemp("own") / "own_vit", model, CLASSES, "own_vit")


@pytest.fixture(scope="session")
def headless_model(tmp_path_factory):
    """A model without a head, as DINOv2's encoders are: registers (3 prefix tokens with [CLS]), layer scale,
    position embeddings on the patches alone; random weights, its graph written."""
    torch.manual_seed(1)
    config = ViTConfig(image_size=64, patch_size=16, in_channels=3, num_classes=0, dim=48, depth=2, heads=3,
                       mlp_dim=96, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), norm_eps=1e-6, register_tokens=2,
                       layer_scale=0.5, prefix_pos_embed=False)
    return imported_folder(tmp_path_factory.mktemp("own") / "own_dino", VisionTransformer(config).eval(), (),
                           "own_dino")


def photo(tmp_path) -> Path:
    """A real photo (scikit-image's, 451 x 300), saved as a PNG to upload."""
    from skimage import data

    path = tmp_path / "chelsea.png"
    Image.fromarray(data.chelsea()).save(path)
    return path


@pytest.fixture(scope="session")
def own_site(own_model, headless_model, tmp_path_factory) -> Path:
    """The static Space with the models' tabs beside the shipped ones (python -m vit_demo static SITE --model DIR
    --model DIR)."""
    site = tmp_path_factory.mktemp("own-site") / "site"
    result = run_cli("static", str(site), "--model", str(own_model), "--model", str(headless_model))
    assert result.returncode == 0, result.stderr
    return site


def upload(page, path: Path, prefix: str = PREFIX) -> None:
    """Upload ``path`` in the model's tab and wait until the page's model has read it (a new image key), once it has
    read what it showed before (the tab's first example, as it opens)."""
    page.wait_for_function(f"window.vdLive?.['{prefix}']?.state", timeout=60_000)  # (after a reload: once mounted)
    key = page.evaluate(f"Number(window.vdLive['{prefix}'].state.key)")  # (a counter, as a string)
    page.locator(f"#{prefix}-input input[type=file]").set_input_files(str(path))
    page.wait_for_function(f"(key) => Number(window.vdLive['{prefix}'].state?.key) > key", arg=key,
                           timeout=60_000)


def test_the_static_page_explains_a_model_of_ones_own(own_model, own_site, browser, tmp_path):
    path = photo(tmp_path)
    expected = load_model(own_model, device="cpu").predict(path)
    with serving(own_site) as (url, _), static_page(browser, url) as page:
        page.click(f"button[data-tab='{PREFIX}']")
        assert "It knows 30 classes." in page.inner_text(f"#{PREFIX}-classes")
        assert "resized to 72 pixels (bicubic)" in page.text_content(f"#tab-{PREFIX} .vd-input")  # (behind its "?")
        # Its examples: large photos of anything (not CIFAR-10's ten classes at 32 pixels), the cat first.
        examples = page.locator(f"#{PREFIX}-input .vd-examples button")
        assert [examples.nth(i).get_attribute("data-src") for i in range(examples.count())] == [
            f"examples/large-photos/{name}.jpg" for name in ("astronaut", "chelsea", "coffee", "rocket")]
        assert page.get_attribute(f"#{PREFIX}-input .vd-photo-shown", "src") == "examples/large-photos/chelsea.jpg"
        upload(page, path)
        assert page.get_attribute(f"#{PREFIX}-input", "data-model") == "page"
        numbers = page.evaluate(f"JSON.parse(window.vdLive['{PREFIX}'].numbers())")
        assert numbers["label"] == expected.label and numbers["grid"] == 4
        assert page.locator(f"#{PREFIX}-label .vd-prob-row").count() == 5  # five of more than ten classes
        # Where [CLS] looks and rollout over the 16 patches alone, past the distillation token (patch i: token 2 + i).
        attention = expected.attention  # (L, H, T, T), T = 2 + 16
        maps = explain.token_attention_maps(attention, prefix_tokens=2)  # (L, H, 4, 4)
        page_maps = np.reshape(numbers["maps"], (2, 4, 4, 4))  # (L, H + 1, 4, 4): the heads, then their mean
        np.testing.assert_allclose(page_maps, np.concatenate([maps, maps.mean(1, keepdims=True)], 1), atol=1e-5)
        np.testing.assert_allclose(numbers["rollout"], explain.attention_rollout(attention, 2).ravel(), atol=1e-5)
        assert numbers["prefix"] == 2
        np.testing.assert_allclose(numbers["probs"], [expected.probs[c] for c in CLASSES], atol=1e-4)
        # Why another class: typed, the browser offering the names.
        page.fill(f"#{PREFIX}-explain-class", "class number 7")
        page.dispatch_event(f"#{PREFIX}-explain-class", "change")
        page.wait_for_function(f"document.querySelector('#{PREFIX}-relevance .vd-caption').innerText"
                               ".includes('class number 7')", timeout=60_000)
        assert page.outside_requests == [] and page.console_errors == []


def test_the_page_runs_a_model_on_webgpu_where_asked_and_on_webassembly_with_no_gpu(own_model, own_site, browser,
                                                                                    tmp_path):
    # Chromium's WebGPU on SwiftShader (a CPU emulating a GPU, which the browser calls a fallback adapter): the page
    # does not take it by itself, even for models it would read on a GPU (here every tab's, as ViT-Ti's at 224 pixels:
    # the tab runs on WebAssembly, and WebGPU's build is never fetched); with ?runtime=webgpu every tab's graphs run on
    # WebGPU, and read the photo as Python does.
    path = photo(tmp_path)
    expected = load_model(own_model, device="cpu").predict(path)
    site = shutil.copytree(own_site, tmp_path / "site")
    page_file = site / "index.html"
    page_file.write_text(page_file.read_text(encoding="utf-8").replace('"gpu": false', '"gpu": true'), encoding="utf-8")
    gpu_browser = browser.browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, "--enable-unsafe-webgpu"])
    try:
        with serving(site) as (url, _):
            for asked, where in (("", "in this page"), ("?runtime=webgpu", "in this page (WebGPU)")):
                with static_page(gpu_browser, url, path=f"index.html{asked}") as page:
                    assert page.evaluate("navigator.gpu.requestAdapter().then((a) => a.info.isFallbackAdapter)")
                    page.click(f"button[data-tab='{PREFIX}']")
                    upload(page, path)
                    numbers = page.evaluate(f"JSON.parse(window.vdLive['{PREFIX}'].numbers())")
                    assert page.inner_text(f"#{PREFIX}-info").endswith(f"ms {where}")
                    fetched = page.evaluate("performance.getEntriesByType('resource').map((entry) => entry.name)")
                    assert any("asyncify" in u for u in fetched) == bool(asked)  # WebGPU's build, where asked
                    assert numbers["label"] == expected.label
                    np.testing.assert_allclose(numbers["probs"], [expected.probs[c] for c in CLASSES], atol=1e-4)
                    np.testing.assert_allclose(numbers["rollout"],
                                               explain.attention_rollout(expected.attention, 2).ravel(), atol=1e-5)
                    assert page.outside_requests == [] and page.console_errors == []
    finally:
        gpu_browser.close()


def test_a_model_without_a_head_shows_where_it_looks_and_says_it_has_no_answer(headless_model, own_site, browser,
                                                                              tmp_path):
    """DINO's kind of model: its tab shows where [CLS] looks (every layer and head, rollout, where a patch looks, how
    attention is computed) as Python computes it, past its three prefix tokens, and no answer: no classes, no views
    that need them (why this class, faithfulness, heads off, the lens, patching, training)."""
    path = photo(tmp_path)
    clf = load_model(headless_model, device="cpu", headless=True)
    with torch.no_grad():
        attention = clf.model.forward_activations(clf.batch([clf.preprocess(path)]), attention=True).attention
    attention = attention[0].numpy()  # (L, H, T, T), T = 3 + 16
    with serving(own_site) as (url, _), static_page(browser, url) as page:
        page.click(f"button[data-tab='{HEADLESS}']")
        upload(page, path, HEADLESS)
        numbers = page.evaluate(f"JSON.parse(window.vdLive['{HEADLESS}'].numbers())")
        assert numbers["label"] == "" and numbers["prefix"] == 3
        maps = explain.token_attention_maps(attention, prefix_tokens=3)  # (L, H, 4, 4)
        np.testing.assert_allclose(np.reshape(numbers["maps"], (2, 4, 4, 4)),
                                   np.concatenate([maps, maps.mean(1, keepdims=True)], 1), atol=1e-5)
        np.testing.assert_allclose(numbers["rollout"], explain.attention_rollout(attention, 3).ravel(), atol=1e-5)
        assert "Features, not classes" in page.inner_text(f"#{HEADLESS}-info")
        assert page.locator(f"#{HEADLESS}-label").is_hidden()
        for view in ("relevance", "faithfulness", "board", "lens", "patching", "training", "classes"):
            assert page.locator(f"#{HEADLESS}-{view}").count() == 0, view
        assert "(5 views)" in page.inner_text(f"#tab-{HEADLESS} .vd-deeper summary")
        page.locator(f"#{HEADLESS}-steps").scroll_into_view_if_needed()  # its queries and keys, from the graph
        page.wait_for_function(f"document.querySelectorAll('#{HEADLESS}-steps .vd-steps-list li').length > 0",
                               timeout=60_000)
        # Kept for offline use: the site and the model of the tab opened, not that of the tab never opened.
        saved_for_offline(page)
        kept = page.evaluate("caches.open('vit-demo').then((c) => c.keys()).then((k) => k.map((r) => r.url))")
        assert any("/models/own_dino/graphs.data" in u for u in kept)
        assert any("/models/mnist/" in u for u in kept) and not any("/models/own_vit/" in u for u in kept)
        assert page.outside_requests == [] and page.console_errors == []


def _half_unit(shown: str) -> float:
    """Half a unit of a shown number's last digit: how far the number it stands for may be from it."""
    return 0.5 * 10 ** -len(shown.split(".")[1]) if "." in shown else 0.5


def _number(shown: str) -> float:
    return float(shown.strip("()").replace(",", ""))


def _is(shown: str, value: float) -> bool:
    """``shown`` is ``value`` to its last digit."""
    return abs(_number(shown) - value) <= _half_unit(shown.strip("()")) * (1 + 1e-9)


def _worked_out(sign: str, calculated: float, shown: str, rounding: float) -> None:
    """A worked step's result: "=" exactly where a calculator given the shown numbers gives the shown result to its
    last digit, "≈" elsewhere, and then no further from it than the shown numbers' rounding (``rounding``) explains."""
    assert sign == ("=" if _is(shown, calculated) else "≈"), (sign, calculated, shown)
    assert abs(calculated - _number(shown)) <= rounding + _half_unit(shown) + 1e-12, (calculated, shown, rounding)


def _significant(shown: str) -> int:
    return len(shown.strip("()-").replace(".", "").lstrip("0"))


def _check_the_worked_steps(page, tab: str, layer: int, head: int, patch: int) -> None:
    """Recompute each step of the tab's "How attention is computed" (``layer``, ``head``: 0-based) for ``patch`` from
    the numbers it shows (its visible text), and hold them to the model's own (data-steps)."""
    view = f"#{tab}-steps"
    page.locator(f"{view} select.vd-steps-layer").select_option(index=layer)
    page.locator(f"{view} select.vd-steps-head").select_option(index=head)
    page.evaluate(f"window.vdLive['{tab}'].choose({patch})")
    L, H = (int(page.locator(f"{view} select.{s}").input_value()) + 1 for s in ("vd-steps-layer", "vd-steps-head"))
    page.wait_for_function(
        "([view, caption]) => document.querySelector(`${view} .vd-caption`).innerText.startsWith(caption) && "
        "!document.querySelector(`${view} .vd-steps-list`).classList.contains('vd-stale')",
        arg=[view, f"Patch {patch}, layer {L}, head {H}"], timeout=60_000)
    raw = json.loads(page.get_attribute(view, "data-steps"))  # the model's own numbers, unrounded
    query, scores, weights, output = (np.asarray(raw[k]) for k in ("query", "scores", "weights", "output"))
    Dh, T = len(query), len(scores)
    keys, values = np.reshape(raw["keys"], (T, Dh)), np.reshape(raw["values"], (T, Dh))
    steps = page.locator(f"{view} .vd-steps-list > li")
    assert steps.count() == 4

    def cells(step):  # every token's number in a step's grid, in token order (the prefix tokens, then the patches)
        return [text.split("\n")[-1] for text in steps.nth(step).locator(".vd-token").all_inner_texts()]

    def rows(step):
        return [row.locator("span").all_inner_texts() for row in steps.nth(step).locator(".vd-vector").all()]

    def labels(step):
        return [text.split("\n")[0] for text in steps.nth(step).locator(".vd-term").all_inner_texts()]

    def worked(step):
        return steps.nth(step).locator(".vd-worked").inner_text()

    names = [text.split("\n")[0] for text in steps.nth(1).locator("span.vd-token").all_inner_texts()]  # [CLS]...
    prefix = len(names)

    def index(name):
        return names.index(name) if name in names else prefix + int(name.removeprefix("patch "))

    # Scores: the query of the patch times the key of the token it matches best, term by term, then ÷ √Dh.
    [query_row], [key_row, *_] = rows(0), rows(1)
    shown_scores = cells(1)
    best = int(np.argmax(scores))
    assert len(query_row) == len(key_row) == Dh and len(shown_scores) == T
    assert float(shown_scores[best]) == max(map(float, shown_scores))  # the best match, as the grid shows it
    name = f"patch {best - prefix}" if best >= prefix else names[best]
    assert labels(1)[0].startswith(f"The key of {name}{' itself' if best == prefix + patch else ''}, the token ")
    line = re.fullmatch(r"Patch (\d+)'s query times (.+?) key: (.+) \+ … \((\d+) terms in all\) = (-?[\d.]+), and "
                        r"(-?[\d.]+) ÷ ([\d.]+) \(√(\d+)\) ([=≈]) (-?[\d.]+)\.", worked(1))
    assert line, worked(1)
    asker, whose, terms, count, dot, dot_again, root, under, sign, score = line.groups()
    assert int(asker) == patch and whose == ("its own" if best == prefix + patch else f"{name}'s")
    assert int(count) == int(under) == Dh and dot_again == dot
    terms = [term.split(" × ") for term in terms.split(" + ")]
    assert len(terms) == 3
    for d, (q, k) in enumerate(terms):  # the query's and the key's first numbers, to 3 significant digits
        for shown, truth, row in ((q, query[d], query_row), (k, keys[best, d], key_row)):
            assert _is(shown, truth) and (_significant(shown) >= 3 or abs(truth) < 1e-4), (shown, truth)
            assert abs(_number(row[d]) - _number(shown)) <= 0.05 + _half_unit(shown) + 1e-9  # (the row: 1 decimal)
    assert _is(dot, float(query @ keys[best])) and _is(root, math.sqrt(Dh)) and _is(score, scores[best])
    assert _half_unit(score) <= 0.0005  # (e^score to 0.05%: enough for the weight's tenth of a percent)
    calculated = _number(dot) / _number(root)  # (the rounding: the dot product's, then the root's)
    _worked_out(sign, calculated, score, (_half_unit(dot) + calculated * _half_unit(root)) / _number(root))
    assert abs(_number(shown_scores[best]) - _number(score)) <= _half_unit(shown_scores[best]) + _half_unit(score)
    # Softmax: e^score over their sum, the score as the scores line shows it; percentages that add up to 100%.
    shares = cells(2)
    assert len(shares) == T and all(re.fullmatch(r"\d+\.\d%", s) for s in shares), shares
    assert sum(round(10 * float(s[:-1])) for s in shares) == 1000  # 100.0%, to the tenth
    assert all(abs(float(s[:-1]) - 100 * w) <= 0.1 + 1e-9 for s, w in zip(shares, weights))
    line = re.fullmatch(r"(.+?)'s weight: e(-?[\d.]+) ÷ ([\d.,]+(?: × 10-?\d+)?) ([=≈]) ([\d.]+)%\.", worked(2))
    assert line, worked(2)
    whose, exponent, total, sign, share = line.groups()
    assert whose == name[0].upper() + name[1:] and exponent == score and f"{share}%" == shares[best]
    assert f"divided by their sum ({total})" in steps.nth(2).inner_text()
    truth = float(np.exp(scores).sum())
    if " × 10" in total:
        mantissa, power = total.split(" × 10")
        assert abs(float(mantissa) * 10 ** int(power) - truth) <= _half_unit(mantissa) * 10 ** int(power) * 1.000001
        total_value, total_rounding = float(mantissa) * 10 ** int(power), _half_unit(mantissa) * 10 ** int(power)
    else:
        assert _is(total, truth) and _significant(total) >= 4
        total_value, total_rounding = _number(total), _half_unit(total)
    calculated = 100 * math.exp(float(exponent)) / total_value
    _worked_out(sign, calculated, share, calculated * (2 * _half_unit(exponent) + total_rounding / total_value) + 0.1)
    # Values, mixed: the three most weighted tokens' values at their shown weights, the others' weighted values, and
    # the output's first number from them.
    terms, (others_label, output_label) = labels(3)[:3], labels(3)[3:]
    tenths = [round(10 * float(s[:-1])) for s in shares]
    mixed = []
    for label in terms:
        found = re.fullmatch(r"([\d.]+%) × (.+)'s value", label)
        assert found, label
        mixed.append((found[1], index(found[2])))
        assert shares[mixed[-1][1]] == found[1]
    assert min(tenths[j] for _, j in mixed) >= max(t for j, t in enumerate(tenths) if j not in {j for _, j in mixed})
    found = re.fullmatch(r"\+ the other (\d+) tokens' values, each times its weight \(([\d.]+)% in all\)",
                         others_label)
    assert found and int(found[1]) == T - 3, others_label
    assert round(10 * float(found[2])) == 1000 - sum(tenths[j] for _, j in mixed)  # the shown weights' rest
    assert output_label.startswith("= the output")
    line = re.fullmatch(r"The output's first number: (.+) ([=≈]) (-?[\d.]+)\.", worked(3))
    assert line, worked(3)
    terms, sign, first = line.groups()
    terms = terms.split(" + ")
    assert len(terms) == 4
    rest = set(range(T)) - {j for _, j in mixed}
    assert _is(terms[3], float(sum(weights[j] * values[j, 0] for j in rest))) and _is(first, output[0])
    calculated, rounding = _number(terms[3]), _half_unit(terms[3].strip("()"))
    for term, (weight, j) in zip(terms, mixed):
        shown_weight, shown_value = term.split(" × ")
        assert shown_weight == weight and _is(shown_value, values[j, 0])
        calculated += float(weight[:-1]) / 100 * _number(shown_value)
        rounding += 0.001 * abs(_number(shown_value)) + float(weight[:-1]) / 100 * _half_unit(shown_value.strip("()"))
    _worked_out(sign, calculated, first, rounding)


def test_how_attention_is_computed_checks_by_hand(own_site, browser):
    """Every worked step of "How attention is computed", for the digits, the photos and models of one's own (a [DIST]
    token; registers), read from the page as a visitor reads it and recomputed as with a calculator: the dot product's
    terms are the query's and the key's numbers, the score its sum ÷ √Dh, the weight e^score ÷ the shown sum, the
    percentages add up to 100%, and the output's first number is the shown values times the shown weights; "≈"
    where, and only where, the shown rounding hides the equality; every line names the token it is about."""
    # (layer, head, patch), 0-based: layer 4 head 1 and layer 1 head 3 of the digits as a visitor found them; patches
    # that match another patch best, themselves (digits 1/1/10), [CLS] (own 1/1/0) and [DIST] (own 1/2/5).
    cases = {"digit": [(3, 0, 16), (0, 2, 16), (0, 0, 10), (5, 1, 0), (1, 3, 48)],
             "photo": [(3, 0, 20), (0, 4, 0), (-1, -1, 63)], PREFIX: [(1, 2, 5), (0, 0, 0), (0, 1, 5), (1, 1, 15)],
             HEADLESS: [(0, 1, 7), (1, 2, 0)]}
    with serving(own_site) as (url, _), static_page(browser, url) as page:
        page.locator("#canvas .vd-examples button[title='example: 3']").click()
        for tab, chosen in cases.items():
            page.click(f"button[data-tab='{tab}']")
            page.wait_for_function(f"window.vdLive?.['{tab}']?.state", timeout=60_000)  # (its example read)
            page.locator(f"#{tab}-steps").scroll_into_view_if_needed()  # (asked for while on screen)
            for layer, head, patch in chosen:
                count = page.locator(f"#{tab}-steps select.vd-steps-layer option").count()
                heads = page.locator(f"#{tab}-steps select.vd-steps-head option").count()
                _check_the_worked_steps(page, tab, layer % count, head % heads, patch)
        assert page.console_errors == []


def test_the_models_tab_works_offline_and_fits_a_phone_and_a_projector(own_model, own_site, browser, tmp_path):
    """Its tab as the shipped ones: once the page says it works offline, with its file server stopped, it reads
    another photo and, reloaded, a third; in talk mode it fits 1280 x 720, and at a phone's 390 px nothing is wider
    than the screen."""
    from skimage import data

    photos = {}
    for name in ("astronaut", "coffee"):
        photos[name] = tmp_path / f"{name}.png"
        Image.fromarray(getattr(data, name)()).save(photos[name])
    clf = load_model(own_model, device="cpu")
    with serving(own_site) as (url, server), static_page(browser, url) as page:
        page.click(f"button[data-tab='{PREFIX}']")
        upload(page, photo(tmp_path))
        saved_for_offline(page)
        server.terminate()
        server.wait(timeout=10)
        upload(page, photos["astronaut"])
        assert page.evaluate(f"JSON.parse(window.vdLive['{PREFIX}'].numbers())")["label"] == clf.predict(
            photos["astronaut"]).label
        page.reload()
        page.wait_for_selector("#canvas canvas.vd-draw[data-ready]", timeout=30_000)  # (the page's scripts are up)
        page.click(f"button[data-tab='{PREFIX}']")
        upload(page, photos["coffee"])
        assert page.evaluate(f"JSON.parse(window.vdLive['{PREFIX}'].numbers())")["label"] == clf.predict(
            photos["coffee"]).label
        assert page.outside_requests == [] and page.console_errors == []
    with serving(own_site) as (url, _), static_page(browser, url, 1280, 720, "index.html?view=talk") as page:
        page.click(f"button[data-tab='{PREFIX}']")
        upload(page, photos["coffee"])
        for part in (f"#{PREFIX}-input", f"#{PREFIX}-label", f"#{PREFIX}-first canvas", f"#{PREFIX}-map"):
            box = page.locator(part).bounding_box()
            assert box is not None and box["y"] + box["height"] <= 720, part
        assert small_texts(page) == []
    with serving(own_site) as (url, _), static_page(browser, url, 390, 844) as page:
        page.click(f"button[data-tab='{PREFIX}']")
        upload(page, photos["coffee"])
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for part in (f"#{PREFIX}-label", f"#{PREFIX}-first canvas"):
            box = page.locator(part).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, part


def test_a_folder_that_is_no_weights_folder_is_refused_in_one_line(tmp_path):
    result = run_cli("static", str(tmp_path / "site"), "--model", str(tmp_path))
    assert result.returncode == 2 and result.stdout == "" and not (tmp_path / "site").exists()
    assert result.stderr.startswith("error: ") and "no config.json there" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    app = subprocess.run([sys.executable, "app.py", "--model", str(tmp_path)], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "GRADIO_SERVER_PORT": str(free_port())})
    assert app.returncode == 1 and "no config.json there" in app.stderr and "Traceback" not in app.stderr


def test_the_app_answers_for_a_model_of_ones_own(own_model, headless_model, monkeypatch, tmp_path):
    # What app.py --model DIR serves beside the page (service.add_model): /classify, and the server's forward pass
    # (?model=server) running the model's own graph.
    from vit_demo.app import api, forward, service

    monkeypatch.setattr(service, "ADDED", {})
    assert service.add_model(own_model) == "own_vit" and service.models() == ("mnist", "cifar10", "own_vit")
    path = photo(tmp_path)
    expected = load_model(own_model, device="cpu").predict(path)
    answer = api.classify(str(path), "own_vit")
    assert answer["label"] == expected.label and answer["confidence"] == pytest.approx(expected.confidence, abs=1e-4)
    image = {"shape": [1, 3, 64, 64], "data": base64.b64encode(np.zeros(3 * 64 * 64, "<f4")).decode()}
    minus_one = {"shape": [1], "data": base64.b64encode(np.array([-1], "<f4")).decode()}  # the query: rollout's peak
    reply = forward.forward({"model": "own_vit", "graph": "model.onnx", "outputs": ["logits"],
                             "inputs": {"image": image, "heads_off": {"shape": [2, 3], "data": "A" * 32},
                                        "mean_ablation": {"shape": [1], "data": "AAAAAA=="}, "query": minus_one}})
    assert "error" not in reply and reply["outputs"]["logits"]["shape"] == [1, len(CLASSES)]
    # The page reads it (the app's server would for a model of over description.SERVER_FIRST_MACS: ViT-B's size), on
    # WebAssembly (WebGPU, where the browser offers a GPU, for one of over GPU_FIRST_MACS: ViT-Ti's at 224 pixels).
    from vit_demo.page import description

    found = description.description("own_vit", "", "", "models/own_vit/")
    assert (found["serverFirst"], found["gpu"]) == (False, False)
    monkeypatch.setattr(description, "SERVER_FIRST_MACS", 0)
    monkeypatch.setattr(description, "GPU_FIRST_MACS", 0)
    found = description.description("own_vit", "", "", "models/own_vit/")
    assert (found["serverFirst"], found["gpu"]) == (True, True)
    # A model without a head: no answer to give, said in one line; its graph gives its attention.
    assert service.add_model(headless_model) == "own_dino"
    assert "without a classification head" in api.classify(str(path), "own_dino")["error"]
    reply = forward.forward({"model": "own_dino", "graph": "model.onnx", "outputs": ["cls_attention"],
                             "inputs": {"image": image, "heads_off": {"shape": [2, 3], "data": "A" * 32},
                                        "mean_ablation": {"shape": [1], "data": "AAAAAA=="}, "query": minus_one}})
    assert reply["outputs"]["cls_attention"]["shape"] == [1, 2, 3, 19]
    with pytest.raises(service.WeightsError, match="served already"):
        service.add_model(shutil.copytree(own_model, tmp_path / own_model.name))  # another folder of that name
    assert service.add_model(own_model) == "own_vit"  # the same again: nothing changes


def test_the_space_bundle_carries_a_model_of_ones_own_and_the_app_finds_it(own_model, tmp_path, monkeypatch):
    from vit_demo.app import service

    bundle = tmp_path / "space"
    result = run_cli("space", str(bundle), "--model", str(own_model))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (bundle / "weights" / "own_vit").iterdir()) == sorted(
        p.name for p in own_model.iterdir())
    monkeypatch.setenv(service.WEIGHTS_ENV, str(bundle / "weights"))
    assert service.weights_root_models() == [bundle / "weights" / "own_vit"]  # what the Space's app.py serves
    refused = run_cli("space", str(tmp_path / "other"), "--model", str(REPO / "weights" / "mnist"))
    assert refused.returncode == 2 and "is a shipped model's name" in refused.stderr
