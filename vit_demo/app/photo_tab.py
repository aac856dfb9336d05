"""The photo tab: upload a photo (or pick an example) and see every view (the page reads the photo:
assets/page/photo.js); ``/predict_image`` for scripts."""

from __future__ import annotations

import html
import json
from pathlib import Path

import gradio as gr

from vit_demo.app.components import ASSETS, LARGE, UndecodedImage, live_canvas, served
from vit_demo.app.forward import forward_function
from vit_demo.app.page_model import app_description
from vit_demo.app.panel import Panel, api_answer, build_panel
from vit_demo.app.service import analyse_batch, model_problem
from vit_demo.app.serving import SHARED_WORKERS
from vit_demo.data.datasets import dataset_spec

MODEL = "cifar10"
LABEL = "Upload a photo (CIFAR-10)"  # the tab's (the static page's too)
UPLOAD_PROMPT = "Upload a photo, or pick an example below."
BLANK_PHOTO = "This image is blank: there is nothing to classify."
FIRST_EXAMPLE = "horse"  # the example the page starts with


def predict_image(path: str | None) -> tuple:
    """API: classify a photo; the label, info, attention views and relevance (``Panel.api_outputs``)."""
    if path is None:
        return api_answer(MODEL, UPLOAD_PROMPT, BLANK_PHOTO)
    return api_answer(MODEL, model_problem(MODEL) or analyse_batch(MODEL, [path])[0], BLANK_PHOTO)


CLASSES_NOTE = (f"**It knows ten classes:** {', '.join(dataset_spec(MODEL).classes)}. Anything else gets one of "
                "these ten, with a warning when the photo looks unlike them.")
READS_NOTE = (f"**What the model reads:** {dataset_spec(MODEL).image_size} x {dataset_spec(MODEL).image_size} "
              "pixels, the photo's shorter side scaled down and the centre square kept: a wide or tall photo loses "
              "its edges.")
INPUT_TITLE = (f"### Choose a photo\nUpload one or pick an example: it is shrunk to {dataset_spec(MODEL).image_size} "
               f"x {dataset_spec(MODEL).image_size} pixels, as CIFAR-10's are.")
READS_SIZE = 128  # pixels a side of the picture of what the model reads
# The upload's change event: the page reads the photo (assets/page/photo.js).
READ_IN_PAGE_JS = "(photo) => { window.vdLive?.photo?.readPhoto?.(photo?.url ?? null); }"


def photo_input(examples: list[Path], first: Path | None) -> gr.Image:
    """The upload (showing ``first`` at the start) and its examples."""
    photo = UndecodedImage(None if first is None else str(first), type="filepath", label="Photo",
                           sources=["upload", "clipboard"], elem_id="photo-input", height=LARGE)
    gr.Examples([str(p) for p in examples], photo, label="Examples (CIFAR-10 test set)")
    return photo


def photo_notes() -> None:
    """Under the answer: the classes the model knows, and the square it read (talk mode hides them)."""
    gr.Markdown(CLASSES_NOTE, elem_id="photo-classes", elem_classes=["vd-note", "vd-detail", "vd-answer-note"])
    with gr.Row(equal_height=False, elem_classes=["vd-detail", "vd-answer-note"]):
        live_canvas("photo-reads", "photo", "input", "the square the model reads", READS_SIZE, READS_SIZE,
                    scale=False)  # drawn in the page from the tab's numbers
        gr.Markdown(READS_NOTE, elem_classes="vd-note")


def photo_reader(described: dict) -> gr.HTML:
    """What reads the photos in the page: the tab's source (``described``: page_model.py's ``app_description``),
    loaded by assets/page/photo.js, with the server function that runs the model where the page can't."""
    address = json.dumps(served(ASSETS / "page" / "photo.js"))
    return gr.HTML("", html_template=f'<div hidden data-page-model="{html.escape(json.dumps(described))}"></div>',
                   server_functions=[forward_function(MODEL)],
                   js_on_load=f"import(new URL({address}, document.baseURI).href)"
                              ".then(({ usePhotoModel }) => usePhotoModel(element, 'photo', server));",
                   elem_id="photo-reader", elem_classes=["vd-hidden"], padding=False)


def build_photo_tab(examples: list[Path]) -> Panel:
    first = next((path for path in examples if path.stem == FIRST_EXAMPLE), None)
    photos, photo = build_panel("photo", MODEL, UPLOAD_PROMPT, INPUT_TITLE, lambda: photo_input(examples, first),
                                build_answer_notes=photo_notes)
    if not model_problem(MODEL):  # (else the prediction says why there is no model)
        photo_reader(app_description(MODEL, UPLOAD_PROMPT, BLANK_PHOTO, first))
        photo.change(None, photo, None, js=READ_IN_PAGE_JS)
    # API only: a photo file for scripts.
    api_photo = UndecodedImage(type="filepath", label="photo", visible=False)
    api_photo.change(predict_image, api_photo, photos.api_outputs, api_name="predict_image", **SHARED_WORKERS)
    return photos
