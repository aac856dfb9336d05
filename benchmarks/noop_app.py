"""The benchmarks' baseline: a stock Gradio app with the app's two API endpoints that computes nothing.

    python benchmarks/noop_app.py   (the serve_* benchmarks start it on a free port themselves)

``/predict_digit`` and ``/predict_image`` take the same input components as the app's and answer with
the same output components (label, text, five JPEG pictures of the app's sizes, the query note, the relevance
picture and its note; ``/classify``'s JSON), and ``/stroke`` answers a drawing with a label (benchmarks/crowd.py),
but their handlers return answers made once at start-up: what is left per request is
Gradio's own work (upload, queue, encoding and caching the pictures, sending them). It runs with
Gradio's defaults (``demo.queue()``, one event at a time per endpoint, no queue limit), as a stock
app would.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from vit_demo.app.classify_api import classify  # noqa: E402
from vit_demo.app.components import VIEW_FORMAT, UndecodedImage, UndecodedSketch  # noqa: E402
from vit_demo.app.demo import EXAMPLES  # noqa: E402
from vit_demo.app.digit_tab import predict_digits  # noqa: E402
from vit_demo.app.photo_tab import predict_image  # noqa: E402

DIGIT = EXAMPLES / "digits" / "7.png"
PHOTO = EXAMPLES / "photos" / "ship.png"


def outputs() -> list:
    """The same output components, in the same order, as the app's ``Panel.api_outputs``."""
    pictures = [gr.Image(type="pil", format=VIEW_FORMAT, interactive=False) for _ in range(6)]
    return [gr.Label(num_top_classes=3), gr.Markdown(), *pictures[:5], gr.Markdown(), pictures[5], gr.Markdown()]


def build_demo() -> gr.Blocks:
    digit_views = [column[0] for column in predict_digits([str(DIGIT)])]  # made once, here; never per request
    photo_views = predict_image(str(PHOTO))
    with gr.Blocks(title="do-nothing baseline") as demo:
        sketch = UndecodedSketch()
        sketch.change(lambda _sketch: digit_views, sketch, outputs(), api_name="predict_digit")
        photo = UndecodedImage(type="filepath")
        photo.change(lambda _photo: photo_views, photo, outputs(), api_name="predict_image")
        answers = {"mnist": classify(str(DIGIT), "mnist"), "cifar10": classify(str(PHOTO), "cifar10")}
        image, model = UndecodedImage(type="filepath"), gr.Textbox()
        image.change(lambda _image, name: answers[name], [image, model], gr.JSON(), api_name="classify")
        # One pen stroke (benchmarks/crowd.py): a drawing in, a label made once out; Gradio's cost of one event.
        label = {str(d): 0.1 for d in range(10)}
        drawing = gr.Textbox()
        drawing.change(lambda _drawing: label, drawing, gr.Label(), api_name="stroke")
    return demo


if __name__ == "__main__":
    build_demo().queue().launch()
