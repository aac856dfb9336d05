"""The app's two API endpoints, through gradio_client against the running server."""

import numpy as np
import pytest
from conftest import PHOTOS, draw_digit, sketch
from gradio_client import Client, handle_file
from PIL import Image

from vit_demo import load_model
from vit_demo.data import sketches
from vit_demo.data.outside_photos import outside_photos
from vit_demo.weights import WEIGHTS_ROOT


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


@pytest.mark.parametrize("digit", ["0", "3", "4", "7"])
def test_predict_digit_reads_clear_digits_and_returns_pictures(client, tmp_path, digit):
    path = tmp_path / f"{digit}.png"
    draw_digit(digit, 600, (100, 80, 420), 0.08).save(path)
    label, info, patches, cls_grid, selected, rollout, query, query_note, relevance, relevance_note = client.predict(
        sketch(path), api_name="/predict_digit")
    assert label["label"] == digit
    assert label["confidences"][0]["label"] == digit and label["confidences"][0]["confidence"] > 0.5
    assert "on `cpu`" in info and "ms" in info
    sizes = {name: Image.open(picture).size for name, picture in
             (("patches", patches), ("cls_grid", cls_grid), ("selected", selected), ("rollout", rollout),
              ("query", query), ("relevance", relevance))}
    assert sizes["patches"] == sizes["selected"] == sizes["rollout"] == sizes["relevance"] == (336, 336)
    assert sizes["cls_grid"][0] > 400 and sizes["query"] == sizes["cls_grid"]
    assert "Where patch" in query_note and relevance_note.startswith(f"### Why {digit}?")


def test_predict_digit_on_a_blank_canvas_guesses_nothing(client, tmp_path):
    path = tmp_path / "blank.png"
    Image.new("RGB", (400, 400), "white").save(path)
    label, info, *pictures, query_note, relevance, relevance_note = client.predict(sketch(path), api_name="/predict_digit")
    assert label is None or not label.get("label")
    assert "Draw a digit" in info
    assert all(p is None for p in [*pictures, relevance])


def test_bad_files_get_a_clear_error_and_the_server_keeps_serving(client, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("this is not an image")
    # The reason comes as the answer, in place of a prediction (in a batch, it fails no one else's request).
    label, info, *pictures, query_note, relevance, relevance_note = client.predict(sketch(bad), api_name="/predict_digit")
    assert not label and info.startswith("Can't read this image") and all(p is None for p in [*pictures, relevance])
    if (WEIGHTS_ROOT / "cifar10" / "config.json").is_file():
        label, info, *pictures, query_note, relevance, relevance_note = client.predict(handle_file(str(bad)),
                                                                                      api_name="/predict_image")
        assert not label and info.startswith("Can't read this image: this file is not an image")
        assert all(p is None for p in [*pictures, relevance])
    good = tmp_path / "one.png"
    draw_digit("1", 300, (20, 20, 260), 0.1).save(good)
    assert client.predict(sketch(good), api_name="/predict_digit")[0]["label"] == "1"


def test_predict_image(client):
    photo = PHOTOS / "ship.png"
    if not (WEIGHTS_ROOT / "cifar10" / "config.json").is_file():
        # Until the CIFAR-10 weights exist, the endpoint says so plainly instead of failing.
        label, info, *pictures, query_note, relevance, relevance_note = client.predict(handle_file(str(photo)),
                                                                                      api_name="/predict_image")
        assert label is None or not label.get("label")
        assert info.startswith("weights/cifar10/config.json not found. Make it with: python train.py --dataset cifar10")
        assert all(p is None for p in [*pictures, relevance])
        return
    label, info, patches, *_, relevance, relevance_note = client.predict(handle_file(str(photo)),
                                                                        api_name="/predict_image")
    assert label["label"] == "ship"
    assert Image.open(patches).size == Image.open(relevance).size == (336, 336)
    assert relevance_note.startswith("### Why ship?")


def test_oversized_upload_is_refused_and_the_server_keeps_serving(client, tmp_path):
    from vit_demo.data.preprocess import MAX_FILE_BYTES

    huge = tmp_path / "huge.png"
    huge.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(MAX_FILE_BYTES + 1024))
    with pytest.raises(ValueError, match="exceeds the maximum file size"):
        client.predict(handle_file(str(huge)), api_name="/predict_image")
    good = tmp_path / "seven.png"
    draw_digit("7", 300, (20, 20, 260), 0.08).save(good)
    assert client.predict(sketch(good), api_name="/predict_digit")[0]["label"] == "7"


def test_a_full_queue_answers_busy_try_again_and_the_server_keeps_serving(busy_app):
    from gradio_client.utils import QueueError

    with pytest.raises(QueueError, match="Queue is full! Please try again."):
        busy_app.client.predict(sketch(busy_app.seven), api_name="/predict_digit")
    busy_app.release.set()
    assert [job.result(timeout=60)[0]["label"] for job in busy_app.jobs] == ["7"] * len(busy_app.jobs)
    assert busy_app.client.predict(sketch(busy_app.seven), api_name="/predict_digit")[0]["label"] == "7"


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
    if (WEIGHTS_ROOT / "cifar10" / "config.json").is_file():
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
    if (WEIGHTS_ROOT / "cifar10" / "config.json").is_file():
        assert client.predict(handle_file(str(white)), "cifar10", api_name="/classify") == {
            "error": "Nothing to classify: the image is one flat colour."}
        # The photo endpoint answers a one-colour photo as blank, not with a confident label.
        label, info, *_ = client.predict(handle_file(str(white)), api_name="/predict_image")
        assert not label and "nothing to classify" in info


def test_the_api_page_names_every_parameter(app_url):
    """The API page (/gradio_api/info, which "Use via API" shows) lists the three endpoints, each parameter with a
    name a user can read, not Gradio's "parameter_86"."""
    import json
    import urllib.request

    with urllib.request.urlopen(app_url.rstrip("/") + "/gradio_api/info", timeout=30) as answer:
        info = json.loads(answer.read())
    assert sorted(info["named_endpoints"]) == ["/classify", "/predict_digit", "/predict_image"]
    assert info["unnamed_endpoints"] == {}
    labels = {name: [p["label"] for p in e["parameters"]] for name, e in info["named_endpoints"].items()}
    assert labels == {"/classify": ["image", "model"], "/predict_digit": ["drawing"], "/predict_image": ["photo"]}
