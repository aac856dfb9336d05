"""The benchmarks' baseline: a stock Gradio app with the app's two API endpoints that computes nothing.

    python benchmarks/noop_app.py   (the serve_* benchmarks start it on a free port themselves)

``/predict_digit`` and ``/predict_image`` take the same input components as the app's and answer with
the same output components (label, text, five JPEG pictures of the app's sizes, the query note, and
for photos the State), but their handlers return answers made once at start-up: what is left per request is
Gradio's own work (upload, queue, encoding and caching the pictures, sending them). It runs with
Gradio's defaults (``demo.queue()``, one event at a time per endpoint, no queue limit), as a stock
app would.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from vit_demo import ui  # noqa: E402

DIGIT = ui.EXAMPLES / "digits" / "7.png"
PHOTO = ui.EXAMPLES / "photos" / "ship.png"


def outputs(state: bool) -> list:
    """The same output components, in the same order, as the app's ``Panel.outputs`` (with or without the State)."""
    pictures = [gr.Image(type="pil", format=ui.VIEW_FORMAT, interactive=False) for _ in range(5)]
    return [gr.Label(num_top_classes=3), gr.Markdown(), *pictures, gr.Markdown(), *([gr.State()] if state else [])]


def build_demo() -> gr.Blocks:
    digit_views = [column[0] for column in ui.predict_digits([str(DIGIT)])]  # made once, here; never per request
    photo_views = ui.predict_image(str(PHOTO))
    config = ui.model_config("cifar10")
    with gr.Blocks(title="do-nothing baseline") as demo:
        sketch = ui.UndecodedSketch()
        sketch.change(lambda _sketch: digit_views, sketch, outputs(state=False), api_name="predict_digit")
        photo = ui.UndecodedImage(type="filepath")
        layer = gr.Slider(1, config.depth, value=config.depth, step=1)
        head = gr.Radio([ui.MEAN] + [f"head {h + 1}" for h in range(config.heads)], value=ui.MEAN)
        photo.change(lambda _photo, _layer, _head: photo_views, [photo, layer, head], outputs(state=True),
                     api_name="predict_image")
    return demo


if __name__ == "__main__":
    build_demo().queue().launch()
