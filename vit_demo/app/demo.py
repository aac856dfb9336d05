"""The whole app: the tabs, the warm-up that spares the first user a wait, and launch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import vit_demo.app.zerogpu  # noqa: F401  (first: on ZeroGPU, the spaces package patches torch before any CUDA call)

import gradio as gr

from vit_demo.app import digit_tab, inside_tab, photo_tab
from vit_demo.app.classify_api import build_classify_api
from vit_demo.app.components import ASSETS
from vit_demo.app.digit_tab import build_digit_tab
from vit_demo.app.inside_tab import build_inside_tab
from vit_demo.app.page_model import served_paths
from vit_demo.app.panel import api_answer
from vit_demo.app.photo_tab import build_photo_tab
from vit_demo.app.service import analyse, model_problem
from vit_demo.app.serving import CACHE_SWEEP, QUEUE_SIZE, serve, tune_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIGIT_EXAMPLES = sorted((EXAMPLES / "digits").glob("*.png"))
PHOTO_EXAMPLES = sorted((EXAMPLES / "photos").glob("*.png"))

CSS = (ASSETS / "app.css").read_text(encoding="utf-8")

# The toggle switches talk mode's CSS on and keeps the address in step, so a speaker can bookmark it.
TALK_TOGGLE = """(on) => {
  document.getElementById("vd-app").classList.toggle("vd-talk", on);
  const address = new URL(window.location.href);
  if (on) address.searchParams.set("view", "talk"); else address.searchParams.delete("view");
  window.history.replaceState(null, "", address);
}"""
INTRO = ("A Vision Transformer written from scratch in PyTorch, running in your browser: draw, and follow it "
         "step by step.")  # the static page's too
# Shown in talk mode, where a speaker needs them, in the header (the static page's too).
KEYS_LINE = "**Keys:** ←/→ layer · ↑/↓ head · `c` clear"
TALK_FROM_ADDRESS = '() => new URLSearchParams(window.location.search).get("view") === "talk"'
TALK_KEYS = (ASSETS / "talk.js").read_text(encoding="utf-8")


def build_demo() -> gr.Blocks:
    gr.set_static_paths(served_paths([digit_tab.MODEL, photo_tab.MODEL]))  # the page's own model: page_model.py
    with gr.Blocks(title="ViT demo: what a Vision Transformer looks at", delete_cache=CACHE_SWEEP) as demo:
        with gr.Column(elem_id="vd-app"):  # the whole page: talk mode sets its class
            with gr.Row(elem_id="vd-header"):
                gr.Markdown("# What does a Vision Transformer look at?")
                gr.Markdown(KEYS_LINE, elem_id="vd-keys")  # talk mode's alone (app.css)
                talk = gr.Checkbox(label="Talk mode", elem_id="talk-mode", container=False, scale=0, min_width=150)
            gr.Markdown(INTRO, elem_id="vd-intro")
            with gr.Tabs():
                with gr.Tab(digit_tab.LABEL, id="digit"):
                    build_digit_tab(DIGIT_EXAMPLES)
                with gr.Tab(photo_tab.LABEL, id="photo"):
                    build_photo_tab(PHOTO_EXAMPLES)
                with gr.Tab(inside_tab.LABEL, id="inside") as inside:
                    build_inside_tab(inside)
            build_classify_api()
            talk.change(None, talk, None, js=TALK_TOGGLE)
            demo.load(None, None, talk, js=TALK_FROM_ADDRESS)
    return demo


def warm_up() -> None:
    """Run one example through each available model and the API's pictures, so the first user waits for nothing."""
    for model, example in (("mnist", EXAMPLES / "digits" / "7.png"), ("cifar10", EXAMPLES / "photos" / "ship.png")):
        if not model_problem(model):
            api_answer(model, analyse(model, example), "")


def launch(queue_size: int = QUEUE_SIZE, before_serving: Callable[[], None] | None = None,
           **launch_args: Any) -> gr.Blocks:
    """Build, warm up and serve the app (``launch_args`` go to ``Blocks.launch``); ``before_serving`` runs just
    before Gradio takes the port (app.py closes its starting page there)."""
    tune_process()
    demo = build_demo()
    warm_up()
    if before_serving:
        before_serving()
    serve(demo, CSS, TALK_KEYS, queue_size, **launch_args)
    return demo
