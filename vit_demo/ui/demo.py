"""The whole app: the tabs, the warm-up that spares the first user a wait, and launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from vit_demo.ui.attention_view import MEAN
from vit_demo.ui.classify_api import build_classify_api
from vit_demo.ui.digit_tab import build_digit_tab
from vit_demo.ui.inside_tab import build_inside_tab
from vit_demo.ui.models import analyse, model_config, model_problem
from vit_demo.ui.panel import views
from vit_demo.ui.photo_tab import build_photo_tab
from vit_demo.ui.serving import CACHE_SWEEP, QUEUE_SIZE, serve, tune_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIGIT_EXAMPLES = sorted((EXAMPLES / "digits").glob("*.png"))
PHOTO_EXAMPLES = sorted((EXAMPLES / "photos").glob("*.png"))

CSS = """
#digit-label .output-class, #photo-label .output-class { font-size: 3rem !important; }
.vd-note { font-size: 0.95rem; opacity: 0.85; }
#photo-input img { object-fit: contain !important; }  /* a 32x32 photo fills the box, as large ones do */
/* A view's buttons sit above its picture, not over it (they hid the grid's "mean" label). */
.vd-view .icon-button-wrapper { position: static !important; margin: 0 0 2px auto !important; width: fit-content; }
@media (max-width: 640px) {
  /* A phone: the prediction above the canvas, in sight while drawing; every tab a tap away, none behind "...". */
  .vd-prediction { order: -1; }
  #digit-label .output-class, #photo-label .output-class { font-size: 2rem !important; }
  .tab-container button { padding: 4px 3px !important; font-size: 0.7rem !important; }
}
"""


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="ViT demo: what a Vision Transformer looks at", delete_cache=CACHE_SWEEP) as demo:
        gr.Markdown("# What does a Vision Transformer look at?\n"
                    "A ViT written from scratch in PyTorch. Draw a digit or upload a photo: see its prediction, "
                    "the patches it reads, where every layer and attention head looks, why it chose its class, "
                    "and how far to trust each map.")
        with gr.Tabs():
            with gr.Tab("Draw a digit (MNIST)", id="digit"):
                build_digit_tab(DIGIT_EXAMPLES)
            with gr.Tab("Upload a photo (CIFAR-10)", id="photo"):
                build_photo_tab(PHOTO_EXAMPLES)
            with gr.Tab("Inside the model", id="inside") as inside:
                build_inside_tab(inside)
        build_classify_api()
    return demo


def warm_up() -> None:
    """Run one example through each available model and every view, so the first user waits for nothing."""
    for model, example in (("mnist", EXAMPLES / "digits" / "7.png"), ("cifar10", EXAMPLES / "photos" / "ship.png")):
        if not model_problem(model):
            views(model, analyse(model, example), model_config(model).depth, MEAN)


def launch(queue_size: int = QUEUE_SIZE, **launch_args: Any) -> gr.Blocks:
    """Build, warm up and serve the app (``launch_args`` go to ``Blocks.launch``)."""
    tune_process()
    demo = build_demo()
    warm_up()
    serve(demo, CSS, queue_size, **launch_args)
    return demo
