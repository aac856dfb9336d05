"""The page's layout and what it is made from (vit_demo/page), in Python; the page itself in a browser:
tests/test_browser.py (the app) and tests/test_static_space.py (the static Space)."""

import contextlib
import html
import re
import shutil
from collections.abc import Iterator

import numpy as np
from PIL import Image

from conftest import REPO

from vit_demo.app import demo, service
from vit_demo.deploy.space import accuracy_note
from vit_demo.interpret import heads
from vit_demo.model import ViTConfig
from vit_demo.page import inside, layout
from vit_demo.page.captions import unfamiliar_text
from vit_demo.page.description import description
from vit_demo.pictures import render
from vit_demo.weights import WEIGHTS_ROOT, read_calibration, read_metrics


def test_warm_up_runs_every_available_model():
    demo.warm_up()  # must not raise, with or without the CIFAR-10 weights
    assert service.classifier.cache_info().currsize >= 1


def page(insides: dict | None = None) -> str:
    """The page's HTML, its files where the static site has them (the Inside tab without ``insides``)."""
    return layout.page_html(insides or {}, lambda path: path)


def test_the_photo_tab_says_what_the_model_knows():
    classes = re.search(r'<div class="vd-note" id="photo-classes">(.*?)</div>', page()).group(1)
    assert classes.startswith("<b>It knows these ten:</b> airplane, automobile, bird") and "truck." in classes
    assert "Anything else gets one of these ten, with a warning" in classes  # behind its "?"


def test_the_photo_tab_shows_the_photo_through_the_shipped_models_snapshots():
    # The shipped photo model kept six snapshots of its 300 epochs: the slider has seven stops, the trained model last.
    run = service.training_run("cifar10")
    assert run.problem is None and [s.epoch for s in run.snapshots] == [1, 3, 7, 17, 45, 116] and run.positions == 7
    notes = [s["note"] for s in description("cifar10", "", "", "models/cifar10/")["snapshots"]]  # the page's
    assert len(notes) == 6 and notes[0] == ("<b>Epoch 1 of 300</b>: test accuracy then <b>58.92%</b>. For this image "
                                            "it said <b>{label}</b> ({percent}%).")
    section = page().split('id="photo-training-position"')[1]
    assert 'type="range" min="1" max="7" value="7"' in section and 'data-positions="7"' in section
    assert ('data-note="&lt;b&gt;The trained model&lt;/b&gt; (epoch 300, test accuracy &lt;b&gt;94.40%&lt;/b&gt; of '
            "the 10,000 test images): the views above.") in section
    # It began from an MAE-pretrained encoder (metrics.json's init_from), which is why its first snapshot reads well;
    # the digit model trained from random weights says nothing of the kind.
    training = {tab: page().split(f'id="{tab}-training-title"')[1].split("</div>")[0] for tab in ("photo", "digit")}
    assert service.training_run("cifar10").pretrained and "did not start from random weights" in training["photo"]
    assert not service.training_run("mnist").pretrained and "random weights" not in training["digit"]


@contextlib.contextmanager
def weights_with_only(tmp_path, monkeypatch, model: str, files: tuple[str, ...], caches: tuple) -> Iterator[None]:
    """The app's ``model`` served from a copy of its weights folder that holds only ``files``, for the ``with``;
    ``caches``: the app's functions that keep what they read of the weights, cleared before and after."""
    (tmp_path / model).mkdir()
    for name in files:
        shutil.copy(WEIGHTS_ROOT / model / name, tmp_path / model / name)
    monkeypatch.setenv(service.WEIGHTS_ENV, str(tmp_path))
    for cached in caches:
        cached.cache_clear()
    try:
        yield
    finally:
        for cached in caches:
            cached.cache_clear()


def test_weights_without_snapshots_say_so_in_place_of_the_slider(tmp_path, monkeypatch):
    from vit_demo.weights import CONFIG_FILE, METRICS_FILE, WEIGHTS_FILE

    # Weights trained before train.py kept snapshots (or with --snapshots 0): the shipped photo model without its
    # snapshots. Its training view says so in place of the slider and the grid.
    with weights_with_only(tmp_path, monkeypatch, "cifar10", (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE),
                           (service.classifier, service.training_run, service.calibration_report)):
        run = service.training_run("cifar10")
        assert "before snapshots were kept" in run.problem
        html = page()
        assert '<p class="vd-note" id="photo-training-note">This model was trained before snapshots' in html
        assert "photo-training-position" not in html and 'id="photo-training"' not in html


def test_inside_the_model_for_both_models(tmp_path):
    insides = {model: inside.write_insides(model, tmp_path / model) for model in ("mnist", "cifar10")}
    html = page(insides)
    for model, grid in (("mnist", 7), ("cifar10", 8)):
        found, data = insides[model]
        notes = " ".join(re.findall(r'<p class="vd-note">(.*?)</p>', html.split(f'data-model="{model}"')[1]
                                    .split("vd-inside-model")[0]))
        assert "principal components" in notes and found.distance is not None and "pixels" in notes
        # The reliability diagram, and the numbers of the record it was drawn from.
        report = read_calibration(WEIGHTS_ROOT / model)
        assert found.reliability.width > 500
        for shown in (f"<b>{report['temperature']:.2f}</b>", f"<b>{100 * report['before']['ece']:.1f}% → "
                      f"{100 * report['after']['ece']:.1f}%</b>", f"{report['after']['nll']:.3f}"):
            assert shown in notes, shown
        # Each accuracy says which images it is of, and how many, from the records: the calibration's, of the images
        # its temperature was not fitted on ("the other 5,000 test images": those its reliability bins count)...
        measured = sum(report["after"]["count"])
        assert f"{measured:,} test images" in report["measured_on"]
        assert (f"the accuracy stays {100 * report['after']['accuracy_overall']:.2f}% of {report['measured_on']}, "
                "those the temperature was not fitted on.") in notes
        # ...and the heads', of the images their importance was measured on (head_importance.json).
        record = heads.read_head_importance(WEIGHTS_ROOT / model)
        assert (f"Accuracy with every head on: <b>{100 * record['baseline']:.1f}%</b> of the {record['images']:,} "
                f"{record['split']} images importance was measured on.") in notes
        # Which heads matter: the importance and the pruning curves' widest gap.
        assert "Michel et al., 2019" in notes and "most important heads off" in notes
        centre = (grid // 2) * grid + grid // 2
        assert data["start"] == centre and data["captions"][centre].startswith(f"Patch {centre} ")
        assert sorted(p.stem for p in (tmp_path / model).glob("*.png")) == data["pictures"]
        # Every patch's map in one picture, each with its colour key: viridis from -1 to 1 under the map.
        width, height = data["size"]
        assert (width, height) == (inside.LARGE, inside.LARGE + render.KEY_HEIGHT)
        every_map = np.asarray(Image.open(tmp_path / model / "position.png").convert("RGB"))
        assert every_map.shape == (grid * height, grid * width, 3)
        key = every_map[inside.LARGE + 12, :width]  # a row through the first map's key
        inked = np.flatnonzero((key != 255).any(axis=1))
        assert tuple(key[inked[0]]) == tuple(render.colormap("viridis")[0])
        assert tuple(key[inked[-1]]) == tuple(render.colormap("viridis")[255])
    # A cell's box, in shares of the grid picture: patch 9 of the photos' 8 x 8 grid is row 2, column 2.
    left, top, right, bottom = data["boxes"][9]
    assert 0 < left < right < 0.5 and 0 < top < bottom < 0.5
    assert data["captions"][9].startswith("Patch 9 (row 2, column 2)")


def test_a_models_test_accuracy_names_its_test_images_on_the_page_in_the_readme_and_the_spaces():
    # The trained model's accuracy (metrics.json: test_accuracy over test_images) is said with its image count in
    # the training view, in the README's results (its header names the count once for both rows) and in a Space's
    # README; the other figures the page shows name their own images (test_inside_the_model_for_both_models).
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    header = next(line for line in readme.splitlines() if line.startswith("| model |"))
    for prefix, model, row in (("digit", "mnist", "| MNIST:"), ("photo", "cifar10", "| CIFAR-10:")):
        metrics = read_metrics(WEIGHTS_ROOT / model)
        accuracy, images = 100 * metrics["test_accuracy"], metrics["test_images"]
        section = html.unescape(page().split(f'id="{prefix}-training-position"')[1])
        assert f"test accuracy <b>{accuracy:.2f}%</b> of the {images:,} test images)" in section
        assert f"| **{accuracy:.2f}%** |" in next(line for line in readme.splitlines() if line.startswith(row))
        assert f"accuracy on the {images:,} test images" in header
        assert accuracy_note(model) == f", {accuracy:.2f}% of its {images:,} test images"
        # The heads' board says over how many images of which split their importance was measured (board.js).
        record = heads.read_head_importance(WEIGHTS_ROOT / model)
        matter = layout.which_heads_matter(model)
        assert (matter["images"], matter["split"]) == (record["images"], record["split"])
    # The photos' notice of an unfamiliar photo: how often the model reads such photos right, of how many
    # (calibration.json: its share flagged of its own test photos, and their accuracy).
    found = read_calibration(WEIGHTS_ROOT / "cifar10")["unfamiliar"]
    count = found["familiar_images"]["test photos"]
    assert (f"Of the {round(found['flagged']['test photos'] * count):,} of its {count:,} test photos that look this "
            f"unfamiliar to it, it reads {100 * found['accuracy_on_flagged']:.0f}% right.") in unfamiliar_text("cifar10")


def test_inside_says_plainly_what_was_never_measured(tmp_path, monkeypatch):
    from vit_demo.weights import CONFIG_FILE, WEIGHTS_FILE

    # The weights, without attention_distance.json, calibration.json, ...
    with weights_with_only(tmp_path, monkeypatch, "mnist", (CONFIG_FILE, WEIGHTS_FILE),
                           (service.classifier, service.calibration_report)):
        found = inside.insides("mnist")
        assert found.filters is not None and found.distance is None and found.reliability is None
        assert found.importance is None
        html = page({"mnist": inside.write_insides("mnist", tmp_path / "pictures")})
        notes = " ".join(re.findall(r'<p class="vd-note">(.*?)</p>', html.split('id="tab-inside"')[1]))
        assert notes.count("has not been measured") == 3
        assert "python" not in notes  # words for the person using the page, not a command


def test_a_grid_of_more_heads_keeps_its_tiles_readable():
    """A layer x head grid takes at most 480 px on screen (the shipped models': 5 and 7 columns, tiles of 60 px and
    more), or more where that would shrink its tiles under 60 px: a model of 12 heads fills a column of up to
    855 px."""
    for layers, heads, widest in ((6, 4, 480), (9, 6, 480), (9, 12, 855)):
        frame, _ = render.attention_grid_layout(layers, heads)
        config = ViTConfig(dim=12 * heads, depth=layers, heads=heads)
        assert layout.grid_geometry(config)["widest"] == widest
        assert widest * layout.THUMB / frame.width >= layout.GRID_TILE  # tiles of 60 px where the column allows
