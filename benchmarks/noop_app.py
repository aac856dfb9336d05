"""The benchmarks' baseline: a stock Gradio app with the app's two API endpoints that computes nothing.

    python benchmarks/noop_app.py   (the serve_* benchmarks start it on a free port themselves)

``/classify`` and ``/export`` take the same input components as the app's (vit_demo/app/api.py) and answer with the
same output components (``/classify``'s JSON; ``/export``'s file, a PNG for slides), and ``/stroke`` answers a drawing
with a label (benchmarks/crowd.py), but their handlers return answers made once at start-up, one per model: what is
left per request is Gradio's own work (the upload, the queue, the answer, and for ``/export`` caching the file and
sending it). It runs with Gradio's defaults (``demo.queue()``, one event at a time per endpoint, no queue limit), as
a stock app would.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from vit_demo.app.api import UndecodedImage, classify, export  # noqa: E402
from vit_demo.app.service import SHIPPED  # noqa: E402
from vit_demo.page.layout import EXAMPLES  # noqa: E402
from vit_demo.pictures import slides  # noqa: E402

EXAMPLE = {"mnist": EXAMPLES / "digits" / "7.png", "cifar10": EXAMPLES / "photos" / "ship.png"}


def slide(model: str) -> str | gr.Error:
    """``/export``'s answer for ``model``'s example, made now: its file, or the error the app answers instead (a
    model without weights)."""
    try:
        return export(str(EXAMPLE[model]), model)
    except gr.Error as error:
        return error


def build_demo() -> gr.Blocks:
    answers = {model: classify(str(EXAMPLE[model]), model) for model in SHIPPED}  # made once, here; never per request
    files = {model: slide(model) for model in SHIPPED}

    def exported(_image, model: str, *_options) -> str:
        if isinstance(files[model], gr.Error):
            raise files[model]
        return files[model]

    with gr.Blocks(title="do-nothing baseline") as demo:
        with gr.Column(visible=False):  # as the app's
            image = UndecodedImage(type="filepath", label="image")
            model = gr.Textbox(SHIPPED[0], label="model")
            image.change(lambda _image, name: answers[name], [image, model], gr.JSON(label="answer"),
                         api_name="classify")
            picture = UndecodedImage(type="filepath", label="image")
            options = [gr.Textbox(SHIPPED[0], label="model"), gr.Textbox(slides.CLS_GRID, label="view"),
                       gr.Number(None, label="layer"), gr.Textbox("mean", label="head"), gr.Textbox("", label="label"),
                       gr.Number(None, label="patch")]
            picture.change(exported, [picture, *options], gr.File(label="slide"), api_name="export")
        # One pen stroke (benchmarks/crowd.py): a drawing in, a label made once out; Gradio's cost of one event.
        label = {str(d): 0.1 for d in range(10)}
        drawing = gr.Textbox(elem_id="stroke")
        drawing.change(lambda _drawing: label, drawing, gr.Label(), api_name="stroke")
    return demo


if __name__ == "__main__":
    build_demo().queue().launch()
