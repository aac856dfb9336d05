"""What each head does, in the page (assets/page/source.js under Node: knockout, lens and patching, and the query and
relevance views with heads off) against Python's (vit_demo/interpret/heads) on real digits; the importance file the
Inside tab reads, and its command."""

import json
import shutil

import numpy as np
import pytest
import torch
from conftest import as_drawn, map_levels, node_major, page_source, read_live_map

from vit_demo import cli
from vit_demo.app import service
from vit_demo.page import inside, layout
from vit_demo.page.captions import image_text
from vit_demo.interpret import explain, heads
from vit_demo.pictures import figures
from vit_demo.weights import CONFIG_FILE, HEAD_IMPORTANCE_FILE, HEAD_MEANS_FILE, WEIGHTS_FILE, WEIGHTS_ROOT

EXAMPLES = WEIGHTS_ROOT.parent / "examples"


OFF = [[2, 1], [4, 0], [4, 1], [4, 2], [4, 3]]  # head 2 of layer 3, and the whole of layer 5, as the board sends them
OFF_PAIRS = [(2, 1), (4, None)]


def predicted(digit: str):
    """An example digit through the model, with the relevance of its predicted class."""
    clf = service.classifier("mnist")
    return clf.predict_preprocessed([clf.preprocess(EXAMPLES / "digits" / f"{digit}.png")], relevance_for=[None])[0]


@pytest.fixture(scope="module")
def three():
    return predicted("3")


@pytest.fixture(scope="module")
def eight():
    return predicted("8")


@pytest.fixture(scope="module")
def page(three, eight, tmp_path_factory):
    """The page's answers (its source under Node) to the calls the board, the query, relevance and lens views and the
    patching view make: one Node process for them all."""
    if node_major() < 20:
        pytest.skip("the page's modules run under Node 20 or later, which is not on the PATH")
    p3, p8 = image_text(three.input), image_text(eight.input)
    calls = {
        "none off": ("knockout", {"image": p3, "off": [], "mode": "mean"}),
        "mean": ("knockout", {"image": p3, "off": OFF, "mode": "mean"}),
        "zero": ("knockout", {"image": p3, "off": OFF, "mode": "zero"}),
        "query off": ("query", {"image": p3, "patch": 24, "off": OFF, "mode": "mean"}),
        "query": ("query", {"image": p3, "patch": 24}),
        "relevance off": ("relevance", {"image": p3, "label": "3", "off": OFF, "mode": "mean"}),
        "relevance": ("relevance", {"image": p3, "label": "3"}),
        "lens off": ("lens", {"image": p3, "off": OFF, "mode": "mean"}),
        "lens 3": ("lens", {"image": p3}),
        "lens 8": ("lens", {"image": p8}),
        "patching": ("patching", {"clean": p3, "corrupt": p8}),
        "patching back": ("patching", {"clean": p8, "corrupt": p3, "residual": False}),
        "itself": ("patching", {"clean": p3, "corrupt": p3}),
        "bad lens": ("lens", {"image": None}),
        "bad patching": ("patching", "two images"),
        "no residual": ("patching", {"clean": p3, "corrupt": p8, "residual": "yes"}),
    }
    found = page_source("mnist", list(calls.values()), tmp_path_factory.mktemp("page"))
    return dict(zip(calls, found["answers"]))


def levels(maps: list, shape: tuple[int, ...]) -> np.ndarray:
    """An answer's maps as the page draws them: each scaled to its own maximum, levels 0..255."""
    return np.round(as_drawn(np.asarray(maps, np.float32).reshape(shape)) * 255)


def test_nothing_off_is_no_knockout(page):
    assert "no head is switched off" in page["none off"]["error"]


@pytest.mark.parametrize("mode", ["mean", "zero"])
def test_a_head_off_moves_the_logit_difference_as_heads_knockout_says(page, three, mode):
    reply = page[mode]
    assert reply["off"] == OFF and reply["mode"] == mode
    clf = service.classifier("mnist")
    means = heads.read_head_means(clf.info.folder, clf.model) if mode == "mean" else None
    expected = heads.knockout(clf.model, clf.batch([three.input]), OFF_PAIRS, means, attention=True)
    assert reply["logit_diff"]["intact"] == pytest.approx(float(expected.logit_diff[0]), abs=1e-4)
    assert reply["logit_diff"]["ablated"] == pytest.approx(float(expected.ablated_logit_diff[0]), abs=1e-4)
    assert reply["logit_diff"]["ablated"] != pytest.approx(reply["logit_diff"]["intact"], abs=1e-3)
    assert reply["intact"]["label"] == "3"
    assert reply["runner_up"] == clf.classes[int(expected.runner_up[0])]
    for name, p in three.probs.items():
        if name == "3":
            assert reply["intact"]["probability"] == pytest.approx(p, abs=1e-5)  # calibrated, as the prediction shows
    assert "5 of 24 heads off" in reply["info"] and f"replaced by {mode}s" in reply["info"]
    # The ablated run's maps: a head's output first changes the attention of the layer after it.
    maps = levels(reply["maps"], (6, 5, 7, 7)).astype(int)
    np.testing.assert_allclose(maps, map_levels(expected.ablated_attention[0].numpy()), atol=1)
    intact = map_levels(three.attention)
    assert np.abs(maps[:3] - intact[:3]).max() <= 1 and np.abs(maps[3:] - intact[3:]).max() > 10
    np.testing.assert_allclose(read_live_map(reply["rollout"]), normalised(explain.attention_rollout(
        expected.ablated_attention[0].numpy())), atol=1 / 255 + 1e-6)


def normalised(heatmap: np.ndarray) -> np.ndarray:
    return heatmap / heatmap.max()


def test_the_query_relevance_and_lens_views_follow_the_heads_switched_off(page, three):
    """With heads off, the views that ask for their own numbers get the knocked-out model's: where a patch looks (its
    attention), why a class (relevance through the ablated model: a head switched off passes no gradient back) and
    the lens (whose last layer is the ablated model's own answer); without "off", the intact model's."""
    clf = service.classifier("mnist")
    means = heads.read_head_means(clf.info.folder, clf.model)
    run = heads.knockout(clf.model, clf.batch([three.input]), OFF_PAIRS, means, attention=True)
    np.testing.assert_allclose(levels(page["query off"]["maps"], (6, 5, 7, 7)),
                               map_levels(run.ablated_attention[0].numpy(), 1 + 24), atol=1)
    np.testing.assert_allclose(levels(page["query"]["maps"], (6, 5, 7, 7)), map_levels(three.attention, 1 + 24),
                               atol=1)
    with heads.switched_off(clf.model, OFF_PAIRS, means):
        expected = clf.relevance_preprocessed([three.input], ["3"])[0]
    ablated, intact = read_live_map(page["relevance off"]), read_live_map(page["relevance"])
    np.testing.assert_allclose(ablated, normalised(expected), atol=1 / 255 + 1e-6)
    np.testing.assert_allclose(intact, normalised(three.relevance), atol=1 / 255 + 1e-6)
    assert np.abs(ablated - intact).max() > 0.05
    knocked = page["mean"]
    assert page["lens off"]["layers"][-1]["label"] == knocked["label"]
    assert page["lens off"]["layers"][-1]["probability"] == pytest.approx(max(knocked["probs"]), abs=1e-4)


def test_the_lens_strip_ends_with_the_models_answer(page, three, eight):
    for analysis, reply in ((three, page["lens 3"]), (eight, page["lens 8"])):
        assert reply["label"] == analysis.label and len(reply["layers"]) == 6 and reply["grid"] == 7
        last = reply["layers"][-1]
        assert last["label"] == analysis.label
        assert last["probability"] == last["answer"] == pytest.approx(analysis.probs[analysis.label], abs=1e-4)
        expected = heads.logit_lens(service.classifier("mnist").model, torch.from_numpy(analysis.input)[None, None])[0]
        probs = torch.softmax(expected / service.classifier("mnist").temperature, -1)  # (L, classes), calibrated
        assert [layer["label"] for layer in reply["layers"]] == [service.classifier("mnist").classes[i]
                                                               for i in probs.argmax(-1).tolist()]
        maps = np.asarray(reply["maps"]).reshape(6, 7, 7)  # the probability of the answer per patch
        expected = heads.lens_maps(service.classifier("mnist").model, torch.from_numpy(analysis.input)[None, None])[0]
        np.testing.assert_allclose(maps, expected.numpy(), atol=1 / 255 + 1e-6)


def test_the_patching_grids_both_ways(page, three, eight):
    reply, back = page["patching"], page["patching back"]
    assert reply["classes"] == ["3", "8"] and reply["residual"] is True
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
    assert back["classes"] == ["8", "3"] and "residual" not in back["corrupt_into_clean"]
    np.testing.assert_allclose(reply["clean_into_corrupt"]["heads"], 1 - np.asarray(back["corrupt_into_clean"]["heads"]),
                               atol=2e-3)
    grid = heads.patching_grid(service.classifier("mnist").model, torch.from_numpy(three.input)[None, None],
                               torch.from_numpy(eight.input)[None, None])
    for direction in ("clean_into_corrupt", "corrupt_into_clean"):
        for kind in ("heads", "residual"):
            np.testing.assert_allclose(reply[direction][kind], getattr(grid, direction)[kind], atol=2e-3)


def test_what_the_page_cannot_answer_gets_a_reason(page):
    assert "reads both images as class 3" in page["itself"]["error"]
    assert "bytes" in page["bad lens"]["error"] and "bytes" in page["bad patching"]["error"]
    assert "true or false" in page["no residual"]["error"]


def test_the_photos_residual_grid_waits_for_its_button():
    assert layout.residual_at_once(service.model_config("mnist"))
    assert not layout.residual_at_once(service.model_config("cifar10"))


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
    """(Its note, and what weights never measured say: tests/test_ui.py.)"""
    found = inside.insides("mnist")
    assert found.importance.width >= 800 and found.heads["widest"] > 0
