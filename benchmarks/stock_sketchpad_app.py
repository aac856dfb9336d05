"""browser_latency.py's baseline: Gradio's stock gr.Sketchpad wired to the app's classifier, as a stock app would be."""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import time  # noqa: E402

import gradio as gr  # noqa: E402

from vit_demo.app.service import classifier  # noqa: E402
from vit_demo.data.preprocess import NothingDrawn  # noqa: E402


def predict(sketch: dict | None) -> tuple:
    if sketch is None or sketch.get("composite") is None:
        return None, ""
    try:
        result = classifier("mnist").predict(sketch["composite"])
    except NothingDrawn:
        return None, ""
    return result.probs, f"{result.label} {time.time()}"  # the time makes every answer change the page


if __name__ == "__main__":
    with gr.Blocks() as demo:
        pad = gr.Sketchpad(elem_id="pad", brush=gr.Brush(default_size=10))
        label = gr.Label(num_top_classes=3, elem_id="digit-label")
        info = gr.Markdown(elem_id="digit-info")
        pad.change(predict, pad, [label, info])
    demo.queue().launch()
