"""The digit tab: draw on the canvas and the prediction and every view follow the pen; ``/predict_digit`` for scripts."""

from __future__ import annotations

from vit_demo.app import page_numbers
from vit_demo.app.canvas import decode_drawing, drawing_canvas
from vit_demo.app.components import UndecodedSketch
from vit_demo.app.explanation_view import PREDICTED_CHOICE, explain_label
from vit_demo.app.page_model import app_description
from vit_demo.app.panel import Panel, api_answer, build_panel
from vit_demo.app.service import (Analysis, analyse_batch, analyse_inputs, classifier, model_problem, predict,
                                  starting_example)
from vit_demo.app.serving import DIGIT_BATCH, SERVER_FUNCTION_SLOTS, SHARED_WORKERS
from vit_demo.classifier import Prediction
from vit_demo.data.preprocess import InputError

MODEL = "mnist"
LABEL = "Draw a digit (MNIST)"  # the tab's (the static page's too)
DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."
INPUT_TITLE = "### Draw a digit\nAnywhere, any size: it is cropped, scaled and centred as MNIST's digits were."
FIRST_EXAMPLE = "2"  # the example the page starts with, drawn on the canvas until the pen touches it


def on_drawing(value: object, choice: object = PREDICTED_CHOICE, views: object = True, relevance: object = True
               ) -> dict:
    """The page's answer (``page_numbers.numbers``, as JSON) to a drawing as the canvas sends it, with the relevance
    of the class ``choice`` names (``relevance`` false: without it, the relevance view is not on screen and asks for
    it when it comes into view); ``views`` false (the pen is still down): the prediction alone
    (``page_numbers.reading``). A drawing or class that can't be read is said in place of the prediction."""
    result = read_drawing(value, choice, views, relevance)
    if isinstance(result, Prediction):
        return page_numbers.reading(result).to_json()
    return page_numbers.numbers(result, DRAW_PROMPT).to_json()


def read_drawing(value: object, choice: object, views: object, relevance: object
                 ) -> Analysis | Prediction | InputError | str:
    """A drawing through the model: its analysis (``views`` false: its prediction alone), or why there is none."""
    try:
        drawing = decode_drawing(value)
    except InputError as exc:
        return f"Can't read this drawing: {exc}"
    if drawing is None:
        return DRAW_PROMPT
    if choice is not None and not isinstance(choice, str):
        return f"There is no class {choice!r} to explain."
    problem = model_problem(MODEL)
    if problem:  # said plainly rather than failed on
        return problem
    try:
        image = classifier(MODEL).preprocess(drawing)
    except InputError as exc:  # blank after all (NothingDrawn), or unreadable
        return exc
    if views is False:
        return predict(MODEL, [image], attention=False)[0]
    try:
        return analyse_inputs(MODEL, [image], [explain_label(choice)] if relevance is not False else None)[0]
    except ValueError as exc:  # a class the model does not have
        return str(exc)


def stroke(request: dict) -> dict:
    """The canvas' server function, called as the pen moves and when it lifts (outside Gradio's queue: one small
    request, no event): ``{"drawing": the canvas' value, "choice": the class picker's, "views": false while the pen
    is down, "relevance": false while the relevance view is off screen}`` -> ``on_drawing``'s answer."""
    if not isinstance(request, dict):
        return page_numbers.numbers("A drawing is sent as a JSON object.", DRAW_PROMPT).to_json()
    with SERVER_FUNCTION_SLOTS:
        return on_drawing(request.get("drawing"), request.get("choice"), request.get("views", True),
                          request.get("relevance", True))


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
    first, analysis = starting_example(MODEL, examples, FIRST_EXAMPLE)  # shown with the numbers that come with the page
    in_page = None if model_problem(MODEL) else app_description(MODEL, DRAW_PROMPT, DRAW_PROMPT)
    digit, _ = build_panel("digit", MODEL, DRAW_PROMPT, INPUT_TITLE,
                           lambda: drawing_canvas(examples, stroke, first, page_model=in_page), analysis)
    # API only: a sketch value (or an image as its composite) for scripts.
    sketch = UndecodedSketch(label="drawing", visible=False)
    sketch.change(predict_digits, sketch, digit.api_outputs, api_name="predict_digit", batch=True,
                  max_batch_size=DIGIT_BATCH, **SHARED_WORKERS)
    return digit
