"""The app's HTTP API for scripts, /classify and /export, through gradio_client against the running server."""

import numpy as np
import pytest
from conftest import PHOTOS, draw_digit
from gradio_client import Client, handle_file
from PIL import Image, ImageSequence

from vit_demo import load_model
from vit_demo.data import sketches
from vit_demo.data.outside_photos import outside_photos
from vit_demo.weights import WEIGHTS_ROOT

HAS_CIFAR = (WEIGHTS_ROOT / "cifar10" / "config.json").is_file()


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def export(client, path, model="mnist", view="grid", layer=None, head="mean", label="", patch=None) -> str:
    return client.predict(handle_file(str(path)), model, view, layer, head, label, patch, api_name="/export")


@pytest.mark.parametrize("digit", ["0", "3", "7"])
def test_export_draws_a_view_of_a_drawing_for_a_slide(client, tmp_path, digit):
    path = tmp_path / f"{digit}.png"
    draw_digit(digit, 600, (100, 80, 420), 0.08).save(path)
    grid = export(client, path)
    assert grid.endswith(f"mnist-{digit}-cls-grid.png") and Image.open(grid).width >= 1600
    layer = export(client, path, view="layer", layer=2, head="3")
    assert layer.endswith(f"mnist-{digit}-layer2-head3.png") and Image.open(layer).size == (1600, 1600)
    why_not = export(client, path, view="relevance", label="8")
    assert why_not.endswith(f"mnist-{digit}-relevance-8.png")
    assert export(client, path, view="query", patch=12).endswith(f"mnist-{digit}-patch12-grid.png")
    gif = export(client, path, view="gif")
    with Image.open(gif) as frames:
        assert gif.endswith(f"mnist-{digit}-layers-mean.gif") and len(list(ImageSequence.Iterator(frames))) == 6


def test_export_says_what_it_cannot_draw(client, tmp_path):
    seven, bad = tmp_path / "seven.png", tmp_path / "notes.png"
    draw_digit("7", 300, (20, 20, 260), 0.08).save(seven)
    bad.write_text("this is not an image")
    for given, why in (({"path": bad}, "Can't read this image: this file is not an image"),
                       ({"view": "everything"}, "there is no view 'everything'"),
                       ({"view": "layer", "layer": 9}, "the layer must be 1 to 6"),
                       ({"view": "layer", "head": "5"}, "the head must be 1 to 4, or mean"),
                       ({"view": "relevance", "label": "cat"}, "there is no class 'cat'"),
                       ({"view": "query", "patch": 99}, "the patch must be 0 to 48"),
                       ({"model": "imagenet"}, "Unknown model 'imagenet'")):
        with pytest.raises(Exception, match=why):
            export(client, **{"path": seven, **given})
    assert export(client, seven).endswith("mnist-7-cls-grid.png")  # the server keeps serving


@pytest.mark.skipif(not HAS_CIFAR, reason="the CIFAR-10 weights are not there")
def test_export_draws_a_photo_too(client):
    ship = export(client, PHOTOS / "ship.png", "cifar10", view="rollout")
    assert ship.endswith("cifar10-ship-rollout.png") and Image.open(ship).size == (1600, 1600)


def test_oversized_upload_is_refused_and_the_server_keeps_serving(client, tmp_path):
    from vit_demo.data.preprocess import MAX_FILE_BYTES

    huge = tmp_path / "huge.png"
    huge.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(MAX_FILE_BYTES + 1024))
    with pytest.raises(ValueError, match="exceeds the maximum file size"):
        client.predict(handle_file(str(huge)), "cifar10", api_name="/classify")
    good = tmp_path / "seven.png"
    draw_digit("7", 300, (20, 20, 260), 0.08).save(good)
    assert client.predict(handle_file(str(good)), "mnist", api_name="/classify")["label"] == "7"


def test_a_full_queue_answers_busy_try_again_and_the_server_keeps_serving(busy_app):
    from gradio_client.utils import QueueError

    with pytest.raises(QueueError, match="Queue is full! Please try again."):
        busy_app.client.predict(handle_file(str(busy_app.seven)), "mnist", api_name="/classify")
    busy_app.release.set()
    assert [job.result(timeout=60)["label"] for job in busy_app.jobs] == ["7"] * len(busy_app.jobs)
    assert busy_app.client.predict(handle_file(str(busy_app.seven)), "mnist", api_name="/classify")["label"] == "7"


def test_classify_answers_json_for_both_models(client, tmp_path):
    seven = tmp_path / "seven.png"
    draw_digit("7", 300, (20, 20, 260), 0.08).save(seven)
    answer = client.predict(handle_file(str(seven)), "mnist", api_name="/classify")
    assert answer["label"] == "7" and answer["confidence"] == answer["probs"]["7"] > 0.5
    assert list(answer["probs"]) == [str(d) for d in range(10)] and sum(answer["probs"].values()) == pytest.approx(1)
    assert answer["confidence"] == pytest.approx(load_model("mnist", device="cpu").predict(str(seven)).confidence)
    assert answer["unfamiliar"] is False
    hashes = tmp_path / "hash.png"  # a "#", drawn as a visitor draws it: no digit
    make = dict(sketches.non_digit_kinds())["hash/#"]
    Image.fromarray(255 - sketches.canvas_drawing(make(None), np.random.default_rng(4))).save(hashes)
    assert client.predict(handle_file(str(hashes)), "mnist", api_name="/classify")["unfamiliar"] is True
    if HAS_CIFAR:
        ship = PHOTOS / "ship.png"
        answer = client.predict(handle_file(str(ship)), "cifar10", api_name="/classify")
        assert answer["label"] == "ship" and set(answer) == {"label", "confidence", "probs", "unfamiliar"}
        assert answer["unfamiliar"] is False
        moon = tmp_path / "moon.png"
        Image.fromarray(dict(outside_photos())["moon.png"]).save(moon)
        assert client.predict(handle_file(str(moon)), "cifar10", api_name="/classify")["unfamiliar"] is True


def test_classify_says_what_is_wrong(client, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("this is not an image")
    white = tmp_path / "white.png"
    Image.new("RGB", (64, 64), "white").save(white)
    assert client.predict(handle_file(str(bad)), "mnist", api_name="/classify")["error"].startswith(
        "Can't read this image: this file is not an image")
    assert "blank" in client.predict(handle_file(str(white)), "mnist", api_name="/classify")["error"]
    assert "Unknown model 'imagenet'" in client.predict(handle_file(str(white)), "imagenet", api_name="/classify")["error"]
    if HAS_CIFAR:  # a one-colour photo is blank, not a confident label
        assert client.predict(handle_file(str(white)), "cifar10", api_name="/classify") == {
            "error": "Nothing to classify: the image is one flat colour."}


def test_the_api_page_names_every_parameter(app_url):
    """The API page (/gradio_api/info, which "Use via API" shows) lists the two endpoints, each parameter with a
    name a user can read, not Gradio's "parameter_86"."""
    import json
    import urllib.request

    with urllib.request.urlopen(app_url.rstrip("/") + "/gradio_api/info", timeout=30) as answer:
        info = json.loads(answer.read())
    assert sorted(info["named_endpoints"]) == ["/classify", "/export"]
    assert info["unnamed_endpoints"] == {}
    labels = {name: [p["label"] for p in e["parameters"]] for name, e in info["named_endpoints"].items()}
    assert labels == {"/classify": ["image", "model"],
                      "/export": ["image", "model", "view", "layer", "head", "label", "patch"]}
