"""The rule that flags an image unlike anything the model knows (vit_demo/interpret/unfamiliar.py): the shipped rules'
rates on the held-out sets, against the goals of issue 30 and against their record; the rule as config.json keeps it; a
non-digit drawing through the command line (/classify: tests/test_app_api.py; the page: tests/test_page_numbers.py)."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import HAS_SHARED_CIFAR, HAS_SHARED_MNIST, SHARED_DATA, draw_digit, run_cli
from PIL import Image

from vit_demo import load_model
from vit_demo.data import outliers, sketches
from vit_demo.data.datasets import load_split
from vit_demo.interpret import calibration, unfamiliar
from vit_demo.training.calibrate import data_for
from vit_demo import unfamiliar_rule
from vit_demo.weights import WEIGHTS_ROOT, read_calibration

# Issue 45's goals for the digits (issue 30 asked 80% of the drawings); the photos' are issue 65's (issue 30's: 70%).
DIGIT_GOALS = {"pen digits flagged": 0.02, "non-digits flagged": 0.95, "accuracy": 0.995}
PHOTO_GOALS = {"test photos flagged": 0.05, "test photos of a class flagged": 0.06, "outside photos flagged": 0.90}


def flagged(outputs, clf, images: torch.Tensor) -> np.ndarray:
    """Which of the preprocessed images (N, C, H, W) in [0, 1] the shipped classifier's rule flags, at its temperature
    (``outputs``: the shipped_outputs fixture, which holds the rule's scores); that the classifier flags the same is
    checked below."""
    found = outputs(clf.info.dataset.name, images)
    return (found.scores < clf.info.unfamiliar.thresholds(found.logits)).numpy()


def flagged_as_the_app_asks(clf, images: torch.Tensor) -> np.ndarray:
    """The same, through ``predict_preprocessed`` as the app asks it."""
    inputs = [x[0].numpy() if x.shape[0] == 1 else x.permute(1, 2, 0).numpy() for x in images.float()]
    return np.array([p.unfamiliar for p in clf.predict_preprocessed(inputs, attention=False)])


def recorded(report: dict, name: str) -> dict:
    return next(row for row in report["candidates"] if row["name"] == name)


@pytest.fixture(scope="session")  # (not module: its tests share a worker, conftest.py, but not one after another)
def digit_rates(shipped_outputs):
    """The shipped digit rule's rates on the sets it was not fitted or chosen on, and the accuracy."""
    if not HAS_SHARED_MNIST:
        pytest.skip("the real MNIST test set is not here")
    clf = load_model("mnist", device="cpu")
    data = data_for(WEIGHTS_ROOT / "mnist", "mnist", SHARED_DATA)
    pen = sketches.canvas_digits(data.measure[0], unfamiliar.SEEDS["measure"])
    drawings, _ = sketches.drawing_set("non-digits", unfamiliar.DRAWINGS, unfamiliar.SEEDS["report"])
    strokes, _ = sketches.drawing_set("digits", unfamiliar.STROKE_DIGITS, unfamiliar.SEEDS["strokes"])
    test_x, test_y = load_split("mnist", SHARED_DATA, "test", download=False)
    accuracy = float((shipped_outputs("mnist", test_x).logits.argmax(1) == test_y).double().mean())
    return {"pen digits flagged": flagged(shipped_outputs, clf, pen).mean(),
            "non-digits flagged": flagged(shipped_outputs, clf, drawings).mean(),
            "stroke digits flagged": flagged(shipped_outputs, clf, strokes).mean(), "accuracy": accuracy,
            "sample": torch.cat([pen[::20], drawings[::10]])}  # (366, 1, 28, 28): for the classifier's check


@pytest.mark.slow  # draws 7,160 digits and drawings, or reads 10,000 photos
def test_the_digit_rule_is_the_recorded_choice_and_its_record_holds(digit_rates):
    report = read_calibration(WEIGHTS_ROOT / "mnist")["unfamiliar"]
    rule = load_model("mnist", device="cpu").info.unfamiliar
    assert rule.score == report["score"] and rule.threshold == pytest.approx(report["threshold"], abs=1e-6)
    chosen = recorded(report, report["chosen"])
    assert chosen["outside_flagged_choose"] == max(r["outside_flagged_choose"] for r in report["candidates"] if r["page"])
    assert digit_rates["pen digits flagged"] == pytest.approx(report["flagged"]["test digits written on the canvas"],
                                                              abs=1e-4)
    assert digit_rates["stroke digits flagged"] == pytest.approx(report["flagged"]["stroke digits"], abs=1e-4)
    assert digit_rates["non-digits flagged"] == pytest.approx(report["outside_flagged_report"], abs=1e-4)


@pytest.mark.slow  # draws 7,160 digits and drawings, or reads 10,000 photos
def test_the_digit_rule_meets_its_goals_on_held_out_drawings(digit_rates):
    # Real pen digits (MNIST's test digits written on the canvas, never fitted on) stay almost all unflagged, most
    # non-digit drawings (another seed's than the rule was chosen on) are flagged, and the digits read as before.
    assert digit_rates["pen digits flagged"] <= DIGIT_GOALS["pen digits flagged"]
    assert digit_rates["non-digits flagged"] >= DIGIT_GOALS["non-digits flagged"]
    assert digit_rates["accuracy"] >= DIGIT_GOALS["accuracy"]


@pytest.mark.slow
def test_the_drawings_a_visitor_makes_that_read_as_a_zero_are_flagged():
    # A heart, a smiley, a cloud or a cat's face is a closed round outline, which the model read as a 0 until it was
    # fine-tuned with drawings of no digit (docs/calibration.md): asked as the app asks, on drawings never trained on.
    drawings, names = sketches.drawing_set("non-digits", unfamiliar.DRAWINGS, unfamiliar.SEEDS["report"])
    round_ones = [i for i, name in enumerate(names)
                  if name in ("doodle/heart", "doodle/smiley", "doodle/cloud", "doodle/cat face")]
    assert len(round_ones) == 80
    assert flagged_as_the_app_asks(load_model("mnist", device="cpu"), drawings[round_ones]).mean() >= 0.9


@pytest.fixture(scope="session")
def photo_rates(shipped_outputs):
    if not HAS_SHARED_CIFAR:
        pytest.skip("the real CIFAR-10 test set is not here")
    from vit_demo.data import outside_photos

    try:
        outside = unfamiliar.outside_pictures()
    except outside_photos.OutsidePhotosMissing as exc:
        pytest.skip(str(exc))
    clf = load_model("cifar10", device="cpu")
    test_x, test_y = load_split("cifar10", SHARED_DATA, "test", download=False)
    reported = torch.from_numpy(outside.roles == outside_photos.REPORT)
    test_flags = flagged(shipped_outputs, clf, test_x)
    return {"test photos flagged": test_flags.mean(),
            "by class": [float(test_flags[test_y.numpy() == k].mean()) for k in range(len(clf.classes))],
            "test photos in grey flagged": flagged(shipped_outputs, clf, outliers.grey(test_x)).mean(),
            "outside photos flagged": flagged(shipped_outputs, clf, outside.images[reported]).mean(),
            "sample": torch.cat([test_x[::100], outliers.grey(test_x[::100])]).float() / 255}  # (200, 3, 32, 32)


@pytest.mark.slow  # draws 7,160 digits and drawings, or reads 10,000 photos
def test_the_photo_rule_is_the_recorded_choice_and_flags_few_cifar_test_photos_of_any_class(photo_rates):
    report = read_calibration(WEIGHTS_ROOT / "cifar10")["unfamiliar"]
    rule = load_model("cifar10", device="cpu").info.unfamiliar
    assert rule.class_thresholds == pytest.approx(report["class_thresholds"], abs=1e-6)  # a threshold per class read
    assert photo_rates["test photos flagged"] == pytest.approx(report["flagged"]["test photos"], abs=1e-4)
    assert photo_rates["test photos in grey flagged"] == pytest.approx(report["flagged"]["test photos in grey"],
                                                                       abs=1e-4)
    assert photo_rates["outside photos flagged"] == pytest.approx(report["outside_flagged_report"], abs=1e-4)
    assert photo_rates["by class"] == pytest.approx(report["flagged_by_class"], abs=1e-4)
    assert photo_rates["test photos flagged"] <= PHOTO_GOALS["test photos flagged"]
    assert max(photo_rates["by class"]) <= PHOTO_GOALS["test photos of a class flagged"]


@pytest.mark.slow
def test_the_photo_rule_flags_most_outside_photos(photo_rates):
    # The outside pictures it is reported on were neither trained on (the rule learns from outliers made in code and
    # crops of another third of the sources) nor chosen on.
    assert photo_rates["outside photos flagged"] >= PHOTO_GOALS["outside photos flagged"]


@pytest.mark.slow
def test_a_visitors_own_photos_of_the_ten_are_flagged_no_more_often_than_before():
    # 500 CIFAR-10 test photos, 50 a class, as a phone would send a photo of the same (enlarged, reframed, JPEG), read
    # as the app reads an upload: the rule shipped before flagged 7.60% of 1,500 such photos
    # (benchmarks/photo_rule_limits.py); and scikit-image's cat, a photo of one of the ten, is not flagged.
    if not HAS_SHARED_CIFAR:
        pytest.skip("the real CIFAR-10 test set is not here")
    from vit_demo.data.outside_photos import _package_folder

    clf = load_model("cifar10", device="cpu")
    test_x, _ = load_split("cifar10", SHARED_DATA, "test", download=False)
    sent = unfamiliar.as_a_phone_sends(test_x[::20], np.random.default_rng(0))  # (500, 3, 32, 32): every class
    assert flagged_as_the_app_asks(clf, sent).mean() <= 0.076
    assert not clf.predict(_package_folder("skimage", "data") / "chelsea.png").unfamiliar


@pytest.mark.slow
@pytest.mark.parametrize("name, rates", [("mnist", "digit_rates"), ("cifar10", "photo_rates")])
def test_the_classifier_flags_what_its_rule_flags(name, rates, request, shipped_outputs):
    # The rates above come from the rule applied to the model's outputs; the app asks the classifier.
    sample = request.getfixturevalue(rates)["sample"]
    clf = load_model(name, device="cpu")
    expected = flagged(shipped_outputs, clf, sample)
    assert expected.any() and not expected.all()
    np.testing.assert_array_equal(flagged_as_the_app_asks(clf, sample), expected)


def test_mahalanobis_distance_by_hand_and_its_whitening_from_samples():
    # Two classes in 2-D sharing the covariance diag(4, 1): distances count in its standard deviations.
    means = torch.tensor([[0.0, 0.0], [10.0, 0.0]])
    whitening = torch.diag(torch.tensor([0.5, 1.0]))
    points = torch.tensor([[2.0, 0.0], [0.0, 1.0], [9.0, 2.0]])
    assert unfamiliar_rule.nearest_class_distance(points, means, whitening).tolist() == [1.0, 1.0, 4.25]
    # Fitted from samples of those classes, in 3-D with a third direction of no variance (as LayerNorm leaves one).
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(20_000) % 2
    samples = means[labels] + torch.randn(20_000, 2, generator=generator) * torch.tensor([2.0, 1.0])
    samples = torch.cat([samples, torch.full((20_000, 1), 3.0)], dim=1)
    fitted_means, fitted = unfamiliar.whitening(samples, labels, 2)
    assert fitted_means.dtype == fitted.dtype == np.float16
    distance = unfamiliar_rule.nearest_class_distance(torch.tensor([[2.0, 0.0, 3.0], [0.0, 1.0, 3.0]]),
                                                  torch.from_numpy(fitted_means), torch.from_numpy(fitted))
    assert distance.tolist() == pytest.approx([1.0, 1.0], rel=0.05)


def test_a_distance_rule_keeps_its_numbers_through_config_json():
    # A Mahalanobis rule of every layer's [CLS] features (the shipped digit rule, the energy, has no arrays to keep),
    # fitted on random features of 6 layers, as calibrate fits it.
    generator = torch.Generator().manual_seed(0)
    train, labels = torch.randn(400, 6, 16, generator=generator), torch.arange(400) % 10
    fitted = [unfamiliar.whitening(train[:, layer], labels, 10) for layer in range(6)]
    rule = unfamiliar_rule.UnfamiliarRule("mahalanobis", -30.0, tuple(range(6)), False, np.stack([m for m, _ in fitted]),
                                          np.stack([w for _, w in fitted]), (-15.0,) * 6, (3.0,) * 6)
    again = unfamiliar_rule.UnfamiliarRule.from_dict(json.loads(json.dumps(rule.to_dict())))
    assert np.array_equal(again.means, rule.means) and np.array_equal(again.whitenings, rule.whitenings)
    features, logits = torch.randn(5, 6, 16, generator=generator), torch.randn(5, 10, generator=generator)
    assert torch.equal(again.scores(logits, 0.5, features), rule.scores(logits, 0.5, features))
    with pytest.raises(ValueError, match="needs the \\[CLS\\] features"):
        rule.flags(logits, 0.5)
    broken = {**rule.to_dict(), "spread": rule.to_dict()["spread"][:-1]}
    with pytest.raises(ValueError, match="do not match"):
        unfamiliar_rule.UnfamiliarRule.from_dict(broken)


def test_the_probe_learns_to_tell_outliers_apart_and_keeps_its_numbers_through_config_json():
    # Features (N, 2, 8) of images to keep, centred away from 0, and of outliers shifted along one direction of one
    # layer: the probe flags most new outliers at the threshold that flags 5% of new images to keep.
    generator = torch.Generator().manual_seed(0)
    shift = torch.zeros(2, 8)
    shift[1, 3] = 3.0

    def clouds(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        keep = torch.randn(n, 2, 8, generator=generator) * 2.0 + 5.0
        return keep, torch.randn(n, 2, 8, generator=generator) * 2.0 + 5.0 + 2.0 * shift

    keep, flag = clouds(2000)
    rule = unfamiliar.probe(keep, flag, (0, 1))
    assert rule.weights.dtype == np.float16 and rule.weights.shape == (2, 8)
    assert np.abs(rule.weights[1, 3]) == np.abs(rule.weights).max()  # it reads the direction that tells them apart
    logits = torch.zeros(2000, 10)
    new_keep, new_flag = clouds(2000)
    threshold = calibration.flag_threshold(rule.scores(logits, 1.0, new_keep), 0.05)
    rule = dataclasses.replace(rule, threshold=threshold)
    assert rule.flags(logits, 1.0, new_flag).double().mean() > 0.9
    again = unfamiliar_rule.UnfamiliarRule.from_dict(json.loads(json.dumps(rule.to_dict())))
    assert np.array_equal(again.weights, rule.weights) and again.layers == (0, 1)
    assert torch.equal(again.scores(logits, 1.0, new_flag), rule.scores(logits, 1.0, new_flag))
    with pytest.raises(ValueError, match="needs the \\[CLS\\] features"):
        rule.flags(logits, 1.0)
    with pytest.raises(ValueError, match="do not match"):
        unfamiliar_rule.UnfamiliarRule.from_dict({**rule.to_dict(), "layers": [0]})


def test_the_hidden_layer_read_out_fences_in_what_one_plane_cannot_and_keeps_its_numbers_through_config_json():
    # Features (N, 2, 8) to keep in a ball, outliers in a shell around it, in every direction: no plane tells them
    # apart, a hidden layer of ReLU units can. Each flagged at the threshold that flags 5% of new images to keep.
    generator = torch.Generator().manual_seed(0)

    def clouds(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        keep = torch.randn(n, 2, 8, generator=generator) + 5.0
        around = torch.nn.functional.normalize(torch.randn(n, 16, generator=generator), dim=1)  # (n, 16) unit
        return keep, 5.0 + around.reshape(n, 2, 8) * (6.0 + torch.rand(n, 1, 1, generator=generator))

    keep, flag = clouds(3000)
    new_keep, new_flag = clouds(2000)
    logits = torch.zeros(2000, 10)

    def flagged_share(rule) -> float:
        threshold = calibration.flag_threshold(rule.scores(logits, 1.0, new_keep), 0.05)
        return float(dataclasses.replace(rule, threshold=threshold).flags(logits, 1.0, new_flag).double().mean())

    rule = unfamiliar.mlp(keep, flag, (0, 1))
    assert flagged_share(rule) > 0.9 and flagged_share(unfamiliar.probe(keep, flag, (0, 1))) < 0.3
    assert rule.weights.dtype == np.float16 and rule.weights.shape == (2, 8, unfamiliar.MLP_HIDDEN)
    assert np.array_equal(unfamiliar.mlp(keep, flag, (0, 1)).weights, rule.weights)  # seeded: the same rule again
    # The score by hand, for one image: relu(x . W + b) . o + bias.
    x, w = new_flag[0].double().numpy().ravel(), rule.weights.astype(np.float64).reshape(16, -1)
    by_hand = np.maximum(x @ w + np.array(rule.hidden_bias), 0) @ np.array(rule.output) + rule.bias
    assert float(rule.scores(logits[:1], 1.0, new_flag[:1])[0]) == pytest.approx(by_hand, rel=1e-12)
    again = unfamiliar_rule.UnfamiliarRule.from_dict(json.loads(json.dumps(rule.to_dict())))
    assert np.array_equal(again.weights, rule.weights) and again.layers == (0, 1)
    assert torch.equal(again.scores(logits, 1.0, new_flag), rule.scores(logits, 1.0, new_flag))
    with pytest.raises(ValueError, match="do not match"):
        unfamiliar_rule.UnfamiliarRule.from_dict({**rule.to_dict(), "output": rule.output[1:]})


def test_the_probe_keeps_training_photos_as_the_model_reads_them_and_as_a_phone_sends_them(monkeypatch):
    # uint8 photos and the phone's float ones go through the model each as they are (joined as one tensor, the uint8
    # ones would be read as floats of 0 to 255), and a float image outside [0, 1] is refused.
    from vit_demo.model import VisionTransformer, ViTConfig

    monkeypatch.setattr(unfamiliar, "OUTLIERS_PER_KIND", 2)
    model = VisionTransformer(ViTConfig(image_size=32, in_channels=3, dim=16, depth=2, heads=2, mlp_dim=32,
                                        mean=(0.5,) * 3, std=(0.25,) * 3)).eval()
    photos = torch.randint(0, 256, (30, 3, 32, 32), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    crops = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    sets = unfamiliar.probe_sets(model, photos, crops)
    colour = unfamiliar.outputs(model, photos)  # TRAIN_IMAGES of them, as many as there are
    torch.testing.assert_close(sets.keep.features[:30], colour.features)
    after = unfamiliar.TRAIN_IMAGES + unfamiliar.GREY_TRAIN_IMAGES + 3 * unfamiliar.OUTLIERS_PER_KIND  # the photos
    sent = unfamiliar.as_a_phone_sends(photos[torch.arange(after, after + 30) % 30],  # after those made outliers of
                                       np.random.default_rng(unfamiliar.SEEDS["phone"]))
    assert sent.dtype == torch.float32 and 0 <= float(sent.min()) and float(sent.max()) <= 1
    torch.testing.assert_close(sets.keep.features[-30:], unfamiliar.outputs(model, sent).features)
    torch.testing.assert_close(sets.crops.features, unfamiliar.outputs(model, crops).features)
    assert len(sets.outliers.logits) == 2 * len(outliers.KINDS) + 3
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        unfamiliar.outputs(model, photos.float())


def test_the_outside_pictures_are_split_by_source_and_the_pages_photos_are_reported_on():
    from vit_demo.data import outside_photos

    names = [f"{source}{part}" for source in ("a.png", "b.png", "c.png", "d.png", *outside_photos.PAGE_PHOTOS)
             for part in ("", "#quarter1", "#quarter4")] + [f"lfw_subset.npy#face{i}" for i in range(1, 7)]
    role = dict(zip(names, outside_photos.roles(names)))
    for source in ("a.png", "b.png", "c.png", "d.png", *outside_photos.PAGE_PHOTOS):  # a picture's quarters with it
        assert role[source] == role[f"{source}#quarter1"] == role[f"{source}#quarter4"]
    assert [role[s] for s in ("a.png", "b.png", "c.png", "d.png")] == [0, 1, 2, 0]  # every third source
    assert {role[p] for p in outside_photos.PAGE_PHOTOS} == {outside_photos.REPORT}
    assert sorted(role[f"lfw_subset.npy#face{i}"] for i in range(1, 7)) == [0, 0, 1, 1, 2, 2]
    picture = np.arange(300 * 400 * 3, dtype=np.uint8).reshape(300, 400, 3)
    crops = outside_photos.crops([("a.png", picture), ("a.png#quarter1", picture[:150, :200])],
                                 np.random.default_rng(0))
    assert len(crops) == outside_photos.CROPS and {name for name, _ in crops} == {"a.png"}  # of whole pictures
    assert all(c.shape[0] == c.shape[1] and 75 <= c.shape[0] <= 300 for _, c in crops)


def test_outliers_are_made_the_same_way_each_time_half_of_each_kind_grey():
    photos = torch.randint(0, 256, (12, 3, 32, 32), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    made = outliers.outliers(photos, 4, seed=1)
    assert made.shape == (4 * len(outliers.KINDS), 3, 32, 32) and made.dtype == torch.uint8
    assert torch.equal(made, outliers.outliers(photos, 4, seed=1))
    grey = (made[:, 0] == made[:, 1]).flatten(1).all(1) & (made[:, 1] == made[:, 2]).flatten(1).all(1)  # (N,)
    assert grey.reshape(len(outliers.KINDS), 4)[:, :2].all()
    assert not grey.reshape(len(outliers.KINDS), 4)[:, 2:].any()
    # The tiles are the photos' own pixels, in another order.
    tiles = outliers.shuffled_tiles(photos[:4], 4, torch.Generator().manual_seed(2))
    assert torch.equal(tiles.flatten(1).sort(1).values, photos[:4].flatten(1).sort(1).values)


def non_digit_files(folder) -> dict[str, str]:
    """Drawings the issue names (a dot, "#", a letter A, a scribble) as a visitor's PNGs: {path: what it is}."""
    found = {}
    for name, kind in (("dot", "dots/dot"), ("hash", "hash/#"), ("A", "letter/A"), ("scribble", "scribble/scribble")):
        make = dict(sketches.non_digit_kinds())[kind]
        ink = sketches.canvas_drawing(make(np.random.default_rng(3)), np.random.default_rng(4))
        path = folder / f"{name}.png"
        Image.fromarray(255 - ink).save(path)  # dark ink on white, as a sketchpad saves it
        found[str(path)] = name
    return found


def test_cli_says_a_non_digit_drawing_is_unfamiliar_and_a_digit_is_not(tmp_path):
    drawings = non_digit_files(tmp_path)
    seven = tmp_path / "seven.png"
    draw_digit("7", 300, (20, 20, 260), 0.08).save(seven)
    result = run_cli("predict", "--model", "mnist", str(seven), *drawings)
    assert result.returncode == 0, result.stderr
    lines = {line["file"]: line for line in map(json.loads, result.stdout.splitlines())}
    assert lines[str(seven)]["label"] == "7" and lines[str(seven)]["unfamiliar"] is False
    assert {drawings[path]: line["unfamiliar"] for path, line in lines.items() if path in drawings} == {
        name: True for name in drawings.values()}
