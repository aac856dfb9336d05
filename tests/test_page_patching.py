"""Activation patching in the page (vit_demo/app/assets/page/source.js' patching, the patching graphs run by the page's
onnxruntime-web under Node) against the app's server function (vit_demo/app/heads_view.py's patching_answer): the same
answer for a real pair of test images of each dataset, and the same refusals."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import HAS_SHARED_CIFAR, REPO, SHARED_DATA, mnist_test_digits, node_major
from vit_demo.app import heads_view, page_model, page_numbers
from vit_demo.app.service import classifier

pytestmark = pytest.mark.skipif(node_major() < 20, reason="the page's modules run under Node 20 or later, which is not "
                                                          "on the PATH")
TOLERANCE = 2e-3  # the answers are rounded to 3 decimals: one rounding step either way, and float32's noise


def page_patching(model: str, requests: list[dict], tmp_path, repeat: int = 1) -> list[dict]:
    """The page's patching answers for ``requests``, each asked ``repeat`` times: [{answer, ms: [...]}]."""
    described = page_model.description(model, "", "", lambda path: path.resolve().as_uri())
    source, answer = tmp_path / "in.json", tmp_path / "out.json"
    source.write_text(json.dumps({"model": described, "requests": requests, "repeat": repeat}))
    subprocess.run([shutil.which("node"), str(REPO / "tests" / "page_patching.mjs"), str(source), str(answer)],
                   check=True, timeout=600, cwd=REPO)
    return json.loads(answer.read_text())


def real_pair(model: str, mnist_root) -> tuple[np.ndarray, np.ndarray]:
    """Two real test images the model reads as different classes, in [0, 1] as the page keeps them."""
    if model == "mnist":
        digits, _ = mnist_test_digits(mnist_root, 10)
        images = list(digits.astype(np.float32) / 255)
    else:
        if not HAS_SHARED_CIFAR:
            pytest.skip("the real CIFAR-10 test set is not in ../shared/data")
        from PIL import Image

        test = SHARED_DATA / "cifar10" / "test"
        images = [np.asarray(Image.open(min(folder.glob("*.png"))).convert("RGB"), dtype=np.float32) / 255
                  for folder in sorted(test.iterdir())]  # the first photo of each class
    labels = [p.label for p in classifier(model).predict_preprocessed(images, attention=False)]
    other = next(i for i, label in enumerate(labels) if label != labels[0])
    return images[0], images[other]


@pytest.mark.parametrize("model", ["mnist", "cifar10"])
def test_the_pages_patching_is_the_servers(model, mnist_root, tmp_path):
    clean, corrupt = real_pair(model, mnist_root)
    request = {"clean": page_numbers.image_text(clean), "corrupt": page_numbers.image_text(corrupt)}
    asked = [{**request, "residual": False}, {**request, "residual": True}]
    for result, residual in zip(page_patching(model, asked, tmp_path), (False, True)):
        page = result["answer"]
        server = heads_view.patching_answer(model, clean, corrupt, residual)
        assert set(page) - {"where"} == set(server), page.get("error")
        assert page["where"] == "in this page" and page["ms"] > 0
        for key in ("clean", "corrupt", "residual", "classes"):
            assert page[key] == server[key], key
        for kind in ("clean", "corrupt"):
            assert page["logit_diff"][kind] == pytest.approx(server["logit_diff"][kind], abs=TOLERANCE)
        for direction in ("clean_into_corrupt", "corrupt_into_clean"):
            assert set(page[direction]) == set(server[direction]) == ({"heads", "residual"} if residual else {"heads"})
            for kind, values in server[direction].items():
                assert np.asarray(page[direction][kind]).shape == np.asarray(values).shape
                np.testing.assert_allclose(page[direction][kind], values, atol=TOLERANCE, rtol=0)


def test_the_page_refuses_what_the_server_refuses(mnist_root, tmp_path):
    clean, corrupt = (page_numbers.image_text(image) for image in real_pair("mnist", mnist_root))
    requests = ["two images", {"clean": clean}, {"clean": clean, "corrupt": "@@"},
                {"clean": clean, "corrupt": clean[:20]}, {"clean": clean, "corrupt": corrupt, "residual": "yes"},
                {"clean": clean, "corrupt": clean}]
    whys = ["JSON object", "bytes", "base64", "bytes", "true or false", "reads both images as class"]
    ask = heads_view.ask_patching("mnist")
    for request, why, result in zip(requests, whys, page_patching("mnist", requests, tmp_path)):
        assert list(result["answer"]) == ["error"] and why in result["answer"]["error"], request
        assert why in ask(request)["error"], request
    same = ask({"clean": clean, "corrupt": clean})["error"]
    assert page_patching("mnist", [{"clean": clean, "corrupt": clean}], tmp_path)[0]["answer"]["error"] == same
