"""The digit tab: draw on the canvas and the prediction and every view follow the pen (the page reads the drawing:
assets/canvas.js); ``/predict_digit`` for scripts."""

from __future__ import annotations

from vit_demo.app.canvas import drawing_canvas
from vit_demo.app.components import UndecodedSketch
from vit_demo.app.forward import forward_function
from vit_demo.app.page_model import app_description
from vit_demo.app.panel import Panel, api_answer, build_panel
from vit_demo.app.service import analyse_batch, model_problem
from vit_demo.app.serving import DIGIT_BATCH, SHARED_WORKERS

MODEL = "mnist"
LABEL = "Draw a digit (MNIST)"  # the tab's (the static page's too)
DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."
INPUT_TITLE = "### Draw a digit\nAnywhere, any size: it is cropped, scaled and centred as MNIST's digits were."
FIRST_EXAMPLE = "2"  # the example the page starts with, drawn on the canvas until the pen touches it


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
    first = next((path for path in examples if path.stem == FIRST_EXAMPLE), None)
    in_page = None if model_problem(MODEL) else app_description(MODEL, DRAW_PROMPT, DRAW_PROMPT, first)
    digit, _ = build_panel("digit", MODEL, DRAW_PROMPT, INPUT_TITLE,
                           lambda: drawing_canvas(examples, forward_function(MODEL), first, page_model=in_page))
    # API only: a sketch value (or an image as its composite) for scripts.
    sketch = UndecodedSketch(label="drawing", visible=False)
    sketch.change(predict_digits, sketch, digit.api_outputs, api_name="predict_digit", batch=True,
                  max_batch_size=DIGIT_BATCH, **SHARED_WORKERS)
    return digit
