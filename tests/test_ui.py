"""The app's handlers, called directly as the server calls them (the page's numbers: tests/test_page_source.py)."""

import contextlib
import shutil
from collections.abc import Iterator

import gradio as gr
import numpy as np
import pytest
from conftest import PHOTOS, canvas_ink
from PIL import Image, ImageDraw

from vit_demo.app import attention_view, demo, digit_tab, export_view, inside_tab, photo_tab, service, training_view
from vit_demo.app.attention_view import MEAN
from vit_demo.app.components import LARGE
from vit_demo.data.preprocess import CANVAS_SIZE
from vit_demo.pictures import render
from vit_demo.weights import WEIGHTS_ROOT, read_calibration


SEVEN = [[(25, 20), (85, 20), (45, 95)]]


def drawn(strokes) -> service.Analysis:
    """A drawing as the model reads it, analysed."""
    return service.analyse("mnist", canvas_ink(strokes))


def test_layer_and_head_choices():
    analysis = drawn(SEVEN)
    views = {(layer, head): np.asarray(attention_view.selected_view(analysis, layer, head))
             for layer in (1, 6) for head in (MEAN, "head 1", "head 4")}
    assert not np.array_equal(views[(1, "head 1")], views[(6, "head 1")])
    assert not np.array_equal(views[(6, "head 1")], views[(6, "head 4")])


def test_warm_up_runs_every_available_model():
    demo.warm_up()  # must not raise, with or without the CIFAR-10 weights
    assert service.classifier.cache_info().currsize >= 1


def test_a_batch_gets_the_same_answers_as_one_drawing_at_a_time(tmp_path):
    paths = []
    for name, strokes in (("seven", SEVEN), ("one", [[(55, 15), (55, 95)]]), ("blank", [])):
        image = Image.new("L", (CANVAS_SIZE, CANVAS_SIZE), 255)
        for stroke in strokes:
            ImageDraw.Draw(image).line(stroke, fill=0, width=6, joint="curve")
        image.save(tmp_path / f"{name}.png")
        paths.append(str(tmp_path / f"{name}.png"))
    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    batch = [paths[0], str(bad), paths[1], None, paths[2]]
    columns = digit_tab.predict_digits(batch)
    assert len(columns) == 10 and all(len(column) == len(batch) for column in columns)  # 10 outputs: no State
    answers = list(zip(*columns))
    for path, answer in zip(batch, answers):
        alone = list(zip(*digit_tab.predict_digits([path])))[0]
        if alone[0] is not None:  # the same probabilities (up to float rounding: batched matmuls sum differently)
            assert answer[0] == pytest.approx(alone[0], rel=1e-5, abs=1e-7)
        else:
            assert answer[0] is None
        assert answer[1].split(" · ")[0] == alone[1].split(" · ")[0]  # the top class, without the timing
        for picture, picture_alone in zip(answer[2:7] + answer[8:9], alone[2:7] + alone[8:9]):
            assert (picture is None) == (picture_alone is None)
            if picture is not None:
                diff = np.abs(np.asarray(picture, dtype=int) - np.asarray(picture_alone, dtype=int))
                assert diff.max() <= 1  # the same picture, up to a rounding step
    assert max(answers[0][0], key=answers[0][0].get) == "7" and max(answers[2][0], key=answers[2][0].get) == "1"
    assert answers[1][1].startswith("Can't read this image") and answers[1][0] is None
    assert answers[3][1] == answers[4][1] == digit_tab.DRAW_PROMPT


def test_the_photo_tab_says_what_the_model_knows():
    assert all(name in photo_tab.CLASSES_NOTE for name in ("airplane", "ship", "truck"))


def test_the_photo_tab_shows_the_photo_through_the_shipped_models_snapshots():
    # The shipped photo model kept six snapshots of its 300 epochs: the slider has seven stops, the trained model last.
    run = service.training_run("cifar10")
    assert run.problem is None and [s.epoch for s in run.snapshots] == [1, 3, 7, 17, 45, 116] and run.positions == 7
    assert training_view.snapshot_note(run, 1, "ship", "12.3").startswith("**Epoch 1 of 300**: test accuracy then "
                                                                          "**27.33%**")
    assert "epoch 300" in training_view.trained_note(run) and "91.21%" in training_view.trained_note(run)
    path = export_view.on_png(service.analyse("cifar10", PHOTOS / "ship.png"), export_view.TRAINING, 9, MEAN, None,
                              None, 1)
    assert path.endswith("-cls-grid-epoch1.png")


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
    # snapshots. Its training view says so, shows nothing, and has nothing to export.
    with weights_with_only(tmp_path, monkeypatch, "cifar10", (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE),
                           (service.classifier, service.training_run, service.calibration_report)):
        photo = service.analyse("cifar10", PHOTOS / "cat.png")
        assert "before snapshots were kept" in service.training_run("cifar10").problem
        with pytest.raises(gr.Error, match="snapshots"):
            export_view.on_png(photo, export_view.TRAINING, 7, MEAN, None)


def test_inside_the_model_for_both_models():
    for choice, grid in (("Digits (MNIST)", 7), ("Photos (CIFAR-10)", 8)):
        (filters, filters_note, positions, position, position_note, distance, distance_note, reliability,
         reliability_note, importance, importance_note) = inside_tab.inside_views(choice)
        assert "principal components" in filters_note and distance is not None and "pixels" in distance_note
        # The reliability diagram, and the numbers of the record it was drawn from.
        report = read_calibration(WEIGHTS_ROOT / inside_tab.MODELS[choice])
        assert reliability.width > 500
        for shown in (f"**{report['temperature']:.2f}**", f"**{100 * report['before']['ece']:.1f}% → "
                      f"{100 * report['after']['ece']:.1f}%**", f"{report['after']['nll']:.3f}",
                      f"{100 * report['after']['accuracy_overall']:.2f}%"):
            assert shown in reliability_note, shown
        centre = (grid // 2) * grid + grid // 2
        assert f"Patch {centre} " in position_note and position.size == (LARGE, LARGE + render.KEY_HEIGHT)
        # Each picture carries its colour key: the similarity maps' viridis from -1 to 1 under the large one.
        key = np.asarray(position)[LARGE + 12]  # a row through the key's bar
        inked = np.flatnonzero((key != 255).any(axis=1))
        assert tuple(key[inked[0]]) == tuple(render.colormap("viridis")[0])
        assert tuple(key[inked[-1]]) == tuple(render.colormap("viridis")[255])
        assert inside_tab.insides(inside_tab.MODELS[choice]) is inside_tab.insides(inside_tab.MODELS[choice])  # once
    # A click on a cell of the position grid picks that patch.
    x, y = next((x, y) for y in range(0, 800, 4) for x in range(0, 800, 4)
                if render.position_cell_at(x, y, 8, inside_tab.POSITION_CELL) == 9)
    event = gr.SelectData(target=None, data={"index": [x, y], "value": None})
    _, large, note = inside_tab.on_position_click("Photos (CIFAR-10)", event)
    assert note.startswith("Patch 9 (row 2, column 2)")


def test_inside_says_plainly_what_was_never_measured(tmp_path, monkeypatch):
    from vit_demo.weights import CONFIG_FILE, WEIGHTS_FILE

    # The weights, without attention_distance.json, calibration.json, ...
    with weights_with_only(tmp_path, monkeypatch, "mnist", (CONFIG_FILE, WEIGHTS_FILE),
                           (service.classifier, service.calibration_report, inside_tab.insides)):
        views = inside_tab.inside_views("Digits (MNIST)")
        assert views[0] is not None and views[5] is None and views[7] is None and views[9] is None
        assert all("has not been measured" in views[i] for i in (6, 8, 10))  # the distance, reliability, importance
        assert "python" not in views[6] + views[8] + views[10]  # words for the person using the app, not a command


def test_export_for_slides_makes_each_view_1600_pixels_wide_and_a_gif_through_the_layers():
    analysis = drawn(SEVEN)
    names = set()
    for view in export_view.EXPORTED_VIEWS:
        path = export_view.on_png(analysis, view, 3, "head 2", "8")
        with Image.open(path) as picture:
            assert picture.format == "PNG" and picture.width >= 1600, view
        names.add(path.rsplit("/", 1)[-1])
    first = attention_view.first_query_patch(analysis)
    assert names == {"mnist-7-cls-grid.png", "mnist-7-layer3-head2.png", "mnist-7-rollout.png",
                     "mnist-7-relevance-8.png", "mnist-7-patches.png", f"mnist-7-patch{first}-grid.png"}
    query = "Where a patch looks: every layer and head, for the patch set here"
    assert export_view.on_png(analysis, query, 6, MEAN, None, 30).endswith("mnist-7-patch30-grid.png")
    assert [export_view.typed_patch(text) for text in ("", None, " 12 ", "2.5", "abc")] == [None, None, 12, 2.5, "abc"]
    for wrong in (49, -1, 2.5, "abc"):  # the digits' grid has 49 patches: the message names the range
        with pytest.raises(gr.Error, match="numbered 0 to 48"):
            export_view.on_png(analysis, query, 6, MEAN, None, wrong)
    # The same export twice is one file in Gradio's cache, not two.
    with Image.open(export_view.on_png(analysis, export_view.FAITHFULNESS, 6, MEAN, None)) as chart:
        assert chart.width >= 1600
    rollout = "Attention rollout"
    assert export_view.on_png(analysis, rollout, 6, MEAN, None) == export_view.on_png(analysis, rollout, 6, MEAN, None)

    path = export_view.on_gif(analysis, "head 2")
    assert path.endswith("mnist-7-layers-head2.gif")
    with Image.open(path) as gif:
        assert gif.n_frames == 6 and gif.info["loop"] == 0 and gif.info["duration"] > 0
        frames = []
        for index in range(gif.n_frames):
            gif.seek(index)
            frames.append(np.asarray(gif.convert("RGB")))
    assert all(not np.array_equal(a, b) for a, b in zip(frames, frames[1:]))  # each layer its own picture


def test_export_before_any_image_says_so(monkeypatch):
    warnings = []
    monkeypatch.setattr(gr, "Warning", warnings.append)
    assert export_view.on_png(None, next(iter(export_view.EXPORTED_VIEWS)), 6, MEAN, None) is None
    assert export_view.on_gif(None, MEAN) is None
    assert warnings == [export_view.NOTHING_YET] * 2


def test_a_grid_of_more_heads_keeps_its_tiles_readable():
    """A layer x head grid takes at most 480 px on screen (the shipped models': 5 and 7 columns, tiles of 60 px and
    more), or more where that would shrink its tiles under 60 px: a model of 12 heads (issue 31) fills a column of
    up to 855 px."""
    from vit_demo.app.components import GRID_TILE, THUMB, live_grid

    for layers, heads, widest in ((6, 4, 480), (9, 6, 480), (9, 12, 855)):
        frame, _ = render.attention_grid_layout(layers, heads)
        grid = live_grid("grid", "photo", "cls", layers, heads, "a grid")
        assert f"max-width: min(100%, {widest}px)" in grid.html_template
        assert widest * THUMB / frame.width >= GRID_TILE  # each tile at least 60 px where the column is wide enough
