"""A tab's source, the one producer of every view's numbers (vit_demo/page/assets/page/source.js, its graphs run by the
page's onnxruntime-web under Node: tests/page_source.mjs), against Python's for the same image: a drawing read as the
canvas sends it, the example a tab starts with, another patch, another class, a training snapshot, an unfamiliar
photo; and what it says of what it can't read."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch
from conftest import (PHOTOS, canvas_ink, map_levels, node_major, page_source, read_live_grid, read_live_map,
                      read_live_payload)
from PIL import Image

from vit_demo.app import service
from vit_demo.classifier import Prediction
from vit_demo.interpret import explain
from vit_demo.page.captions import image_text
from vit_demo.page.layout import LARGE
from vit_demo.data.outside_photos import outside_photos
from vit_demo.data.preprocess import preprocess_drawing
from vit_demo.interpret import calibration
from vit_demo.pictures import render
from vit_demo.weights import WEIGHTS_ROOT, read_calibration

pytestmark = pytest.mark.skipif(node_major() < 20, reason="the page's modules run under Node 20 or later, which is not "
                                                          "on the PATH")
SEVEN = [[(25, 20), (85, 20), (45, 95)]]


def canvas_value(strokes) -> str:
    """What the browser canvas hands its source, its ink's bytes, as tests/page_source.mjs takes them: base64."""
    return base64.b64encode(canvas_ink(strokes).tobytes()).decode()


def drawn(strokes) -> Prediction:
    """A drawing as Python reads the canvas' bytes, analysed."""
    return service.classifier("mnist").predict_preprocessed([preprocess_drawing(canvas_ink(strokes))])[0]


@pytest.fixture(scope="module")
def digit(tmp_path_factory) -> dict:
    """The page's answers for a drawn seven (and the calls around it), in one Node process."""
    seven = canvas_value(SEVEN)
    pixels = image_text(drawn(SEVEN).input)
    calls = {
        "stroke": ("stroke", {"drawing": seven}),
        "reading": ("stroke", {"drawing": seven, "views": False}),
        "cleared": ("stroke", {"drawing": ""}),
        "blank": ("stroke", {"drawing": canvas_value([])}),
        "too short": ("stroke", {"drawing": base64.b64encode(b"123").decode()}),
        "query 19": ("query", {"image": pixels, "patch": 19}),
        "query 49": ("query", {"image": pixels, "patch": 49}),
        "query '3'": ("query", {"image": pixels, "patch": "3"}),
        "query short": ("query", {"image": pixels[:40], "patch": 3}),
        "why 8": ("relevance", {"image": pixels, "label": "8"}),
        "why 7": ("relevance", {"image": pixels, "label": "7"}),
        "why eleven": ("relevance", {"image": pixels, "label": "eleven"}),
        "snapshot 1": ("snapshot", {"image": pixels, "position": 1}),
        "snapshot 5": ("snapshot", {"image": pixels, "position": 5}),
        "snapshot 7": ("snapshot", {"image": pixels, "position": 7}),
        "example": ("example", None),
    }
    found = page_source("mnist", list(calls.values()), tmp_path_factory.mktemp("digit"))
    return dict(zip(calls, found["answers"]))


def test_a_drawing_is_answered_once_with_every_views_numbers(digit):
    answer = digit["stroke"]
    assert answer["classes"][int(np.argmax(answer["probs"]))] == "7" and answer["label"] == "7"
    assert answer["notice"] == ""  # a digit is nothing to warn about
    assert "ms in this page" in answer["info"]
    # The prediction and every view's numbers in one answer, which draw what the server would draw.
    numbers = json.dumps(answer)
    analysis = drawn(SEVEN)
    image, maps = read_live_payload(numbers)
    np.testing.assert_allclose(image, analysis.input, atol=1e-6)  # exactly what the model read (8-bit, as MNIST)
    assert maps.shape == (6, 5, 7, 7) and image.shape == (28, 28)
    np.testing.assert_allclose(maps * 255, map_levels(analysis.attention), atol=1)
    for layer, head, column in ((6, None, 4), (2, 2, 2)):
        served = np.asarray(render.overlay(analysis.input, explain.cls_attention_map(analysis.attention, layer - 1,
                                                                                      head), LARGE), dtype=float)
        from_numbers = np.asarray(render.overlay(image, maps[layer - 1, column], LARGE), dtype=float)
        assert np.abs(served - from_numbers).mean() < 1.0  # levels of 255: quantising the map to uint8
    rollout = explain.attention_rollout(analysis.attention)
    patch = explain.first_query_patch(rollout)
    assert answer["label"] == "7" and answer["patch"] == patch
    assert answer["classes"] == list(analysis.probs)
    for prob, exact in zip(answer["probs"], analysis.probs.values()):
        assert prob == pytest.approx(exact, abs=1e-5)
    np.testing.assert_allclose(read_live_map(answer["rollout"]), rollout / rollout.max(), atol=1 / 255 + 1e-9)
    np.testing.assert_allclose(answer["rollout"], rollout.ravel(), atol=1e-5)  # the map itself, before it is scaled
    # Where the first query patch looks: its maps' numbers, as render.attention_grid would show them.
    query = answer["query"]
    np.testing.assert_allclose(read_live_grid(query, (6, 5, 7, 7)) * 255, map_levels(analysis.attention, 1 + patch),
                               atol=1)
    assert f"Where patch {patch} looks" in query["title"]


def test_while_the_pen_is_down_the_prediction_alone(digit):
    reading = digit["reading"]
    assert reading["reading"] is True and reading["label"] == "7" and set(reading) == {"reading", "label", "probs",
                                                                                       "classes", "notice", "info"}
    assert "the views follow when the pen lifts" in reading["info"]


def test_blank_and_cleared_canvas_guess_nothing(digit):
    described_prompt = digit["cleared"]["message"]
    assert digit["blank"] == {"message": described_prompt}  # (page_source's prompt: "")
    too_short = digit["too short"]
    assert list(too_short) == ["message"] and "the drawing must be 112x112 bytes" in too_short["message"]


def test_another_patch_from_the_pages_pixels(digit):
    analysis, reply = drawn(SEVEN), digit["query 19"]
    assert reply["patch"] == 19 and "Where patch 19 looks" in reply["title"]
    np.testing.assert_allclose(read_live_grid(reply, (6, 5, 7, 7)) * 255, map_levels(analysis.attention, 20), atol=1)
    # A request the page would never send gets a reason, not a traceback.
    for name, why in (("query 49", "numbered 0 to 48"), ("query '3'", "no patch"), ("query short", "bytes")):
        assert why in digit[name]["error"], name


def test_why_this_class_and_why_not_another(digit):
    analysis, clf = drawn(SEVEN), service.classifier("mnist")
    eight, seven = digit["why 8"], digit["why 7"]
    assert eight["title"].startswith("<b>Why not 8?</b>") and "the model says <b>7</b>" in eight["title"]
    assert seven["title"].startswith("<b>Why 7?</b>")
    for reply, label in ((eight, "8"), (seven, "7")):  # the Python API's map for that class
        exact = clf.relevance_preprocessed([analysis.input], [label])[0]
        np.testing.assert_allclose(read_live_map(reply), exact / exact.max(), atol=1 / 255 + 1e-6)
    assert not np.array_equal(read_live_map(seven), read_live_map(eight))
    assert "no class" in digit["why eleven"]["error"]


def test_the_training_slider_shows_the_model_as_it_was(digit):
    run = service.training_run("mnist")
    analysis = drawn(SEVEN)
    first = digit["snapshot 1"]
    assert first["note"].startswith(f"<b>Epoch 1 of {run.epochs}</b>")
    assert f"{100 * run.snapshots[0].test_accuracy:.2f}%" in first["note"]
    # What that snapshot said, calibrated with its own temperature (the run fitted one per snapshot).
    snapshot = run.snapshots[0]
    assert snapshot.temperature != 1.0
    with torch.no_grad():
        found = snapshot.model.forward_activations(service.classifier("mnist").batch([analysis.input]), attention=True)
        said, attention = found.logits, found.attention
    probs = calibration.probabilities(said[0], snapshot.temperature)
    assert f"({100 * float(probs.max()):.1f}%)" in first["note"]
    first_maps, later_maps = (read_live_grid(digit[name], (6, 5, 7, 7)) for name in ("snapshot 1", "snapshot 5"))
    assert not np.array_equal(first_maps, later_maps)  # the attention changed as it trained
    np.testing.assert_allclose(first_maps * 255, map_levels(attention[0].numpy()), atol=1)
    # The last position is the trained model, whose grid the page draws from the tab's numbers.
    assert f"numbered 1 to {len(run.snapshots)}" in digit["snapshot 7"]["error"]


def test_a_tab_starts_with_its_example(digit):
    example = digit["example"]  # page_source's: the digit 2 of examples/
    expected = service.classifier("mnist").predict(PHOTOS.parent / "digits" / "2.png")
    assert example["label"] == expected.label == "2" and example["info"].startswith("An example: <b>2</b>")
    np.testing.assert_allclose(read_live_payload(json.dumps(example))[0], expected.input, atol=1e-6)


def test_an_unfamiliar_photo_is_flagged_and_says_how_often_such_photos_read_right(tmp_path):
    moon = tmp_path / "moon.png"  # no CIFAR-10 class, and flagged
    Image.fromarray(dict(outside_photos())["moon.png"]).save(moon)
    flagged, ship = (page_source("cifar10", [("example", None)], tmp_path, example=path)["answers"][0]
                     for path in (moon, PHOTOS / "ship.png"))
    analysis = service.classifier("cifar10").predict(moon)
    report = read_calibration(WEIGHTS_ROOT / "cifar10")["unfamiliar"]
    assert "unlike the photos the model knows" in flagged["notice"]
    assert f"reads {100 * report['accuracy_on_flagged']:.0f}% right" in flagged["notice"]
    assert analysis.unfamiliar and flagged["label"] == analysis.label
    # A guess, said to be one, with no percentage that would read as a sure answer.
    assert flagged["info"].startswith("No percentage: the model cannot read this image") and "%" not in flagged["info"]
    assert ship["info"] == "An example: <b>ship</b>."
    image, _ = read_live_payload(json.dumps(flagged))
    assert image.shape == (32, 32, 3)
    np.testing.assert_allclose(image, analysis.input, atol=1e-6)
    assert ship["notice"] == "" and ship["label"] == "ship"
