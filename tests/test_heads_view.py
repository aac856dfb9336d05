"""What each head does, in the app (vit_demo/app/heads_view.py): the knockout, lens and patching server functions
called as the page calls them, the importance file the Inside tab reads, and its command."""

import base64
import json
import shutil

import numpy as np
import pytest
import torch
from conftest import read_live_map

from vit_demo import cli
from vit_demo.app import heads_view, inside_tab, page_numbers, service
from vit_demo.interpret import heads
from vit_demo.pictures import figures
from vit_demo.weights import CONFIG_FILE, HEAD_IMPORTANCE_FILE, HEAD_MEANS_FILE, WEIGHTS_FILE, WEIGHTS_ROOT

EXAMPLES = WEIGHTS_ROOT.parent / "examples"


@pytest.fixture(scope="module")
def three():
    return service.analyse("mnist", EXAMPLES / "digits" / "3.png")


@pytest.fixture(scope="module")
def eight():
    return service.analyse("mnist", EXAMPLES / "digits" / "8.png")


def pixels(analysis) -> str:
    """An image as the page keeps it and sends it back."""
    return page_numbers.image_text(analysis.input)


def levels(text: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), np.uint8).reshape(shape)


def test_nothing_off_is_the_intact_answer(three):
    reply = heads_view.ask_knockout("mnist")({"image": pixels(three), "off": [], "mode": "mean"})
    assert reply["key"] == page_numbers.image_key(three.input) and reply["off"] == []
    assert reply["label"] == reply["intact"]["label"] == reply["predicted"] == three.label == "3"
    for name, p in three.probs.items():
        assert reply["probs"][name] == pytest.approx(p, abs=1e-6)  # calibrated, as the prediction view shows them
    assert reply["logit_diff"]["intact"] == reply["logit_diff"]["ablated"] > 0
    # The maps the views redraw from: the stroke's own, exactly.
    np.testing.assert_array_equal(levels(reply["maps"], (6, 5, 7, 7)),
                                  page_numbers.quantise(page_numbers.grid_maps(three.attention)))
    np.testing.assert_allclose(read_live_map(reply["rollout"]), three.rollout / three.rollout.max(), atol=0.5 / 255 + 1e-6)
    assert len(json.dumps(reply)) < 4000


@pytest.mark.parametrize("mode", ["mean", "zero"])
def test_a_head_off_moves_the_logit_difference_as_heads_knockout_says(three, mode):
    off = [[2, 1], [4, None]]  # head 2 of layer 3, and the whole of layer 5
    reply = heads_view.ask_knockout("mnist")({"image": pixels(three), "off": off, "mode": mode})
    assert reply["off"] == [[2, 1], [4, 0], [4, 1], [4, 2], [4, 3]] and reply["mode"] == mode
    clf = service.classifier("mnist")
    means = heads.read_head_means(clf.info.folder, clf.model) if mode == "mean" else None
    expected = heads.knockout(clf.model, clf.batch([three.input]), [(2, 1), (4, None)], means)
    assert reply["logit_diff"]["intact"] == pytest.approx(float(expected.logit_diff[0]), abs=1e-4)
    assert reply["logit_diff"]["ablated"] == pytest.approx(float(expected.ablated_logit_diff[0]), abs=1e-4)
    assert reply["logit_diff"]["ablated"] != pytest.approx(reply["logit_diff"]["intact"], abs=1e-3)
    assert reply["predicted"] == "3" and reply["runner_up"] == clf.classes[int(expected.runner_up[0])]
    assert "5 of 24 heads off" in reply["info"] and f"replaced by {mode}s" in reply["info"]
    # The ablated run's maps: a head's output first changes the attention of the layer after it.
    maps = levels(reply["maps"], (6, 5, 7, 7))
    intact = page_numbers.quantise(page_numbers.grid_maps(three.attention))
    np.testing.assert_array_equal(maps[:3], intact[:3])
    assert (maps[3:] != intact[3:]).any()


def test_the_query_relevance_and_lens_views_follow_the_heads_switched_off(three):
    """With heads off, the views that ask for their own numbers get the knocked-out model's: where a patch looks (its
    attention), why a class (relevance through the ablated model: a head switched off passes no gradient back) and
    the lens (whose last layer is the ablated model's own answer); without "off", the intact model's."""
    from vit_demo.app import attention_view, explanation_view

    off = [[2, 1], [4, None]]
    knocked = heads_view.ask_knockout("mnist")({"image": pixels(three), "off": off, "mode": "mean"})
    clf = service.classifier("mnist")
    means = heads.read_head_means(clf.info.folder, clf.model)
    run = heads.knockout(clf.model, clf.batch([three.input]), [(2, 1), (4, None)], means, attention=True)
    patch = 24
    query = attention_view.ask_query("mnist")
    ablated, intact = (query({"image": pixels(three), "patch": patch, **extra}) for extra in ({"off": off}, {}))
    np.testing.assert_array_equal(levels(ablated["maps"], (6, 5, 7, 7)), page_numbers.quantise(
        page_numbers.grid_maps(run.ablated_attention[0].numpy(), 1 + patch)))
    np.testing.assert_array_equal(levels(intact["maps"], (6, 5, 7, 7)), page_numbers.quantise(
        page_numbers.grid_maps(three.attention, 1 + patch)))
    relevance = explanation_view.ask_relevance("mnist")
    ablated, intact = (relevance({"image": pixels(three), "label": "3", **extra}) for extra in ({"off": off}, {}))
    with heads.switched_off(clf.model, [(2, 1), (4, None)], means):
        expected = clf.relevance_preprocessed([three.input], ["3"])[0]
    np.testing.assert_allclose(read_live_map(ablated), expected / expected.max(), atol=0.5 / 255 + 1e-6)
    np.testing.assert_allclose(read_live_map(intact), three.relevance / three.relevance.max(), atol=0.5 / 255 + 1e-6)
    assert np.abs(read_live_map(ablated) - read_live_map(intact)).max() > 0.05
    lens = heads_view.ask_lens("mnist")({"image": pixels(three), "off": off, "mode": "mean"})
    assert lens["layers"][-1]["label"] == knocked["label"]
    assert lens["layers"][-1]["probability"] == pytest.approx(knocked["probs"][knocked["label"]], abs=1e-4)
    # Outside the with, the model is whole again, on every thread.
    np.testing.assert_allclose(clf.predict_preprocessed([three.input])[0].attention, three.attention, atol=1e-6)
    assert "no head [9, 0]" in query({"image": pixels(three), "patch": patch, "off": [[9, 0]]})["error"]


def test_the_lens_strip_ends_with_the_models_answer(three, eight):
    for analysis in (three, eight):
        reply = heads_view.ask_lens("mnist")({"image": pixels(analysis)})
        assert reply["label"] == analysis.label and len(reply["layers"]) == 6 and reply["grid"] == 7
        last = reply["layers"][-1]
        assert last["label"] == analysis.label
        assert last["probability"] == last["answer"] == pytest.approx(analysis.probs[analysis.label], abs=1e-4)
        maps = levels(reply["maps"], (6, 7, 7))  # the probability of the answer per patch, 0..255 for 0..1
        expected = heads.lens_maps(service.classifier("mnist").model, torch.from_numpy(analysis.input)[None, None])[0]
        np.testing.assert_allclose(maps / 255, expected.numpy(), atol=0.5 / 255 + 1e-6)
        assert len(json.dumps(reply)) < 1000


@pytest.mark.slow
def test_the_patching_grids_both_ways(three, eight):
    ask = heads_view.ask_patching("mnist")
    reply = ask({"clean": pixels(three), "corrupt": pixels(eight)})
    assert reply["classes"] == ["3", "8"] and reply["residual"] is True
    assert reply["clean"] == page_numbers.image_key(three.input)
    assert reply["corrupt"] == page_numbers.image_key(eight.input)
    assert reply["logit_diff"]["clean"] > 0 > reply["logit_diff"]["corrupt"]
    for direction in ("clean_into_corrupt", "corrupt_into_clean"):
        assert np.asarray(reply[direction]["heads"]).shape == (6, 4)
        assert np.asarray(reply[direction]["residual"]).shape == (6, 50)
    # The residual stream after the last layer at [CLS] is all the classifier reads: patching it is the other run.
    assert reply["clean_into_corrupt"]["residual"][-1][0] == pytest.approx(1, abs=1e-3)
    assert reply["corrupt_into_clean"]["residual"][-1][0] == pytest.approx(0, abs=1e-3)
    # and at any other token after the last layer, nothing changes.
    assert np.abs(np.asarray(reply["clean_into_corrupt"]["residual"])[-1, 1:]).max() < 1e-3
    # The other way round is the same experiment read from the other side: c2c(3, 8) = 1 - c2c'(8, 3).
    back = ask({"clean": pixels(eight), "corrupt": pixels(three), "residual": False})
    assert back["classes"] == ["8", "3"] and "residual" not in back["corrupt_into_clean"]
    np.testing.assert_allclose(reply["clean_into_corrupt"]["heads"], 1 - np.asarray(back["corrupt_into_clean"]["heads"]),
                               atol=2e-3)
    grid = heads.patching_grid(service.classifier("mnist").model, torch.from_numpy(three.input)[None, None],
                               torch.from_numpy(eight.input)[None, None])
    np.testing.assert_allclose(reply["corrupt_into_clean"]["residual"], grid.corrupt_into_clean["residual"], atol=1e-3)


def test_an_image_patched_into_itself_is_no_experiment(three):
    reply = heads_view.ask_patching("mnist")({"clean": pixels(three), "corrupt": pixels(three)})
    assert "reads both images as class 3" in reply["error"]


@pytest.mark.parametrize("request_, why", [
    ({"off": [[6, 0]]}, "layers are 0 to 5"),
    ({"off": [[0, 4]]}, "heads 0 to 3"),
    ({"off": [[0]]}, "[layer, head] pair"),
    ({"off": [[True, 0]]}, "[layer, head] pair"),
    ({"off": [[None, 1]]}, "[layer, head] pair"),
    ({"off": "all"}, "'off' must be a list"),
    ({"off": [[0, 0]] * 25}, "at most 24"),
    ({"off": [], "mode": "max"}, "no ablation 'max'"),
    ({"off": [], "image": "@@"}, "base64"),
    ({"off": [], "image": base64.b64encode(b"123").decode()}, "bytes"),
])
def test_a_bad_knockout_request_gets_a_reason(three, request_, why):
    reply = heads_view.ask_knockout("mnist")({"image": pixels(three), **request_})
    assert list(reply) == ["error"] and why in reply["error"]


def test_bad_lens_and_patching_requests_get_a_reason(three):
    assert "JSON object" in heads_view.ask_lens("mnist")("the lens")["error"]
    assert "bytes" in heads_view.ask_lens("mnist")({"image": None})["error"]
    ask = heads_view.ask_patching("mnist")
    for request, why in (("two images", "JSON object"), ({"clean": pixels(three)}, "bytes"),
                         ({"clean": pixels(three), "corrupt": pixels(three)[:20]}, "bytes"),
                         ({"clean": pixels(three), "corrupt": pixels(three), "residual": "yes"}, "true or false")):
        assert why in ask(request)["error"], request


def test_without_stored_means_heads_are_zero_ablated_only(three, monkeypatch):
    monkeypatch.setattr(service, "ablation_means", lambda model: None)
    ask = heads_view.ask_knockout("mnist")
    assert "can only be zero-ablated" in ask({"image": pixels(three), "off": [[0, 0]], "mode": "mean"})["error"]
    assert ask({"image": pixels(three), "off": [[0, 0]], "mode": "zero"})["mode"] == "zero"


def test_the_photos_residual_grid_waits_for_its_button():
    assert heads_view.residual_at_once(service.model_config("mnist"))
    assert not heads_view.residual_at_once(service.model_config("cifar10"))


def test_a_stroke_carries_none_of_it():
    """The pen's answer is as it was: nothing of the knockout, lens or patching is computed per stroke."""
    from test_ui import SEVEN, canvas_value
    from vit_demo.app import digit_tab

    answer = digit_tab.stroke({"drawing": canvas_value(SEVEN), "choice": None})
    assert not {"knockout", "lens", "patching"} & set(answer) and set(answer["answers"]) == {"rollout", "query",
                                                                                             "relevance"}


# ---- Head importance, kept beside the weights for the Inside tab ------------------------------------------------


def weights_copy(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name in (CONFIG_FILE, WEIGHTS_FILE, HEAD_MEANS_FILE):
        shutil.copy(WEIGHTS_ROOT / "mnist" / name, folder / name)
    return folder


@pytest.mark.slow
def test_the_importance_file_belongs_to_its_weights(tmp_path, mnist_root, capsys):
    folder = weights_copy(tmp_path)
    assert heads.read_head_importance(folder) is None
    assert cli.main(["head-importance", "--model", str(folder), "--data-dir", str(mnist_root), "--n", "40"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["images"] == 40 and line["ablation"] == "mean" and line["split"] == "test"
    record = heads.read_head_importance(folder)
    assert np.asarray(record["importance"]).shape == np.asarray(record["accuracy"]).shape == (6, 4)
    for curve in record["curves"].values():
        assert len(curve) == 25 and curve[0] == record["baseline"]
    assert figures.head_importance_plot(record).width >= 800
    config = json.loads((folder / CONFIG_FILE).read_text())
    config["weights_sha256"] = "0" * 64  # as if the weights had been trained again
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    assert heads.read_head_importance(folder) is None
    (folder / HEAD_IMPORTANCE_FILE).write_text("[1, 2]")
    assert heads.read_head_importance(folder) is None


@pytest.mark.parametrize("model", ["mnist", "cifar10"])
def test_both_shipped_models_keep_their_importance(model):
    record = heads.read_head_importance(WEIGHTS_ROOT / model)
    assert record is not None and record["ablation"] == "mean" and record["images"] >= 500
    config = service.model_config(model)
    assert np.asarray(record["importance"]).shape == (config.depth, config.heads)
    ranked, random = record["curves"]["importance"], record["curves"]["random"]
    assert sum(random) > sum(ranked)  # the score knows something: its order hurts more than random ones


def test_the_inside_tab_shows_which_heads_matter():
    """(Weights never measured say so: tests/test_ui.py, test_inside_says_plainly_what_was_never_measured.)"""
    views = inside_tab.inside_views("Digits (MNIST)")
    assert views[9].width >= 800 and "Michel et al., 2019" in views[10] and "most important heads off" in views[10]
