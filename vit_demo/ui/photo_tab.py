"""The photo tab: upload a photo (or pick an example) and see every view; ``/predict_image`` for scripts."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from vit_demo.data import dataset_spec
from vit_demo.ui.components import LARGE, UndecodedImage, live_canvas
from vit_demo.ui.explanation_view import PREDICTED_CHOICE, explain_label
from vit_demo.ui.models import analyse_batch, model_problem, starting_example
from vit_demo.ui.panel import Panel, api_answer, build_panel, page_answer
from vit_demo.ui.serving import SHARED_WORKERS

MODEL = "cifar10"
LABEL = "Upload a photo (CIFAR-10)"  # the tab's (the static page's too)
UPLOAD_PROMPT = "Upload a photo, or pick an example below."
BLANK_PHOTO = "This image is blank: there is nothing to classify."
FIRST_EXAMPLE = "horse"  # the example the page starts with


def analyse_photo(path: str | None, choice: str = PREDICTED_CHOICE):
    """The analysis of an uploaded photo (with the relevance of ``choice``), why it failed, or a message (a str)."""
    if path is None:
        return UPLOAD_PROMPT
    return model_problem(MODEL) or analyse_batch(MODEL, [path], [explain_label(choice)])[0]


def on_photo(path: str | None, choice: str = PREDICTED_CHOICE) -> str:
    """Browser: a photo was uploaded (or removed); the page's answer (``panel.page_answer``), the tab's numbers."""
    return page_answer(analyse_photo(path, choice), BLANK_PHOTO)


def predict_image(path: str | None) -> tuple:
    """API: classify a photo; the label, info, attention views and relevance (``Panel.api_outputs``)."""
    return api_answer(MODEL, analyse_photo(path), BLANK_PHOTO)


CLASSES_NOTE = (f"**It knows ten classes:** {', '.join(dataset_spec(MODEL).classes)}. Anything else gets one of "
                "these ten, with a warning when the photo looks unlike them.")
READS_NOTE = (f"**What the model reads:** {dataset_spec(MODEL).image_size} x {dataset_spec(MODEL).image_size} "
              "pixels, the photo's shorter side scaled down and the centre square kept: a wide or tall photo loses "
              "its edges.")
READS_SIZE = 128  # pixels a side of the picture of what the model reads


def photo_input(examples: list[Path], first: Path | None) -> gr.Image:
    """The upload (showing ``first`` at the start), its examples, and beside them the classes the model knows and
    the square it reads."""
    photo = UndecodedImage(None if first is None else str(first), type="filepath", label="Photo",
                           sources=["upload", "clipboard"], elem_id="photo-input", height=LARGE)
    gr.Examples([str(p) for p in examples], photo, label="Examples (CIFAR-10 test set)")
    gr.Markdown(CLASSES_NOTE, elem_id="photo-classes", elem_classes=["vd-note", "vd-detail"])
    with gr.Row(equal_height=False, elem_classes="vd-detail"):  # talk mode hides the notes: the examples fit
        live_canvas("photo-reads", "photo", "input", "the square the model reads", READS_SIZE, READS_SIZE,
                    scale=False)  # drawn in the page from the tab's numbers
        gr.Markdown(READS_NOTE, elem_classes="vd-note")
    return photo


def build_photo_tab(examples: list[Path]) -> Panel:
    first, analysis = starting_example(MODEL, examples, FIRST_EXAMPLE)  # shown with the numbers that come with the page
    photos, photo = build_panel("photo", MODEL, UPLOAD_PROMPT, lambda: photo_input(examples, first), analysis)
    # One event per new photo: its numbers, the large view's value, which every view draws from.
    photo.change(on_photo, [photo, photos.explanation.explain_class], photos.numbers, api_visibility="private",
                 show_progress="minimal", **SHARED_WORKERS)
    # API only: a photo file for scripts.
    api_photo = UndecodedImage(type="filepath", visible=False)
    api_photo.change(predict_image, api_photo, photos.api_outputs, api_name="predict_image", **SHARED_WORKERS)
    return photos
