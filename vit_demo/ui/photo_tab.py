"""The photo tab: upload a photo (or pick an example) and see every view; ``/predict_image`` for scripts."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from vit_demo.ui.attention_view import MEAN
from vit_demo.ui.components import LARGE, UndecodedImage
from vit_demo.ui.explanation_view import PREDICTED_CHOICE, explain_label
from vit_demo.ui.models import analyse_batch, model_config, model_problem
from vit_demo.ui.panel import API_OUTPUTS, Panel, build_panel, empty_views, result_views
from vit_demo.ui.serving import SHARED_WORKERS

MODEL = "cifar10"
UPLOAD_PROMPT = "Upload a photo, or pick an example below."
BLANK_PHOTO = "This image is blank: there is nothing to classify."


def on_photo(path: str | None, layer: int | None = None, head: str = MEAN, choice: str = PREDICTED_CHOICE,
             position: int | None = None) -> tuple:
    """Browser: classify an uploaded photo; every output, in the order of ``Panel.outputs``."""
    if path is None:
        return empty_views(MODEL, UPLOAD_PROMPT)
    problem = model_problem(MODEL)
    if problem:  # say so plainly, in the page and to API clients, rather than fail
        return empty_views(MODEL, problem)
    layer = model_config(MODEL).depth if layer is None else layer
    result = analyse_batch(MODEL, [path], [explain_label(choice)])[0]
    return result_views(MODEL, result, layer, head, position, BLANK_PHOTO)


def predict_image(path: str | None) -> tuple:
    """API: classify a photo; the label, info, attention views and relevance (``Panel.api_outputs``)."""
    return on_photo(path)[:API_OUTPUTS]


def photo_input(examples: list[Path]) -> gr.Image:
    photo = UndecodedImage(type="filepath", label="Photo", sources=["upload", "clipboard"], elem_id="photo-input",
                           height=LARGE)
    gr.Examples([str(p) for p in examples], photo, label="Examples (CIFAR-10 test set)")
    return photo


def build_photo_tab(examples: list[Path]) -> Panel:
    photos, photo = build_panel("photo", MODEL, UPLOAD_PROMPT, lambda: photo_input(examples))
    photo.change(on_photo, [photo, *photos.controls], photos.outputs, api_visibility="private",
                 show_progress="minimal", **SHARED_WORKERS)
    # API only: a photo file for scripts.
    api_photo = UndecodedImage(type="filepath", visible=False)
    api_photo.change(predict_image, api_photo, photos.api_outputs, api_name="predict_image", **SHARED_WORKERS)
    return photos
