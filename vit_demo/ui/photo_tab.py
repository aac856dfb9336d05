"""The photo tab: upload a photo (or pick an example) and see every view; ``/predict_image`` for scripts."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from vit_demo.ui.components import LARGE, UndecodedImage
from vit_demo.ui.explanation_view import PREDICTED_CHOICE, explain_label
from vit_demo.ui.models import analyse_batch, model_problem
from vit_demo.ui.panel import Panel, api_answer, build_panel, prediction
from vit_demo.ui.serving import SHARED_WORKERS

MODEL = "cifar10"
UPLOAD_PROMPT = "Upload a photo, or pick an example below."
BLANK_PHOTO = "This image is blank: there is nothing to classify."


def analyse_photo(path: str | None, choice: str = PREDICTED_CHOICE):
    """The analysis of an uploaded photo (with the relevance of ``choice``), why it failed, or a message (a str)."""
    if path is None:
        return UPLOAD_PROMPT
    return model_problem(MODEL) or analyse_batch(MODEL, [path], [explain_label(choice)])[0]


def on_photo(path: str | None, choice: str = PREDICTED_CHOICE) -> tuple:
    """Browser: a photo was uploaded; its label, info and analysis (``Panel.prediction_outputs``)."""
    result = analyse_photo(path, choice)
    return (None, result, None) if isinstance(result, str) else prediction(result, BLANK_PHOTO)


def predict_image(path: str | None) -> tuple:
    """API: classify a photo; the label, info, attention views and relevance (``Panel.api_outputs``)."""
    return api_answer(MODEL, analyse_photo(path), BLANK_PHOTO)


def photo_input(examples: list[Path]) -> gr.Image:
    photo = UndecodedImage(type="filepath", label="Photo", sources=["upload", "clipboard"], elem_id="photo-input",
                           height=LARGE)
    gr.Examples([str(p) for p in examples], photo, label="Examples (CIFAR-10 test set)")
    return photo


def build_photo_tab(examples: list[Path]) -> Panel:
    photos, photo = build_panel("photo", MODEL, UPLOAD_PROMPT, lambda: photo_input(examples))
    photos.wire_input(photo, on_photo, show_progress="minimal", **SHARED_WORKERS)
    # API only: a photo file for scripts.
    api_photo = UndecodedImage(type="filepath", visible=False)
    api_photo.change(predict_image, api_photo, photos.api_outputs, api_name="predict_image", **SHARED_WORKERS)
    return photos
