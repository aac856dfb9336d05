"""The page's numbers (page/assets/page/numbers.js, run by Node) against Python's (interpret/explain.py) for the same
attention: [CLS] maps from [CLS]'s rows, as the graph gives them (rollout, and the first query patch where it peaks, are
the graph's: tests/test_onnx_export.py); how attention is computed, step by step, from the queries,
keys and values; and the unfamiliar rule (unfamiliar_rule.UnfamiliarRule). Real test images of both datasets where ../shared/data has them,
generated ones otherwise (the fixtures say which)."""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
import subprocess

import numpy as np
import pytest
import torch

from conftest import PHOTOS, REPO, map_levels, mnist_test_digits, node_major
from vit_demo.app.service import classifier
from vit_demo.interpret import explain

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(node_major() < 20, reason="the page's modules run under Node 20 or later, which is not "
                                                          "on the PATH")


def node_numbers(cases: list[dict], tmp_path) -> list[dict]:
    source, answer = tmp_path / "in.json", tmp_path / "out.json"
    source.write_text(json.dumps(cases))
    subprocess.run([NODE, str(REPO / "tests" / "page_numbers.mjs"), str(source), str(answer)], check=True, timeout=120)
    return json.loads(answer.read_text())


def check(model: str, images: np.ndarray, tmp_path) -> None:
    """images: (N, H, W) or (N, H, W, 3) in [0, 1] on 256 levels."""
    clf = classifier(model)
    predictions = clf.predict_preprocessed(list(images))
    config = clf.model.config
    cases = [{"rows": base64.b64encode(p.attention[:, :, 0].astype(np.float32).tobytes()).decode(),
              "layers": config.depth, "heads": config.heads, "tokens": config.num_tokens} for p in predictions]
    differences = []
    for p, image, page in zip(predictions, images, node_numbers(cases, tmp_path)):
        python = map_levels(p.attention)  # (L, H + 1, g, g)
        levels = np.frombuffer(base64.b64decode(page["maps"]), dtype=np.uint8).reshape(python.shape)
        differences.append(np.abs(levels.astype(int) - python).max())
    assert max(differences) <= 1  # a level, where float32 sums round the other way


def test_digit_numbers_match_pythons(mnist_root, tmp_path):
    digits, _ = mnist_test_digits(mnist_root, 40)
    check("mnist", digits.astype(np.float32) / 255, tmp_path)


def test_photo_numbers_match_pythons(cifar_root, tmp_path):
    from vit_demo.data.datasets import load_split

    photos, _ = load_split("cifar10", cifar_root, "test", download=False)
    picked = photos[torch.linspace(0, len(photos) - 1, 20).long()]  # (20, 3, 32, 32) uint8, every class
    check("cifar10", picked.permute(0, 2, 3, 1).numpy().astype(np.float32) / 255, tmp_path)


@pytest.mark.parametrize("model, kind", [("mnist", "shipped"), ("cifar10", "shipped"), ("cifar10", "probe")])
def test_the_pages_unfamiliar_rule_is_pythons(model, kind, tmp_path):
    # The page's rule (numbers.js familiarity, from the graph's calibrated logits and features and the rule as
    # config.json keeps it) against unfamiliar_rule.UnfamiliarRule.scores, on images it flags and images it does not:
    # each shipped rule, and a linear probe of random weights on the photo model's features (the kind of rule a
    # calibration may choose that neither ships), held to its median score.
    from vit_demo.data import sketches
    from vit_demo.data.outside_photos import outside_photos
    from vit_demo.unfamiliar_rule import UnfamiliarRule

    clf = classifier(model)
    rule = clf.info.unfamiliar
    if kind == "probe":
        depth, dim = clf.model.config.depth, clf.model.config.dim
        weights = np.random.default_rng(0).normal(0, 0.05, (depth, dim)).astype(np.float16)
        rule = UnfamiliarRule("probe", 0.0, tuple(range(depth)), weights=weights, bias=0.5)
    if model == "mnist":
        drawings, _ = sketches.non_digit_drawings(24, seed=5)
        digits, _ = sketches.digit_drawings(24, seed=5)
        images = torch.from_numpy(np.concatenate([drawings, digits]))[:, None]
    else:
        photos = [clf.preprocess(p) for _, p in outside_photos()[::6]] + [clf.preprocess(p) for p in
                                                                         sorted(PHOTOS.glob("*.png"))]
        images = torch.from_numpy(np.stack(photos)).permute(0, 3, 1, 2)
    with torch.no_grad():
        found = clf.model.forward_activations(images, stream=True)
    logits, features = found.logits, clf.cls_features(found.stream)
    if kind == "probe":
        median = float(rule.scores(logits, clf.temperature, features).median())
        rule = dataclasses.replace(rule, threshold=median + 1e-3)
    scores = rule.scores(logits, clf.temperature, features).numpy()
    encode = lambda array: base64.b64encode(np.ascontiguousarray(array, dtype=np.float32).tobytes()).decode()  # noqa: E731
    cases = [{"rule": rule.to_dict(), "temperature": clf.temperature, "calibrated": encode(z / clf.temperature),
              "features": encode(f)} for z, f in zip(logits.numpy(), features.numpy())]
    page = node_numbers(cases, tmp_path)
    np.testing.assert_allclose([p["familiarity"] for p in page], scores, rtol=1e-6, atol=1e-5)
    thresholds = rule.thresholds(logits).numpy()  # by the class each image is read as, where the rule has them
    clear = np.abs(scores - thresholds) > 1e-4  # the float32 logits could tip an image this close either way
    assert [p["unfamiliar"] for p, c in zip(page, clear) if c] == (scores < thresholds)[clear].tolist()
    assert 0 < (scores < thresholds).sum() < len(scores)  # some flagged, some not


@pytest.mark.parametrize("model", ["mnist", "cifar10"])
def test_the_pages_attention_steps_are_pythons(model, tmp_path):
    # numbers.js attentionSteps (the steps view's numbers) against explain.attention_steps, from the same queries,
    # keys and values of the shipped models (an example image each), for the first and last layers and a middle one,
    # [CLS] and patches.
    clf = classifier(model)
    c = clf.model.config
    example = sorted((PHOTOS if model == "cifar10" else PHOTOS.parent / "digits").glob("*.png"))[3]
    with torch.no_grad():
        qkv = clf.model.forward_activations(clf.batch([clf.preprocess(example)]), qkv=True).qkv[0].numpy()
    picks = [(0, 0, 0), (c.depth // 2, c.heads - 1, 1 + c.grid_size ** 2 // 2), (c.depth - 1, 1, c.num_tokens - 1)]
    cases = [{"qkv": base64.b64encode(qkv.astype(np.float32).tobytes()).decode(), "layers": c.depth, "heads": c.heads,
              "tokens": c.num_tokens, "layer": layer, "head": head, "token": token} for layer, head, token in picks]
    for (layer, head, token), page in zip(picks, node_numbers(cases, tmp_path)):
        python = explain.attention_steps(qkv, layer, head, token)
        for name in ("scores", "weights", "output"):
            np.testing.assert_allclose(page[name], python[name], rtol=1e-9, atol=1e-12, err_msg=name)
