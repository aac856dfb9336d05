"""The digit tab: draw on the canvas and the prediction and every view follow the pen; ``/predict_digit`` for scripts."""

from __future__ import annotations

import gradio as gr

from vit_demo.canvas import decode_drawing, drawing_canvas
from vit_demo.preprocess import InputError
from vit_demo.ui.components import UndecodedSketch
from vit_demo.ui.explanation_view import PREDICTED_CHOICE, explain_label
from vit_demo.ui.models import analyse_batch, model_problem
from vit_demo.ui.panel import Panel, api_answer, build_panel, page_answer
from vit_demo.ui.serving import DIGIT_BATCH, SHARED_WORKERS

MODEL = "mnist"
DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."


def on_drawing(value: str, choice: str = PREDICTED_CHOICE) -> tuple:
    """Browser: the canvas sent a (partial) drawing; the page's answer (``Panel.page_outputs``), with the relevance
    of the class ``choice`` names."""
    try:
        drawing = decode_drawing(value)
    except InputError as exc:
        raise gr.Error(f"Can't read this drawing: {exc}") from None
    if drawing is None:
        return page_answer(DRAW_PROMPT, DRAW_PROMPT)
    # A missing model is said plainly rather than failed on.
    result = model_problem(MODEL) or analyse_batch(MODEL, [drawing], [explain_label(choice)])[0]
    return page_answer(result, DRAW_PROMPT)


def predict_digits(paths: list[str | None]) -> list[list]:
    """API, batched (``batch=True``): the drawings of the requests waiting together, in one forward pass.

    Gradio gives a list per input and wants a list per output. There is no State output: a batch's
    states would all land in its first request's session.
    """
    problem = model_problem(MODEL)
    if problem:  # say so plainly, to every client, rather than fail
        rows = [api_answer(MODEL, problem, DRAW_PROMPT)] * len(paths)
    else:
        drawn = iter(analyse_batch(MODEL, [path for path in paths if path is not None]))
        rows = [api_answer(MODEL, DRAW_PROMPT if path is None else next(drawn), DRAW_PROMPT) for path in paths]
    return [list(column) for column in zip(*rows)]


def build_digit_tab(examples: list) -> Panel:
    digit, canvas = build_panel("digit", MODEL, DRAW_PROMPT, lambda: drawing_canvas(examples))
    digit.wire_input(canvas, on_drawing, show_progress="hidden", trigger_mode="always_last", **SHARED_WORKERS)
    # API only: a sketch value (or an image as its composite) for scripts.
    sketch = UndecodedSketch(visible=False)
    sketch.change(predict_digits, sketch, digit.api_outputs, api_name="predict_digit", batch=True,
                  max_batch_size=DIGIT_BATCH, **SHARED_WORKERS)
    return digit
