"""train.py --dataset folder:PATH: a folder of one's own pictures, read as the app reads a photo, trained with the photo
recipe, and its weights taken everywhere the shipped photo model is."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import HAS_SHARED_CIFAR, SHARED_DATA
from vit_demo import load_model
from vit_demo.cli import main as cli_main
from vit_demo.data.datasets import (FOLDER_SPLIT_SEED, FOLDER_TEST_SHARE, image_folder_dataset, load_split,
                                    stratified_holdout)
from vit_demo.data.preprocess import preprocess_photo
from vit_demo.training.run import main as train_main
from vit_demo.weights import CONFIG_FILE, METRICS_FILE, load_weights

CLASSES = ("cat", "dog", "frog")  # CIFAR-10's names, so that real photos fill them where ../shared/data has them
PER_CLASS = 30
TINY = ["--epochs", "1", "--patch-size", "8", "--dim", "32", "--depth", "1", "--heads", "2", "--mlp-dim", "64",
        "--batch-size", "16", "--no-progress"]


def write_pictures(folder: Path, name: str, count: int, offset: int = 0) -> list[Path]:
    """``count`` 32x32 RGB PNGs of class ``name`` in ``folder``: CIFAR-10's own where they are here, else generated
    (noise with a block of the class's colour)."""
    folder.mkdir(parents=True)
    if HAS_SHARED_CIFAR:
        sources = sorted((SHARED_DATA / "cifar10" / "train" / name).glob("*.png"))[offset : offset + count]
        return [Path(shutil.copy(source, folder / source.name)) for source in sources]
    rng, label = np.random.default_rng(offset + CLASSES.index(name)), CLASSES.index(name)
    written = []
    for i in range(count):
        image = rng.integers(0, 80, (32, 32, 3), dtype=np.uint8)
        image[8:24, 8:24] = [(label * 97) % 256, (label * 53) % 256, 200]
        written.append(folder / f"{offset + i:04d}.png")
        Image.fromarray(image).save(written[-1])
    return written


def mixed_formats(cat: list[Path]) -> dict[str, Path]:
    """Three of the cat pictures written again as a JPEG, a larger grey PNG and a tall RGBA WebP; returns them."""
    made = {"jpeg": cat[0].with_name("photo.jpg"), "grey": cat[1].with_name("grey.png"),
            "rgba": cat[2].with_name("clear.webp")}
    with Image.open(cat[0]) as image:
        image.convert("RGB").save(made["jpeg"], quality=95)
    with Image.open(cat[1]) as image:
        image.convert("L").resize((100, 80)).save(made["grey"])
    with Image.open(cat[2]) as image:
        rgba = image.convert("RGBA").resize((64, 96))
        rgba.putalpha(200)
        rgba.save(made["rgba"], lossless=True)
    for path in cat[:3]:
        path.unlink()
    return made


@pytest.fixture(scope="module")
def own_folder(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """PATH/<class>/*: 3 classes of 30 pictures, three of the cats in other formats and sizes, one damaged dog."""
    root = tmp_path_factory.mktemp("own") / "pets"
    pictures = {name: write_pictures(root / name, name, PER_CLASS) for name in CLASSES}
    made = mixed_formats(pictures["cat"])
    (root / "dog" / "damaged.png").write_bytes(b"\x89PNG\r\n\x1a\n not a picture after all")
    (root / "dog" / "notes.txt").write_text("not a picture, and not taken for one")
    return root, made


@pytest.fixture(scope="module")
def trained(own_folder, tmp_path_factory) -> tuple[Path, dict, str]:
    """A one-epoch run on ``own_folder``: its weights folder, its metrics and what it said on stderr."""
    root, _ = own_folder
    out = tmp_path_factory.mktemp("weights") / "pets"
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        metrics = train_main(["--dataset", f"folder:{root}", "--out", str(out),
                              "--checkpoint-dir", str(out.parent / "ckpt"), *TINY])
    return out, metrics, said.getvalue()


def test_a_folder_trains_and_its_weights_carry_its_classes_and_preprocessing(own_folder, trained):
    root, made = own_folder
    out, metrics, said = trained
    assert metrics["dataset"] == f"folder:{root.resolve()}"
    config = json.loads((out / CONFIG_FILE).read_text())
    assert config["classes"] == sorted(CLASSES) and config["preprocessing"] == {"method": "photo"}
    info, _ = load_weights(out)
    assert info.classes == CLASSES and info.preprocessing.method == "photo" and info.config.image_size == 32
    # the folder's own mean and std, measured on its training pictures, recorded in the model
    train_x, _ = load_split(info.dataset, root, "train")
    measured = train_x.float().div(255).mean(dim=(0, 2, 3))
    assert info.config.mean == tuple(round(v, 4) for v in measured.tolist())
    # the damaged file skipped and said once; the text file not taken for a picture
    assert said.count("skipped 1 file") == 1 and "dog/damaged.png" in said
    record = json.loads((out / METRICS_FILE).read_text())["image_folder"]
    assert len(record["skipped"]) == 1 and record["skipped"][0].startswith("dog/damaged.png: ")
    # load_model takes it as it takes the shipped photo model, pictures of any format included
    classifier = load_model(out)
    for path in made.values():
        assert classifier.predict(path).label in CLASSES
    assert classifier.classes == CLASSES


def test_the_test_split_is_held_out_stratified_and_recorded(own_folder, trained):
    root, _ = own_folder
    out, _, _ = trained
    record = json.loads((out / METRICS_FILE).read_text())["image_folder"]
    assert record["test_held_out"] == {"share_of_each_class": FOLDER_TEST_SHARE, "seed": FOLDER_SPLIT_SEED}
    readable = {"cat": PER_CLASS, "dog": PER_CLASS, "frog": PER_CLASS}  # (the damaged dog is one more file)
    for name, count in readable.items():
        held = round(FOLDER_TEST_SHARE * count)
        assert record["images_per_class"]["test"][name] == held
        assert record["images_per_class"]["train"][name] == count - held
    info, _ = load_weights(out)
    # the same split every time, whatever the run's seed, and no picture in both
    train_x, _ = load_split(info.dataset, root, "train")
    test_x, test_y = load_split(info.dataset, root, "test")
    assert torch.equal(test_x, load_split(info.dataset, root, "test")[0])
    assert torch.bincount(test_y).tolist() == [3, 3, 3]
    flat = lambda x: {bytes(image.flatten().tolist()) for image in x}  # noqa: E731
    assert not flat(train_x) & flat(test_x)


def test_stratified_holdout_takes_each_classes_share():
    labels = torch.tensor([0] * 50 + [1] * 7 + [2] * 1 + [3] * 2)
    kept, held = stratified_holdout(labels, 0.1, seed=0)
    assert torch.bincount(labels[held], minlength=4).tolist() == [5, 1, 0, 1]
    assert sorted(kept.tolist() + held.tolist()) == list(range(len(labels)))
    assert torch.equal(held, stratified_holdout(labels, 0.1, seed=0)[1])
    assert not torch.equal(held, stratified_holdout(labels, 0.1, seed=1)[1])


def test_pictures_are_read_as_the_app_reads_a_photo(own_folder, tmp_path):
    root, made = own_folder
    spec = image_folder_dataset(root, cache_dir=tmp_path)
    every = torch.cat([load_split(spec, root, split, cache_dir=tmp_path)[0] for split in ("train", "test")])
    as_read = {bytes(image.flatten().tolist()) for image in every}  # (3, 32, 32) uint8 each
    for path in made.values():
        app = torch.from_numpy(np.round(preprocess_photo(path) * 255).astype(np.uint8)).permute(2, 0, 1)
        assert bytes(app.flatten().tolist()) in as_read
    assert spec.classes == CLASSES and len(spec.mean) == 3
    assert len(list(tmp_path.glob("folder-pets-*.pt"))) == 1  # decoded once, cached


def test_train_and_test_folders_are_used_as_they_are(tmp_path, capsys):
    root = tmp_path / "given"
    for name in CLASSES[:2]:
        write_pictures(root / "train" / name, name, 12)
        write_pictures(root / "test" / name, name, 4, offset=12)
    out = tmp_path / "w"
    metrics = train_main(["--dataset", f"folder:{root}", "--out", str(out), "--checkpoint-dir", str(tmp_path / "c"),
                          "--calibration-images", "0", *TINY])
    record = json.loads((out / METRICS_FILE).read_text())["image_folder"]
    assert record["test_held_out"] is None and metrics["test_images"] == 8
    assert record["images_per_class"] == {"train": {"cat": 12, "dog": 12}, "test": {"cat": 4, "dog": 4}}
    assert "skipped" not in capsys.readouterr().err
    capsys.readouterr()
    assert cli_main(["evaluate", "--model", str(out), "--data-dir", str(root)]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 8


@pytest.mark.parametrize("case", ["one class", "missing", "empty class"])
def test_a_folder_that_cannot_be_trained_on_is_refused_in_a_line(case, tmp_path, capsys):
    root = tmp_path / "pictures"
    if case != "missing":
        write_pictures(root / "cat", "cat", 3)
    if case == "empty class":
        (root / "dog").mkdir()
    with pytest.raises(SystemExit) as raised:
        train_main(["--dataset", f"folder:{root}", "--out", str(tmp_path / "w"), *TINY])
    assert raised.value.code == 2
    said = capsys.readouterr().err
    assert len(said.strip().splitlines()) == 1 and said.startswith("train.py: error: ") and "Traceback" not in said
    assert {"one class": "needs at least 2", "missing": "no such folder", "empty class": "holds no pictures"}[case] in said
    assert not (tmp_path / "w").exists()
