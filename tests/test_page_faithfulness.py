"""How far to trust each map, in the page (vit_demo/page/assets/page/faithfulness.js through source.js, the graphs run by
the page's onnxruntime-web under Node) against Python (vit_demo/interpret/faithfulness.py, with verdict_text for the
verdict in words): the same curves for the three maps on real test images of each dataset, and the same verdict in
the same words for the same curves, whichever of its texts says it."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import HAS_SHARED_CIFAR, SHARED_DATA, mnist_test_digits, node_major, page_source
from vit_demo.page.captions import caption_html, image_text
from vit_demo.app.service import classifier
from vit_demo.interpret import faithfulness
from vit_demo.interpret.faithfulness import FLAT, RANDOM_RANKINGS, STEPS, Curves

pytestmark = pytest.mark.skipif(node_major() < 20, reason="the page's modules run under Node 20 or later, which is not "
                                                          "on the PATH")
TOLERANCE = 1e-4  # the page's graphs against PyTorch: float32 noise, far below it
MAPS = ("attention", "rollout", "relevance")


def python_answer(curves_of: dict[str, Curves], label: str) -> dict:
    """Python's answer for one image the model reads as ``label``, in the page's format: per kind of map its deletion
    and insertion curves and their AUCs, the noise, the verdict and its words (HTML)."""
    v = faithfulness.verdict(curves_of)
    return {
        "label": label, "steps": STEPS, "rankings": RANDOM_RANKINGS, "flat": FLAT,
        "curves": {kind: {"deletion": [float(p) for p in c.deletion[0]],
                          "insertion": [float(p) for p in c.insertion[0]],
                          "deletion_auc": float(c.deletion_auc[0]), "insertion_auc": float(c.insertion_auc[0])}
                   for kind, c in curves_of.items()},
        "noise": {"deletion": v.deletion_noise, "insertion": v.insertion_noise},
        "verdict": {"deletion": v.deletion_leader, "insertion": v.insertion_leader, "winner": v.winner,
                    "flat": {"deletion": v.deletion_flat, "insertion": v.insertion_flat},
                    "band": {"deletion": list(v.deletion_band), "insertion": list(v.insertion_band)},
                    "whole": v.whole, "blank": v.blank},
        "text": caption_html(faithfulness.verdict_text(v, label)),
    }


def real_images(model: str, mnist_root, n: int) -> list[np.ndarray]:
    """``n`` real test images, in [0, 1] as the page keeps them."""
    if model == "mnist":
        digits, _ = mnist_test_digits(mnist_root, n)
        return list(digits.astype(np.float32) / 255)
    if not HAS_SHARED_CIFAR:
        pytest.skip("the real CIFAR-10 test set is not in ../shared/data")
    from PIL import Image

    folders = sorted((SHARED_DATA / "cifar10" / "test").iterdir())
    return [np.asarray(Image.open(min(folder.glob("*.png"))).convert("RGB"), dtype=np.float32) / 255
            for folder in folders[:: len(folders) // n][:n]]  # the first photo of every other class


def curves(model: str, image: np.ndarray) -> dict:
    """Python's curves of every map for one preprocessed image, random ones as the page draws them."""
    clf = classifier(model)
    return faithfulness.faithfulness(clf.model, clf.batch([image]), clf.info.dataset.name,
                                     temperature=clf.temperature, random_rankings=RANDOM_RANKINGS)


@pytest.mark.parametrize("model, n", [("mnist", 4), ("cifar10", 3)])
def test_the_pages_curves_are_pythons(model, n, mnist_root, tmp_path):
    images = real_images(model, mnist_root, n)
    found = page_source(model, [("faithfulness", {"image": image_text(image)}) for image in images], tmp_path)
    for image, page in zip(images, found["answers"]):
        label = classifier(model).predict_preprocessed([image], attention=False)[0].label
        python = python_answer(curves(model, image), label)
        assert set(page) == set(python) | {"ms", "where"}, page.get("error")
        assert page["where"] == "in this page" and page["ms"] > 0 and page["text"]
        for key in ("label", "steps", "rankings", "flat"):
            assert page[key] == python[key], key
        assert set(page["curves"]) == set(python["curves"]) == set(faithfulness.MAP_KINDS)
        for kind in MAPS:  # the maps' rankings are Python's: so are their curves
            for field, value in python["curves"][kind].items():
                np.testing.assert_allclose(page["curves"][kind][field], value, atol=TOLERANCE, rtol=0,
                                           err_msg=f"{model} {kind} {field}")
        # Random's curves come from the page's own rankings: the same shape, from the same whole and blank images.
        for field in ("deletion", "insertion"):
            mine, theirs = page["curves"]["random"][field], python["curves"]["random"][field]
            assert len(mine) == len(theirs) == STEPS + 1
            assert mine[0] == pytest.approx(theirs[0], abs=TOLERANCE) and mine[-1] == pytest.approx(theirs[-1],
                                                                                                   abs=TOLERANCE)
            assert page["noise"][field] >= 0
        assert set(page["verdict"]) == set(python["verdict"])


def curves_with(deletion: list[list[float]], insertion: list[list[float]], noise: tuple[float, float]) -> dict:
    """{kind: Curves} with these curves for attention, rollout, relevance and random (in that order), random with
    ``noise`` (deletion, insertion)."""
    found = {kind: Curves(np.array([d], dtype=np.float32), np.array([i], dtype=np.float32))
             for kind, d, i in zip(faithfulness.MAP_KINDS, deletion, insertion)}
    random = found["random"]
    found["random"] = Curves(random.deletion, random.insertion, np.array([noise[0]]), np.array([noise[1]]))
    return found


def line(start: float, end: float, dip: float = 0.0) -> list[float]:
    """A curve from ``start`` to ``end`` over STEPS steps, lowered by ``dip`` in the middle."""
    return [start + (end - start) * k / STEPS - dip * (0 < k < STEPS) for k in range(STEPS + 1)]


CASES = {  # one for each of the verdict's texts (faithfulness.VERDICT_TEXTS)
    "flat": ([line(0.998, 0.997, 0.0003), line(0.998, 0.997, 0.0005), line(0.998, 0.997, 0.0004), line(0.998, 0.997)],
             [line(0.997, 0.998)] * 4, (0.00001, 0.00001)),  # a drawn 1: a blank image still reads 1
    "winner": ([line(1, 0, 0.3), line(1, 0, 0.1), line(1, 0, 0.5), line(1, 0)],
               [line(0, 1, -0.1), line(0, 1, -0.2), line(0, 1, -0.3), line(0, 1)], (0.03, 0.03)),
    "split": ([line(1, 0, 0.3), line(1, 0, 0.5), line(1, 0, 0.1), line(1, 0)],
              [line(0, 1, -0.1), line(0, 1, -0.2), line(0, 1, -0.3), line(0, 1)], (0.03, 0.03)),
    "one": ([line(1, 0, 0.1), line(1, 0, 0.3), line(1, 0, 0.1), line(1, 0)],
            [line(0, 1, -0.2), line(0, 1, -0.21), line(0, 1, -0.2), line(0, 1)], (0.03, 0.03)),
    "tie": ([line(1, 0, 0.3), line(1, 0, 0.31), line(1, 0, 0.3), line(1, 0)],
            [line(0, 1, -0.1), line(0, 1, -0.1), line(0, 1, -0.12), line(0, 1)], (0.05, 0.05)),
    # The blank reads the class, but half an image reads another: insertion dips, deletion cannot fall.
    "one_flat": ([line(0.99, 0.98)] * 4, [line(0.98, 0.99, 0.5), line(0.98, 0.99, 0.1), line(0.98, 0.99, 0.3),
                                          line(0.98, 0.99, 0.6)], (0.01, 0.05)),
    "tie_flat": ([line(0.99, 0.98, 0.4), line(0.99, 0.98, 0.41), line(0.99, 0.98, 0.4), line(0.99, 0.98, 0.5)],
                 [line(0.98, 0.99)] * 4, (0.05, 0.01)),
}


def test_the_pages_verdict_is_pythons_in_the_same_words(tmp_path):
    given, expected = [], []
    for name, case in CASES.items():
        curves = curves_with(*case)
        answer = python_answer(curves, "1")
        assert faithfulness.verdict_parts(faithfulness.verdict(curves), "1")[0] == name  # each case is covered
        given.append({key: answer[key] for key in ("label", "rankings", "curves", "noise")})
        expected.append(answer)
    for name, python, page in zip(CASES, expected, page_source("mnist", [], tmp_path, verdicts=given)["texts"]):
        for key, value in python["verdict"].items():
            if key == "band":
                for field, (low, high) in value.items():
                    assert page["verdict"][key][field] == pytest.approx([low, high], abs=1e-6), (name, field)
            elif key in ("whole", "blank"):
                assert page["verdict"][key] == pytest.approx(value, abs=1e-6), (name, key)
            else:
                assert page["verdict"][key] == value, (name, key)
        assert page["text"] == python["text"], name


def test_the_page_refuses_an_image_it_cannot_read(tmp_path):
    requests = [{"image": ""}, {"image": image_text(np.zeros((20, 20), np.float32))}]
    answers = page_source("mnist", [("faithfulness", request) for request in requests], tmp_path)["answers"]
    assert "0 bytes where" in answers[0]["error"] and "400 bytes where this model reads 784" in answers[1]["error"]
