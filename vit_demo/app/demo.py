"""The whole app: the page (vit_demo/page, the same the static Space is) in one ``gr.HTML``, with the server function
its forward pass falls back on (forward.py); the HTTP API for scripts (api.py); the warm-up that spares the first
user a wait; and launch."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import vit_demo.app.zerogpu  # noqa: F401  (first: on ZeroGPU, the spaces package patches torch before any CUDA call)

import gradio as gr

from vit_demo.app.api import build_api, classify
from vit_demo.app.forward import forward
from vit_demo.app.service import add_model, weights_root_models
from vit_demo.app.serving import CACHE_SWEEP, QUEUE_SIZE, serve, tune_process
from vit_demo.page.layout import EXAMPLES
from vit_demo.page.site import ASSETS, HOST, STYLES, build_site
from vit_demo.weights import WeightsError

CSS = "\n".join((ASSETS / name).read_text(encoding="utf-8") for name in STYLES)
WARM_UP = (("mnist", EXAMPLES / "digits" / "7.png"), ("cifar10", EXAMPLES / "photos" / "ship.png"))


def served(path: Path) -> str:
    """Where the app serves a file or folder of the page (``gr.set_static_paths``): Gradio's file route, relative to
    the page."""
    return f"gradio_api/file={path.resolve().as_posix()}"


def template(html: str) -> str:
    """HTML as a ``gr.HTML`` template, which Gradio reads as a JS template string and a Handlebars template: its
    backticks, ``${`` and ``{{`` as character references (no change to the page)."""
    return html.replace("`", "&#96;").replace("${", "$&#123;").replace("{{", "{&#123;")


def build_demo() -> gr.Blocks:
    pictures = Path(tempfile.mkdtemp(prefix="vit-demo-page-"))  # the Inside pictures, for as long as the process runs
    atexit.register(shutil.rmtree, pictures, ignore_errors=True)
    site = build_site(pictures, served)
    gr.set_static_paths(list(site.roots.values()))
    with gr.Blocks(title="ViT demo: what a Vision Transformer looks at", fill_width=True,
                   delete_cache=CACHE_SWEEP) as demo:
        gr.HTML(template(site.html), js_on_load=site.script(served(ASSETS / HOST), "server"),
                server_functions=[forward], elem_id="vd-page", padding=False)
        build_api()
    return demo


def warm_up() -> None:
    """Run one example through each available model, so that the first user waits for nothing."""
    for model, example in WARM_UP:
        classify(str(example), model)


def launch(queue_size: int = QUEUE_SIZE, before_serving: Callable[[], None] | None = None,
           models: Sequence[str | Path] = (), **launch_args: Any) -> gr.Blocks:
    """Build, warm up and serve the app, with a tab for each weights folder in ``models`` and in the weights root
    (``weights_root_models``) beside the shipped models' (``launch_args`` go to ``Blocks.launch``);
    ``before_serving`` runs just before Gradio takes the port (app.py closes its starting page there). A folder that
    is no weights folder ends the process with one line."""
    try:
        for model in [*weights_root_models(), *models]:
            add_model(model)
    except WeightsError as exc:
        raise SystemExit(f"error: {exc}") from None
    tune_process()
    demo = build_demo()
    warm_up()
    if before_serving:
        before_serving()
    serve(demo, CSS, queue_size, **launch_args)
    return demo
