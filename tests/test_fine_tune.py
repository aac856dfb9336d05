"""train.py --init-from a trained model (a fine-tune that carries its record on) and the drawings a recipe can train on:
digits written on the canvas, and drawings of no digit trained towards the uniform distribution (outlier exposure)."""

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from test_training import TINY, run_train

from vit_demo.data import sketches
from vit_demo.data.datasets import dataset_spec, load_split
from vit_demo.interpret import unfamiliar
from vit_demo.model import VisionTransformer
from vit_demo.training import loop
from vit_demo.training.recipes import RECIPES
from vit_demo.training.step import NO_CLASS, TrainStep, training_batches
from vit_demo.weights import METRICS_FILE, SNAPSHOTS_INDEX, WEIGHTS_FILE, load_snapshots


def test_the_loss_keeps_each_targets_mass():
    # A class's target: exactly F.cross_entropy's label-smoothed loss. A drawing of no digit's (the uniform
    # distribution, weighted w): w times the cross-entropy to the uniform distribution, which smoothing leaves as it is.
    torch.manual_seed(0)
    model = VisionTransformer(dataclasses.replace(RECIPES["mnist"].vit, patch_size=7, dim=32, depth=1, heads=2,
                                                  mlp_dim=64))
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.0), None, 0.1, torch.device("cpu"))
    x = torch.rand(6, 1, 28, 28)
    digits = F.one_hot(torch.tensor([3, 1, 4, 1]), 10).float()
    outlier = torch.full((2, 10), 0.5 / 10)
    with torch.no_grad():
        loss, correct, labelled = step._loss(x, torch.cat([digits, outlier]))
        logits = model(x)
    expected = (4 * F.cross_entropy(logits[:4], digits, label_smoothing=0.1)
                + 2 * 0.5 * -F.log_softmax(logits[4:], 1).mean(1).mean()) / 6
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    assert int(labelled) == 4  # a drawing of no digit has no right answer
    assert int(correct) == int((logits[:4].argmax(1) == torch.tensor([3, 1, 4, 1])).sum())


def test_a_drawing_of_no_digit_gets_the_weighted_uniform_target(mnist_root):
    recipe = dataclasses.replace(RECIPES["mnist"], outlier_drawings=2, outlier_weight=0.3)
    images, labels = load_split("mnist", mnist_root, "test", download=False)
    labels = torch.cat([labels[:3], torch.tensor([NO_CLASS, NO_CLASS])])
    x, target = training_batches(images[:5], labels, recipe, dataset_spec("mnist"), torch.Generator().manual_seed(0), 5)
    assert x.shape == (5, 1, 28, 28)
    assert torch.equal(target[:3], F.one_hot(labels[:3], 10).float())
    assert torch.allclose(target[3:], torch.full((2, 10), 0.03))


def test_no_augment_trains_on_the_images_as_they_are(mnist_root):
    # --no-augment (the shipped digit model's fine-tune): the batch is the images in [0, 1], each draw of the
    # generator left for the order alone; with the augmentation, they move.
    images, labels = load_split("mnist", mnist_root, "test", download=False)
    spec, plain = dataset_spec("mnist"), dataclasses.replace(RECIPES["mnist"], augment=False)
    x, _ = training_batches(images[:8], labels[:8], plain, spec, torch.Generator().manual_seed(0), 8)
    assert torch.equal(x, images[:8].float() / 255)
    moved, _ = training_batches(images[:8], labels[:8], RECIPES["mnist"], spec, torch.Generator().manual_seed(0), 8)
    assert not torch.equal(moved, x)


def test_training_drawings_are_none_the_unfamiliar_rule_is_measured_on():
    # (The rule's other seeds draw photos: outliers made in code, photos as a phone sends them, crops, its read-out.)
    drawn = {unfamiliar.SEEDS[name] for name in ("train", "fit", "measure", "choose", "report", "strokes")}
    assert not set(loop.DRAWING_SEEDS.values()) & drawn


@pytest.mark.slow
def test_a_fine_tune_with_drawings_carries_the_run_on(mnist_root, tmp_path):
    base = run_train(mnist_root, tmp_path, "--train-limit", "600", "--test-limit", "200", "--epochs", "3",
                     "--snapshots", "2", "--calibration-images", "0", *TINY, name="base")
    metrics = run_train(mnist_root, tmp_path, "--train-limit", "600", "--test-limit", "200", "--epochs", "1",
                        "--init-from", str(tmp_path / "base"), "--lr", "1e-4", "--calibration-images", "0",
                        "--canvas-digits", "40", "--outlier-drawings", "60", *TINY, name="tuned")
    # It starts from every tensor of the trained model, head too: the weights moved from there, not from scratch.
    before, after = load_file(tmp_path / "base" / WEIGHTS_FILE), load_file(tmp_path / "tuned" / WEIGHTS_FILE)
    assert set(before) == set(after)
    assert all((after[k] - before[k]).abs().max() < 0.05 for k in before)
    # Its epoch is the run's fourth, its record follows the run's, and the run's snapshots stay for the slider.
    assert metrics["epochs"] == 4 and [h["epoch"] for h in metrics["history"]] == [1, 2, 3, 4]
    assert metrics["history"][:3] == base["history"]
    assert metrics["continues"]["epochs"] == 3 and metrics["continues"]["command"] == base["command"]
    assert metrics["init_from"] == str(tmp_path / "base")
    assert metrics["train_images"] == 600 + 40 + 60
    assert metrics["recipe"]["outlier_drawings"] == 60 and metrics["recipe"]["outlier_weight"] == 0.5
    assert json.loads((tmp_path / "tuned" / METRICS_FILE).read_text())["history"] == metrics["history"]
    assert [s.epoch for s in load_snapshots(tmp_path / "tuned")] == [1, 2]
    assert (tmp_path / "tuned" / SNAPSHOTS_INDEX).read_text() == (tmp_path / "base" / SNAPSHOTS_INDEX).read_text()
    # The drawings it trained on came from the cache the unfamiliar rule's sets use, with seeds of their own.
    drawn, names = sketches.drawing_set("non-digits", 60, loop.DRAWING_SEEDS["non-digits"])
    assert drawn.shape == (60, 1, 28, 28) and len(set(names)) == 58


def test_drawings_are_for_the_digits_only(cifar_root, tmp_path):
    with pytest.raises(SystemExit, match="for mnist only"):
        run_train(cifar_root, tmp_path, "--train-limit", "50", "--epochs", "1", "--outlier-drawings", "10",
                  "--mixup-alpha", "0", "--cutmix-alpha", "0", dataset="cifar10")
    with pytest.raises(SystemExit, match="not mixed with MixUp or CutMix"):  # as the photo recipe's batches are
        run_train(cifar_root, tmp_path, "--train-limit", "50", "--epochs", "1", "--outlier-drawings", "10",
                  dataset="cifar10")


def test_the_two_halves_of_the_kinds_are_every_kind_once():
    every, even, odd = ([name for name, _ in sketches.non_digit_kinds(half)] for half in ("every", "even", "odd"))
    assert len(even) == len(odd) == 29 and sorted(even + odd) == sorted(every)
    assert "doodle/heart" in even and "doodle/cat face" in odd
    _, names = sketches.drawing_set("non-digits", 29, 5, "odd")
    assert names == odd


@pytest.mark.slow  # reads every outside picture (2 minutes on two cores)
def test_pictures_of_no_class_for_photos_are_made_and_cropped_from_the_third_the_rule_learns_from(cifar_root):
    # Half made in code, half crops of the outside pictures of the third the unfamiliar rule learns from (its crops
    # are drawn with another seed; the thirds it is chosen and reported on are never cropped), all of no class.
    from vit_demo.data import outside_photos

    try:
        outside_photos.wallpapers()
    except outside_photos.OutsidePhotosMissing as exc:
        pytest.skip(str(exc))
    photos, _ = load_split("cifar10", cifar_root, "test", download=False)
    recipe = dataclasses.replace(RECIPES["cifar10"], outlier_photos=30, mixup_alpha=0.0, cutmix_alpha=0.0)
    found, labels = loop.photo_outliers(recipe, dataset_spec("cifar10"), photos[:200], seed=0)
    assert found.shape == (30, 3, 32, 32) and found.dtype == torch.uint8 and (labels == NO_CLASS).all()
    again, _ = loop.photo_outliers(recipe, dataset_spec("cifar10"), photos[:200], seed=0)
    assert torch.equal(found, again)
    assert not torch.equal(found[15:], loop.photo_outliers(recipe, dataset_spec("cifar10"), photos[:200], 1)[0][15:])
    assert loop.PHOTO_OUTLIER_SEED not in unfamiliar.SEEDS.values()
    # Their target: the uniform distribution, weighted.
    _, target = training_batches(found[:4], labels[:4], recipe, dataset_spec("cifar10"),
                                 torch.Generator().manual_seed(0), 4)
    assert torch.allclose(target, torch.full((4, 10), recipe.outlier_weight / 10))
    with pytest.raises(SystemExit, match="for cifar10 only"):
        loop.photo_outliers(recipe, dataset_spec("mnist"), photos[:200], seed=0)
    with pytest.raises(ValueError, match="not mixed with MixUp or CutMix"):
        dataclasses.replace(RECIPES["cifar10"], outlier_photos=30)  # as the photo recipe's batches are
