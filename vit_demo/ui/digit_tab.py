"""The digit tab: draw on the canvas and the prediction and every view follow the pen; ``/predict_digit`` for scripts."""

from __future__ import annotations

import gradio as gr

from vit_demo.canvas import decode_drawing, drawing_canvas
from vit_demo.preprocess import InputError
from vit_demo.ui.attention_view import MEAN
from vit_demo.ui.components import UndecodedSketch
from vit_demo.ui.explanation_view import PREDICTED_CHOICE, explain_label
from vit_demo.ui.models import analyse_batch, model_config, model_problem
from vit_demo.ui.panel import API_OUTPUTS, Panel, build_panel, empty_views, result_views
from vit_demo.ui.serving import DIGIT_BATCH, SHARED_WORKERS

MODEL = "mnist"
DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."


def drawing_views(drawing, layer: int, head: str, choice: str, position: int | None) -> tuple:
    problem = model_problem(MODEL)
    if problem:  # say so plainly, in the page and to API clients, rather than fail
        return empty_views(MODEL, problem)
    result = analyse_batch(MODEL, [drawing], [explain_label(choice)])[0]
    return result_views(MODEL, result, layer, head, position, DRAW_PROMPT)


def on_drawing(value: str, layer: int, head: str = MEAN, choice: str = PREDICTED_CHOICE,
               position: int | None = None) -> tuple:
    """Browser: the canvas sent a (partial) drawing."""
    try:
        drawing = decode_drawing(value)
    except InputError as exc:
        raise gr.Error(f"Can't read this drawing: {exc}") from None
    if drawing is None:
        return empty_views(MODEL, DRAW_PROMPT)
    return drawing_views(drawing, layer, head, choice, position)


def predict_digits(paths: list[str | None]) -> list[list]:
    """API, batched (``batch=True``): the drawings of the requests waiting together, in one forward pass.

    Gradio gives a list per input and wants a list per output. There is no State output: a batch's
    states would all land in its first request's session.
    """
    problem = model_problem(MODEL)
    if problem:
        rows = [empty_views(MODEL, problem)] * len(paths)
    else:
        drawn = iter(analyse_batch(MODEL, [path for path in paths if path is not None]))
        depth = model_config(MODEL).depth
        rows = [empty_views(MODEL, DRAW_PROMPT) if path is None
                else result_views(MODEL, next(drawn), depth, MEAN, None, DRAW_PROMPT) for path in paths]
    return [list(column) for column in zip(*(row[:API_OUTPUTS] for row in rows))]


def build_digit_tab(examples: list) -> Panel:
    digit, canvas = build_panel("digit", MODEL, DRAW_PROMPT, lambda: drawing_canvas(examples))
    canvas.change(on_drawing, [canvas, *digit.controls], digit.outputs, api_visibility="private",
                  show_progress="hidden", trigger_mode="always_last", **SHARED_WORKERS)
    # API only: a sketch value (or an image as its composite) for scripts.
    sketch = UndecodedSketch(visible=False)
    sketch.change(predict_digits, sketch, digit.api_outputs, api_name="predict_digit", batch=True,
                  max_batch_size=DIGIT_BATCH, **SHARED_WORKERS)
    return digit
