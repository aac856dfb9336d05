"""The MNIST weights that ship in weights/mnist: accuracy, hand-drawn digits, the Python API, bad weights."""

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch
from conftest import HAS_SHARED_CIFAR, HAS_SHARED_MNIST, PHOTOS, REPO, SHARED_DATA, STROKES, draw_digit, draw_on_canvas, mnist_test_digits
from PIL import Image
from safetensors import safe_open

from vit_demo import InputError, NothingDrawn, WeightsError, load_model
from vit_demo.data.datasets import load_split
from vit_demo.interpret import explain
from vit_demo.weights import (CONFIG_FILE, CURVES_FILE, METRICS_FILE, WEIGHTS_FILE, WEIGHTS_ROOT, load_snapshots,
                              snapshot_epochs)


# The floors catch a broken or swapped file: MNIST's weights reach 99.54% (goal 99.5%); CIFAR-10's, trained on
# a GPU by this repo's train.py (MAE pretraining, then the cifar10 recipe, 300 epochs at batch 256), 94.40%.
SHIPPED_FLOOR = {"mnist": 0.995, "cifar10": 0.94}
# The epochs train.py kept a snapshot after (--snapshots 6, a log scale): of 200 for MNIST, of 300 for CIFAR-10.
SHIPPED_SNAPSHOTS = {"mnist": [1, 2, 6, 14, 34, 83], "cifar10": [1, 3, 7, 17, 45, 116]}
HAS_SHARED_TEST_SET = {"mnist": HAS_SHARED_MNIST, "cifar10": HAS_SHARED_CIFAR}


@pytest.fixture(scope="module")
def clf():
    return load_model("mnist", device="cpu")


@pytest.mark.parametrize("name", SHIPPED_FLOOR)
def test_shipped_folder_is_complete(name):
    folder = WEIGHTS_ROOT / name
    for file in (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE, CURVES_FILE):
        assert (folder / file).is_file(), file
    metrics = json.loads((folder / METRICS_FILE).read_text())
    assert metrics["test_accuracy"] >= SHIPPED_FLOOR[name] and metrics["test_images"] == 10_000
    assert metrics["command"].startswith(f"python train.py --dataset {name}")


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED_FLOOR)
def test_shipped_model_scores_what_its_metrics_say_on_the_real_test_set(name, shipped_outputs):
    if not HAS_SHARED_TEST_SET[name]:
        pytest.skip(f"the real {name} test set is not in ../shared/data")
    images, labels = load_split(name, SHARED_DATA, "test", download=False)
    correct, n = int((shipped_outputs(name, images).logits.argmax(1) == labels).sum()), len(labels)
    recorded = json.loads((WEIGHTS_ROOT / name / METRICS_FILE).read_text())["test_accuracy"]
    assert n == 10_000 and correct / n == pytest.approx(recorded, abs=1e-4)
    assert correct / n >= SHIPPED_FLOOR[name]


@pytest.mark.parametrize("name", SHIPPED_SNAPSHOTS)
def test_shipped_models_keep_checked_snapshots_of_their_training(name):
    # Six snapshots on a log scale over the run's epochs, each checked against its SHA-256 as it loads, each with the
    # test accuracy the run recorded for its epoch; the attention-through-training slider shows them.
    history = json.loads((WEIGHTS_ROOT / name / METRICS_FILE).read_text())["history"]
    snapshots = load_snapshots(WEIGHTS_ROOT / name)
    assert [s.epoch for s in snapshots] == snapshot_epochs(len(history), 6) == SHIPPED_SNAPSHOTS[name]
    assert [s.test_accuracy for s in snapshots] == [history[s.epoch - 1]["test_accuracy"] for s in snapshots]
    assert all(a.test_accuracy < b.test_accuracy for a, b in zip(snapshots, snapshots[1:]))


def test_shipped_photo_model_reads_the_example_photos():
    # examples/photos holds, for each class, the first CIFAR-10 test photo the shipped model reads right and does not
    # flag (scripts/make_examples.py): an example that read wrong would mislead a room.
    photos = load_model("cifar10", device="cpu")
    results = {path.stem: photos.predict(path) for path in sorted(PHOTOS.glob("*.png"))}
    wrong = {name: (r.label, r.unfamiliar) for name, r in results.items() if r.label != name or r.unfamiliar}
    assert len(results) == 10 and not wrong, wrong


# What the shipped models gave on fixed inputs (two example files each, then a seeded random image) before the model grew
# what imported ViTs need (issue 46), recorded on the CPU with one thread: their config.json files still load, and the
# same inputs give the same logits, attention and maps. To float32 rounding, not bit for bit: another CPU's kernels
# (AVX-512 against AVX2, say) sum in another order and differ in the last bits (some 1e-6 here); a changed model
# (another norm's eps, a scale, a layer's order) differs by 1e-3 or more.
REFERENCE_OUTPUTS = REPO / "tests" / "fixtures" / "outputs_on_fixed_inputs.safetensors"
REFERENCE_FILES = {"mnist": ["examples/digits/3.png", "examples/digits/8.png"],
                   "cifar10": ["examples/photos/cat.png", "examples/photos/ship.png"]}
ROUNDING = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", REFERENCE_FILES)
def test_shipped_models_give_the_outputs_recorded_before_issue_46(name, one_thread):
    with safe_open(REFERENCE_OUTPUTS, "pt") as recorded:
        expected = {key.split(".", 1)[1]: recorded.get_tensor(key) for key in recorded.keys() if key.startswith(name)}
    clf = load_model(name, device="cpu")
    inputs = clf.batch([clf.preprocess(REPO / file) for file in REFERENCE_FILES[name]])  # (2, C, H, W)
    assert torch.equal(inputs, expected["inputs"][:2])
    with torch.inference_mode():
        found = clf.model.forward_activations(expected["inputs"], attention=True)
        torch.testing.assert_close(clf.model(expected["inputs"]), expected["fast_logits"], **ROUNDING)
    torch.testing.assert_close(found.logits, expected["logits"], **ROUNDING)
    torch.testing.assert_close(found.attention[:, :, :, 0], expected["attention_cls"], **ROUNDING)
    attention = found.attention.numpy()  # (B, L, H, T, T)
    rollout = np.stack([explain.attention_rollout(a) for a in attention])
    np.testing.assert_allclose(rollout, expected["rollout"].numpy(), **ROUNDING)
    maps = np.stack([explain.token_attention_maps(a) for a in attention])
    np.testing.assert_allclose(maps, expected["cls_maps"].numpy(), **ROUNDING)
    images = [x.permute(1, 2, 0).numpy() for x in expected["inputs"]]  # (H, W, C), as the preprocessing gives them
    relevance = clf.relevance_preprocessed([x[..., 0] if x.shape[-1] == 1 else x for x in images], [None] * len(images))
    np.testing.assert_allclose(relevance, expected["relevance"].numpy(), **ROUNDING)


@pytest.mark.parametrize("canvas,box,pen", [
    (800, (100, 100, 500), 0.08),  # a normal brush, centred
    (800, (20, 500, 250), 0.03),  # a thin pen, small, in a corner
    (400, (150, 20, 240), 0.18),  # a thick brush
    (1000, (600, 600, 380), 0.005),  # the thinnest line, bottom right
    (200, (0, 0, 200), 0.10),  # the whole of a small canvas
])
def test_drawn_digits_anywhere_at_any_size_with_any_pen(clf, canvas, box, pen):
    wrong = {}
    for digit in STROKES:
        result = clf.predict(draw_digit(digit, canvas, box, pen))
        if result.label != digit:
            wrong[digit] = result.label
    assert len(wrong) <= 1, f"misread (drawn: read as): {wrong}"


@pytest.mark.slow
def test_mnist_digits_moved_and_scaled_on_a_canvas(clf, mnist_root):
    images, labels = mnist_test_digits(mnist_root, 200)
    rng = np.random.default_rng(0)
    correct = 0
    for digit, label in zip(images, labels):
        canvas = int(rng.integers(200, 1001))
        size = int(rng.integers(canvas // 5, canvas))
        at = tuple(int(v) for v in rng.integers(0, canvas - size + 1, 2))
        ink = "black" if rng.random() < 0.7 else "white"
        correct += clf.predict(draw_on_canvas(digit, canvas=canvas, size=size, at=at, ink=ink)).label == str(label)
    assert correct / len(labels) >= (0.97 if HAS_SHARED_MNIST else 0.6)


def test_prediction_result(clf, tmp_path):
    image = draw_digit("7", 600, (100, 100, 400), 0.08)
    path = tmp_path / "seven.png"
    image.save(path)
    results = [clf.predict(source) for source in (image, path, str(path), np.asarray(image))]
    for r in results:
        assert r.label == "7" and r.confidence == max(r.probs.values()) > 0.5
        assert list(r.probs) == [str(d) for d in range(10)] and sum(r.probs.values()) == pytest.approx(1, abs=1e-5)
        assert r.attention.shape == (6, 4, 50, 50)
        np.testing.assert_allclose(r.attention.sum(-1), 1, atol=1e-5)
        assert r.input.shape == (28, 28)
        assert r.top(2)[0] == ("7", r.confidence)
    np.testing.assert_allclose(results[0].attention, results[3].attention, atol=1e-6)


def test_blank_and_broken_inputs(clf):
    with pytest.raises(NothingDrawn):
        clf.predict(Image.new("RGB", (400, 400), "white"))
    with pytest.raises(InputError):
        clf.predict(b"GIF89a truncated")


# ---- Missing or corrupt weights ----------------------------------------------------------------


@pytest.fixture
def weights_copy(tmp_path):
    folder = tmp_path / "mnist-copy"
    shutil.copytree(WEIGHTS_ROOT / "mnist", folder)
    return folder


def test_missing_weights_name_the_file_and_the_command(tmp_path, weights_copy):
    with pytest.raises(WeightsError, match=r"nothing/config.json not found\. Make it with: python train.py"):
        load_model(tmp_path / "nothing")
    (weights_copy / WEIGHTS_FILE).unlink()
    with pytest.raises(WeightsError, match=rf"{WEIGHTS_FILE} not found.*python train.py --dataset mnist --out"):
        load_model(weights_copy)


def test_corrupt_weights_are_refused(weights_copy):
    blob = bytearray((weights_copy / WEIGHTS_FILE).read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (weights_copy / WEIGHTS_FILE).write_bytes(bytes(blob))
    with pytest.raises(WeightsError, match="is corrupt: its SHA-256 does not match"):
        load_model(weights_copy)


def test_corrupt_config_is_refused(weights_copy):
    config = json.loads((weights_copy / CONFIG_FILE).read_text())
    config["vit"]["heads"] = 5  # an architecture that cannot be built
    (weights_copy / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(WeightsError, match=r"not a valid weights config \(dim 64 must be divisible by heads 5\)"):
        load_model(weights_copy)
    (weights_copy / CONFIG_FILE).write_text("{ not json")
    with pytest.raises(WeightsError, match="config.json is not a valid weights config"):
        load_model(weights_copy)


def test_weights_that_do_not_fit_the_config_are_refused(weights_copy):
    config = json.loads((weights_copy / CONFIG_FILE).read_text())
    config["vit"]["depth"] = 3
    (weights_copy / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(WeightsError, match="does not fit its config"):
        load_model(weights_copy)


def test_safetensors_holds_no_code():
    blob = (WEIGHTS_ROOT / "mnist" / WEIGHTS_FILE).read_bytes()
    header_len = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + header_len])
    assert all(v["dtype"] == "F32" for k, v in header.items() if k != "__metadata__")
    assert hashlib.sha256(blob).hexdigest() == json.loads((WEIGHTS_ROOT / "mnist" / CONFIG_FILE).read_text())["weights_sha256"]
