"""Activation patching in the page (vit_demo/page/assets/page/source.js' patching, the patching graphs run by the page's
onnxruntime-web under Node) against Python's (heads.patching_grid): the same grids for a real pair of test images of
each dataset, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import HAS_SHARED_CIFAR, SHARED_DATA, mnist_test_digits, node_major, page_source
from vit_demo.page.captions import image_text
from vit_demo.app.service import classifier
from vit_demo.interpret import heads

pytestmark = pytest.mark.skipif(node_major() < 20, reason="the page's modules run under Node 20 or later, which is not "
                                                          "on the PATH")
TOLERANCE = 2e-3  # the answers are rounded to 3 decimals: one rounding step either way, and float32's noise


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
def test_the_pages_patching_is_pythons(model, mnist_root, tmp_path):
    clean, corrupt = real_pair(model, mnist_root)
    request = {"clean": image_text(clean), "corrupt": image_text(corrupt)}
    # The residual stream's grid on digits alone: a photo's takes some 12 s in the page (graph and grid for photos are
    # held to Python in test_onnx_export.py).
    residuals = (False, True) if model == "mnist" else (False,)
    asked = [("patching", {**request, "residual": residual}) for residual in residuals]
    clf = classifier(model)
    grid = heads.patching_grid(clf.model, clf.batch([clean]), clf.batch([corrupt]))
    for page, residual in zip(page_source(model, asked, tmp_path)["answers"], residuals, strict=True):
        assert page["where"] == "in this page" and page["ms"] > 0 and page["residual"] is residual, page.get("error")
        assert page["classes"] == [clf.classes[c] for c in grid.classes]
        for kind in ("clean", "corrupt"):
            assert page["logit_diff"][kind] == pytest.approx(grid.logit_diff[kind], abs=TOLERANCE)
        for direction in ("clean_into_corrupt", "corrupt_into_clean"):
            assert set(page[direction]) == ({"heads", "residual"} if residual else {"heads"})
            for kind, values in page[direction].items():
                expected = getattr(grid, direction)[kind].numpy()
                assert np.asarray(values).shape == expected.shape
                np.testing.assert_allclose(values, expected, atol=TOLERANCE, rtol=0)


def test_the_page_refuses_what_it_cannot_patch(mnist_root, tmp_path):
    clean, corrupt = (image_text(image) for image in real_pair("mnist", mnist_root))
    requests = [{"clean": clean}, {"clean": clean, "corrupt": clean[:20]},
                {"clean": clean, "corrupt": corrupt, "residual": "yes"}, {"clean": clean, "corrupt": clean}]
    whys = ["bytes", "bytes", "true or false", "reads both images as class"]
    answers = page_source("mnist", [("patching", request) for request in requests], tmp_path)["answers"]
    for request, why, answer in zip(requests, whys, answers):
        assert list(answer) == ["error"] and why in answer["error"], request
