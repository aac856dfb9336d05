"""The app's HTTP API, for scripts: ``/classify`` (an image file and a model name in, one JSON object out) and
``/export`` (one view of an image for a slide, as ``python -m vit_demo export`` draws it). The page makes its own
numbers and slides (vit_demo/page); these are what a script asks the server for. Both preprocess as the page does:
a drawing for ``mnist``, a photo for ``cifar10`` and any other model its preprocessing (its weights folder says which).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import processing_utils
from gradio.utils import get_upload_folder

from vit_demo.app.service import SHIPPED, classifier, model_problem, models, predict
from vit_demo.app.serving import SHARED_WORKERS
from vit_demo.app.zerogpu import model_work
from vit_demo.atomic import atomic_write
from vit_demo.data.preprocess import InputError, NothingDrawn
from vit_demo.pictures import slides


class UndecodedImage(gr.Image):
    """An image input whose upload reaches Python as a file path, undecoded: Gradio's own preprocessing would open
    it with PIL before our code runs, and fail there with a generic error; this way only our decoder, with its size
    limits, reads uploads."""

    is_template = True  # use gr.Image's frontend

    def preprocess(self, payload):
        return None if payload is None else payload.path


def read(path: str | None, model: str) -> Any:
    """The model's input read from the file at ``path``; raises ValueError with what is wrong, said plainly."""
    if model not in models():
        raise ValueError(f"Unknown model {model!r}: use one of {', '.join(models())}.")
    if path is None:
        raise ValueError("No image: send an image file.")
    if problem := model_problem(model):
        raise ValueError(problem)
    try:
        return classifier(model).preprocess(path)
    except NothingDrawn as exc:
        raise ValueError(str(exc)) from None
    except InputError as exc:
        raise ValueError(f"Can't read this image: {exc}") from None


def classify(path: str | None, model: str = "mnist") -> dict[str, Any]:
    """``{"label", "confidence", "probs": {class: p}, "unfamiliar": bool}`` for the image at ``path`` (calibrated
    probabilities; unfamiliar: it looks unlike anything the model knows), or ``{"error": message}``."""
    try:
        prediction = predict(model, [read(path, model)], attention=False)[0]
    except ValueError as exc:
        return {"error": str(exc)}
    return {"label": prediction.label, "confidence": prediction.confidence, "probs": prediction.probs,
            "unfamiliar": prediction.unfamiliar}


@model_work
def slide(model: str, image: Any, view: str, layer: int | None, head: str, label: str | None,
          patch: int | None) -> tuple[str, bytes]:
    name, data, _ = slides.export_slide(classifier(model), image, view, layer, head, label, patch)
    return name, data


def export(path: str | None, model: str = "mnist", view: str = slides.CLS_GRID, layer: float | None = None,
           head: str = "mean", label: str = "", patch: float | None = None) -> str:
    """The file of one view of the image at ``path`` for a slide (a PNG 1600 pixels wide, or for view "gif" an
    animated GIF through the layers), named for what it shows; a clear error for anything it can't draw."""
    try:
        name, data = slide(model, read(path, model), view, None if layer is None else int(layer), str(head),
                           label or None, None if patch is None else int(patch))
    except ValueError as exc:
        raise gr.Error(str(exc)) from None
    return str(cached_file(data, name))


def cached_file(data: bytes, name: str) -> Path:
    """``data`` as a file called ``name`` in Gradio's cache, written once and atomically (a download of an earlier
    copy under way never reads a half-written one); the cache's sweep deletes it with the uploads."""
    path = Path(get_upload_folder()) / processing_utils.hash_bytes(data) / name  # where every component caches
    try:
        os.utime(path)  # Blocks(delete_cache=...) ages files by ctime: a file handed out again is fresh
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data))
    return path


def build_api() -> None:
    """The endpoints' hidden components and events: ``/classify`` and ``/export``."""
    with gr.Column(visible=False):
        image = UndecodedImage(type="filepath", label="image")
        model = gr.Textbox(SHIPPED[0], label="model")  # a text, so that an unknown name gets our own answer
        image.change(classify, [image, model], gr.JSON(label="answer"), api_name="classify", **SHARED_WORKERS)
        picture = UndecodedImage(type="filepath", label="image")
        options = [gr.Textbox(SHIPPED[0], label="model"), gr.Textbox(slides.CLS_GRID, label="view"),
                   gr.Number(None, label="layer"), gr.Textbox("mean", label="head"), gr.Textbox("", label="label"),
                   gr.Number(None, label="patch")]
        picture.change(export, [picture, *options], gr.File(label="slide"), api_name="export", **SHARED_WORKERS)
