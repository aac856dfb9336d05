"""The app's handlers, called directly as the server calls them."""

import base64
import contextlib
import json
import shutil
from collections.abc import Iterator

import gradio as gr
import numpy as np
import pytest
import torch
from conftest import PHOTOS, read_live_grid, read_live_map, read_live_payload
from PIL import Image, ImageDraw

from vit_demo.app import (attention_view, demo, digit_tab, explanation_view, export_view, inside_tab, page_numbers,
                          photo_tab, service, training_view)
from vit_demo.app.attention_view import MEAN
from vit_demo.app.canvas import decode_drawing
from vit_demo.app.components import LARGE
from vit_demo.data.outside_photos import outside_photos
from vit_demo.data.preprocess import CANVAS_SIZE, InputError
from vit_demo.interpret import calibration, faithfulness
from vit_demo.pictures import render
from vit_demo.weights import WEIGHTS_ROOT, read_calibration


def canvas_value(digit_strokes) -> str:
    """What the browser canvas sends: CANVAS_SIZE x CANVAS_SIZE bytes, ink = 255, base64."""
    image = Image.new("L", (CANVAS_SIZE, CANVAS_SIZE), 0)
    draw = ImageDraw.Draw(image)
    for stroke in digit_strokes:
        draw.line(stroke, fill=255, width=6, joint="curve")
    return base64.b64encode(np.asarray(image).tobytes()).decode()


SEVEN = [[(25, 20), (85, 20), (45, 95)]]


def test_decode_drawing():
    assert decode_drawing("") is None and decode_drawing(None) is None
    drawing = decode_drawing(canvas_value(SEVEN))
    assert drawing.shape == (CANVAS_SIZE, CANVAS_SIZE) and drawing.max() == 255
    for bad, message in (("not base64!", "base64"), (base64.b64encode(b"123").decode(), "bytes"), (42, "string")):
        with pytest.raises(InputError, match=message):
            decode_drawing(bad)


def drawn(strokes) -> service.Analysis:
    """A drawing as the model reads it, analysed."""
    return service.analyse("mnist", decode_drawing(canvas_value(strokes)))


def test_a_drawing_is_answered_once_with_every_views_numbers():
    answer = digit_tab.stroke({"drawing": canvas_value(SEVEN), "choice": None})  # as the canvas asks
    assert max(answer["probs"], key=answer["probs"].get) == "7" and answer["label"] == "7"
    assert answer["notice"] == ""  # a digit is nothing to warn about
    assert "ms on" in answer["info"]
    # The prediction and every view go to the page as numbers, in one answer of some 7 KB, which draw what the
    # server would draw.
    numbers = json.dumps(answer)
    assert len(numbers) < 10_000
    analysis = drawn(SEVEN)
    image, maps = read_live_payload(numbers)
    np.testing.assert_allclose(image, analysis.input, atol=1e-6)  # exactly what the model read (8-bit, as MNIST)
    assert maps.shape == (6, 5, 7, 7) and image.shape == (28, 28)
    for layer, head, column in ((6, MEAN, 4), (2, "head 3", 2)):
        served = np.asarray(attention_view.selected_view(analysis, layer, head), dtype=float)
        from_numbers = np.asarray(render.overlay(image, maps[layer - 1, column], LARGE), dtype=float)
        assert np.abs(served - from_numbers).mean() < 1.0  # levels of 255: quantising the map to uint8
    page = json.loads(numbers)
    patch = attention_view.first_query_patch(analysis)
    assert page["key"] == page_numbers.image_key(analysis.input) and page["label"] == "7" and page["patch"] == patch
    answers = page["answers"]
    for reply, exact in ((answers["rollout"]["map"], analysis.rollout),
                         (answers["relevance"]["7"], analysis.relevance)):
        np.testing.assert_allclose(read_live_map(reply), exact / exact.max(), atol=0.5 / 255 + 1e-9)
    assert answers["relevance"]["7"]["title"].startswith("<b>Why 7?</b>")
    # Where the first query patch looks: its maps' numbers, as render.attention_grid would show them.
    query = answers["query"][str(patch)]
    np.testing.assert_allclose(read_live_grid(query, (6, 5, 7, 7)),
                               page_numbers.quantise(page_numbers.grid_maps(analysis.attention, 1 + patch)) / 255)
    assert f"Where patch {patch} looks" in query["title"]
    assert analysis.attention.shape == (6, 4, 50, 50) and analysis.relevance.shape == (7, 7)
    # Another class to explain: its relevance comes with the answer.
    other = digit_tab.stroke({"drawing": canvas_value(SEVEN), "choice": "1"})
    assert list(other["answers"]["relevance"]) == ["1"] and other["label"] == "7"
    # With the relevance view off screen, none (the view asks for it when it comes into view); the rest is the same.
    lean = digit_tab.stroke({"drawing": canvas_value(SEVEN), "choice": "1", "relevance": False})
    assert "relevance" not in lean["answers"] and lean["label"] == "7"
    np.testing.assert_allclose(read_live_payload(json.dumps(lean))[1], maps, atol=1 / 255)


def test_blank_and_cleared_canvas_guess_nothing():
    for value in ("", canvas_value([])):
        assert digit_tab.on_drawing(value) == {"message": page_numbers.caption_html(digit_tab.DRAW_PROMPT)}


def test_a_drawing_that_cant_be_read_is_said_in_place_of_the_prediction():
    for request, why in (({"drawing": "@@@"}, "Can't read this drawing: the drawing is not valid base64"),
                         ({"drawing": canvas_value(SEVEN), "choice": "dog"}, "unknown class 'dog'"),
                         ({"drawing": canvas_value(SEVEN), "choice": 7}, "There is no class 7"),
                         ("a drawing", "A drawing is sent as a JSON object")):
        answer = digit_tab.stroke(request)
        assert list(answer) == ["message"] and why in answer["message"], (request, answer)


def test_a_button_reads_the_image_back_from_the_page(tmp_path):
    """The faithfulness and export buttons send the tab's numbers back: the image they name is the one analysed."""
    answer = digit_tab.stroke({"drawing": canvas_value(SEVEN), "choice": None})
    again = export_view.image_analysis("mnist", json.dumps(answer))
    np.testing.assert_array_equal(again.input, drawn(SEVEN).input)
    assert again.label == "7"
    for nothing in ("", None, json.dumps({"message": "Draw a digit"}), "not JSON"):
        assert export_view.image_analysis("mnist", nothing) is None


def test_layer_and_head_choices():
    analysis = drawn(SEVEN)
    views = {(layer, head): np.asarray(attention_view.selected_view(analysis, layer, head))
             for layer in (1, 6) for head in (MEAN, "head 1", "head 4")}
    assert not np.array_equal(views[(1, "head 1")], views[(6, "head 1")])
    assert not np.array_equal(views[(6, "head 1")], views[(6, "head 4")])


def test_the_page_asks_for_another_patch_from_its_pixels():
    analysis = drawn(SEVEN)
    image = digit_tab.on_drawing(canvas_value(SEVEN))["image"]
    ask = attention_view.ask_query("mnist")
    reply = ask({"image": image, "patch": 19})
    # Computed from the page's copy of the input, which is exactly the model's: the same maps as the analysis'.
    assert reply["key"] == page_numbers.image_key(analysis.input) and reply["patch"] == 19
    np.testing.assert_array_equal(read_live_grid(reply, (6, 5, 7, 7)),
                                  page_numbers.quantise(page_numbers.grid_maps(analysis.attention, 20)) / 255)
    assert "Where patch 19 looks" in reply["title"]
    # A request the page would never send gets a reason, not a traceback.
    for bad, why in (({"image": image, "patch": 49}, "numbered 0 to 48"), ({"image": image, "patch": "3"}, "no patch"),
                     ({"image": "@@", "patch": 3}, "base64"), ({"image": image[:40], "patch": 3}, "bytes"),
                     ("patch 3", "JSON object")):
        assert why in ask(bad)["error"]


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


def test_why_this_class_and_why_not_another():
    analysis, numbers = drawn(SEVEN), json.dumps(digit_tab.on_drawing(canvas_value(SEVEN)))
    clf = service.classifier("mnist")
    ask = explanation_view.ask_relevance("mnist")
    eight = ask({"image": json.loads(numbers)["image"], "label": "8"})
    assert eight["title"].startswith("<b>Why not 8?</b>") and "the model says <b>7</b>" in eight["title"]
    seven = json.loads(numbers)["answers"]["relevance"]["7"]
    assert not np.array_equal(read_live_map(seven), read_live_map(eight))  # the numbers the page draws
    # They are the Python API's map for that class.
    exact = clf.relevance_preprocessed([analysis.input], ["8"])[0]
    np.testing.assert_allclose(read_live_map(eight), exact / exact.max(), atol=0.5 / 255 + 1e-6)
    np.testing.assert_allclose(explanation_view.relevance_map(analysis, "8"), exact, rtol=1e-5)
    assert "no class" in ask({"image": json.loads(numbers)["image"], "label": "eleven"})["error"]
    # Picked before drawing, the class is explained with the prediction, in the same pass.
    picked = digit_tab.on_drawing(canvas_value(SEVEN), "8")["answers"]["relevance"]
    assert list(picked) == ["8"] and picked["8"]["title"].startswith("<b>Why not 8?</b>")


def test_scoring_the_maps_of_the_image_in_hand():
    analysis = drawn(SEVEN)
    image = digit_tab.on_drawing(canvas_value(SEVEN))["image"]
    reply = explanation_view.ask_faithfulness("mnist")({"image": image})
    # The verdict on this image's own curves, against the spread of its random rankings, with the curves drawn.
    curves = explanation_view.map_curves(analysis)
    verdict = faithfulness.verdict(curves)
    assert reply["key"] == page_numbers.image_key(analysis.input) and reply["label"] == "7"
    assert reply["text"] == page_numbers.caption_html(explanation_view.verdict_text(verdict, "7"))
    assert f"±{verdict.deletion_noise:.2f}" in reply["text"] and f"±{verdict.insertion_noise:.2f}" in reply["text"]
    for kind, found in curves.items():
        np.testing.assert_allclose(reply["curves"][kind]["deletion"], found.deletion[0], rtol=1e-6)
        assert reply["curves"][kind]["insertion_auc"] == pytest.approx(float(found.insertion_auc[0]), rel=1e-6)
    assert reply["noise"] == {"deletion": verdict.deletion_noise, "insertion": verdict.insertion_noise}
    assert reply["where"] == "on the server" and reply["ms"] > 0
    assert "error" in explanation_view.ask_faithfulness("mnist")({"image": "@@"})


@pytest.mark.slow
def test_the_training_slider_shows_the_model_as_it_was(snapshot_weights, monkeypatch):
    monkeypatch.setenv(service.WEIGHTS_ENV, str(snapshot_weights))
    for cached in (service.classifier, service.training_run, service.calibration_report):
        cached.cache_clear()
    try:
        run = service.training_run("mnist")
        assert run.problem is None and [s.epoch for s in run.snapshots] == [1, 2, 3] and run.positions == 4
        analysis = drawn(SEVEN)
        ask = training_view.ask_snapshot("mnist")
        image = page_numbers.image_text(analysis.input)  # the page's copy of the input
        first = ask({"image": image, "position": 1})
        first_note = first["note"]
        assert first_note.startswith("<b>Epoch 1 of 4</b>")
        assert f"{100 * run.snapshots[0].test_accuracy:.2f}%" in first_note
        # What that snapshot said, calibrated with its own temperature (the run fitted one per snapshot).
        snapshot = run.snapshots[0]
        assert snapshot.temperature != 1.0
        with torch.no_grad():
            said = snapshot.model(service.classifier("mnist").batch([analysis.input]))[0]  # (10,) logits
        probs = calibration.probabilities(said, snapshot.temperature)
        assert f"({100 * float(probs.max()):.1f}%)" in first_note
        later = ask({"image": image, "position": 3})
        # Each snapshot's grid goes to the page as its maps' numbers: the attention changed as it trained.
        first_maps, later_maps = (read_live_grid(numbers, (6, 5, 7, 7)) for numbers in (first, later))
        assert not np.array_equal(first_maps, later_maps)
        with torch.no_grad():
            _, attention = run.snapshots[0].model(service.classifier("mnist").batch([analysis.input]),
                                                  return_attention=True)
        expected = page_numbers.grid_maps(attention[0].numpy())
        np.testing.assert_allclose(first_maps, expected / expected.max(axis=(-2, -1), keepdims=True),
                                   atol=0.5 / 255 + 1e-6)
        # The last position is the trained model, whose grid the page draws from the tab's numbers: not asked for.
        assert "numbered 1 to 3" in ask({"image": image, "position": 4})["error"]
        assert "The trained model" in training_view.trained_note(run) and "epoch 4" in training_view.trained_note(run)
        # Exported for slides, at the slider's position.
        from vit_demo.app import export_view

        for position, name in ((2, "-cls-grid-epoch2.png"), (4, "-cls-grid-trained.png")):
            path = export_view.on_png(analysis, export_view.TRAINING, 6, MEAN, None, None, position)
            assert path.endswith(name)
            with Image.open(path) as picture:
                assert picture.width >= 1600
    finally:
        for cached in (service.classifier, service.training_run, service.calibration_report):
            cached.cache_clear()


def test_the_photo_tab_says_what_the_model_knows_and_reads_and_flags_the_unfamiliar(tmp_path):
    assert all(name in photo_tab.CLASSES_NOTE for name in ("airplane", "ship", "truck"))
    portrait = tmp_path / "moon.png"  # no CIFAR-10 class, and flagged (the astronaut no longer is, at the stricter rule)
    Image.fromarray(dict(outside_photos())["moon.png"]).save(portrait)
    numbers = photo_tab.on_photo(str(portrait))
    answer, analysis = json.loads(numbers), photo_tab.analyse_photo(str(portrait))
    report = read_calibration(WEIGHTS_ROOT / "cifar10")["unfamiliar"]
    assert "unlike the photos the model knows" in answer["notice"]
    assert f"reads {100 * report['accuracy_on_flagged']:.0f}% right" in answer["notice"]
    assert analysis.unfamiliar and max(answer["probs"], key=answer["probs"].get) == analysis.label == answer["label"]
    # What the model reads, which the page draws enlarged beside the photo: the centre square of the 512 x 512
    # photo, at 32 x 32.
    image, _ = read_live_payload(numbers)
    assert image.shape == (32, 32, 3)
    np.testing.assert_allclose(image, analysis.input, atol=1e-6)
    centre = np.asarray(Image.open(portrait).convert("RGB").resize((32, 32), Image.BILINEAR), dtype=float) / 255
    assert np.abs(image - centre).mean() < 0.05  # the whole square photo, shrunk
    assert json.loads(photo_tab.on_photo(str(PHOTOS / "ship.png")))["notice"] == ""


def test_the_photo_tab_shows_the_photo_through_the_shipped_models_snapshots():
    from vit_demo.app import export_view

    # The shipped photo model kept six snapshots of its 300 epochs: the slider has seven stops, the trained model last.
    run = service.training_run("cifar10")
    assert run.problem is None and [s.epoch for s in run.snapshots] == [1, 3, 7, 17, 45, 116] and run.positions == 7
    photo = photo_tab.analyse_photo(str(PHOTOS / "ship.png"))
    ask = training_view.ask_snapshot("cifar10")
    image = page_numbers.image_text(photo.input)  # the page's copy of the input
    first, later = (ask({"image": image, "position": position}) for position in (1, 6))
    assert first["note"].startswith("<b>Epoch 1 of 300</b>") and "27.33%" in first["note"]
    assert later["note"].startswith("<b>Epoch 116 of 300</b>") and "84.49%" in later["note"]
    # Each snapshot's grid of 9 layers x (6 heads + their mean) over the 8 x 8 patches: the attention changed as it
    # trained.
    first_maps, later_maps = (read_live_grid(numbers, (9, 7, 8, 8)) for numbers in (first, later))
    assert not np.array_equal(first_maps, later_maps)
    assert "numbered 1 to 6" in ask({"image": image, "position": 7})["error"]
    assert "epoch 300" in training_view.trained_note(run) and "91.21%" in training_view.trained_note(run)
    path = export_view.on_png(photo, export_view.TRAINING, 9, MEAN, None, None, 1)
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
    from vit_demo.app import export_view
    from vit_demo.weights import CONFIG_FILE, METRICS_FILE, WEIGHTS_FILE

    # Weights trained before train.py kept snapshots (or with --snapshots 0): the shipped photo model without its
    # snapshots. Its training view says so, shows nothing, and has nothing to export.
    with weights_with_only(tmp_path, monkeypatch, "cifar10", (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE),
                           (service.classifier, service.training_run, service.calibration_report)):
        photo = photo_tab.analyse_photo(str(PHOTOS / "cat.png"))
        assert "before snapshots were kept" in service.training_run("cifar10").problem
        asked = training_view.ask_snapshot("cifar10")({"image": page_numbers.image_text(photo.input), "position": 1})
        assert "no snapshot" in asked["error"]
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
    from vit_demo.app import export_view

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
    from vit_demo.app import export_view

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
