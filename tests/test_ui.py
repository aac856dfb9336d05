"""The app's handlers, called directly as the server calls them."""

import base64

import gradio as gr
import numpy as np
import pytest
from PIL import Image, ImageDraw

from vit_demo import ui
from vit_demo.canvas import CANVAS_SIZE, decode_drawing
from vit_demo.preprocess import InputError


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


def test_on_drawing_gives_every_view():
    label, info, patches, cls_grid, selected, rollout, query, query_note, analysis = ui.on_drawing(
        canvas_value(SEVEN), 6, ui.MEAN)
    assert max(label, key=label.get) == "7"
    assert "ms on" in info
    assert patches.size == selected.size == rollout.size == (ui.LARGE, ui.LARGE)
    assert cls_grid.size == query.size
    assert analysis.attention.shape == (6, 4, 50, 50)
    assert "Where patch" in query_note


def test_blank_and_cleared_canvas_guess_nothing():
    for value in ("", canvas_value([])):
        label, info, *pictures, analysis = ui.on_drawing(value, 6, ui.MEAN)
        assert label is None and analysis is None
        assert info == ui.DRAW_PROMPT
        assert all(p is None for p in pictures[:-1])


def test_a_malformed_canvas_value_is_a_clear_error():
    with pytest.raises(gr.Error, match="Can't read this drawing"):
        ui.on_drawing("@@@", 6, ui.MEAN)


def test_layer_head_and_patch_choices():
    analysis = ui.on_drawing(canvas_value(SEVEN), 6, ui.MEAN)[-1]
    views = {(layer, head): np.asarray(ui.on_layer_or_head(analysis, layer, head))
             for layer in (1, 6) for head in (ui.MEAN, "head 1", "head 4")}
    assert not np.array_equal(views[(1, "head 1")], views[(6, "head 1")])
    assert not np.array_equal(views[(6, "head 1")], views[(6, "head 4")])
    assert ui.on_layer_or_head(None, 1, ui.MEAN) is None
    # A click at (x, y) on the 336 px patch grid picks the patch under it: row 2, column 5 of 7.
    event = gr.SelectData(target=None, data={"index": [5 * 48 + 10, 2 * 48 + 10], "value": None})
    _, _, note = ui.on_patch_click(analysis, event)
    assert "patch 19 looks" in note


def test_warm_up_runs_every_available_model():
    ui.warm_up()  # must not raise, with or without the CIFAR-10 weights
    assert ui.classifier.cache_info().currsize >= 1


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
    columns = ui.predict_digits(batch)
    assert len(columns) == 8 and all(len(column) == len(batch) for column in columns)  # 8 outputs: no State
    answers = list(zip(*columns))
    for path, answer in zip(batch, answers):
        alone = list(zip(*ui.predict_digits([path])))[0]
        if alone[0] is not None:  # the same probabilities (up to float rounding: batched matmuls sum differently)
            assert answer[0] == pytest.approx(alone[0], rel=1e-5, abs=1e-7)
        else:
            assert answer[0] is None
        assert answer[1].split(" · ")[0] == alone[1].split(" · ")[0]  # the top class, without the timing
        for picture, picture_alone in zip(answer[2:7], alone[2:7]):
            assert (picture is None) == (picture_alone is None)
            if picture is not None:
                diff = np.abs(np.asarray(picture, dtype=int) - np.asarray(picture_alone, dtype=int))
                assert diff.max() <= 1  # the same picture, up to a rounding step
    assert max(answers[0][0], key=answers[0][0].get) == "7" and max(answers[2][0], key=answers[2][0].get) == "1"
    assert answers[1][1].startswith("Can't read this image") and answers[1][0] is None
    assert answers[3][1] == answers[4][1] == ui.DRAW_PROMPT
