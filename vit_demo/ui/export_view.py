"""Export for slides: a view of the image in hand as a PNG at least 1600 pixels wide, or a GIF stepping through the
layers, made on the server; one file, one download."""

from __future__ import annotations

import dataclasses

import gradio as gr
from PIL import Image

from vit_demo import render, slides
from vit_demo.ui.attention_view import MEAN, head_index, selected_view
from vit_demo.ui.components import cached_file
from vit_demo.ui.explanation_view import explain_label, relevance_map
from vit_demo.ui.models import Analysis
from vit_demo.ui.serving import PRIVATE

CLS_GRID = "Where [CLS] looks: every layer and head"
SELECTED = "One layer and head, as chosen above"
ROLLOUT = "Attention rollout"
RELEVANCE = "Why this class: relevance, for the class chosen above"
PATCHES = "What the model sees: the patches"
EXPORTED_VIEWS = (CLS_GRID, SELECTED, ROLLOUT, RELEVANCE, PATCHES)
NOTHING_YET = "Draw or upload an image first: the export is made from the image in hand."


def head_name(head: str) -> str:
    return "mean" if head in (MEAN, None) else str(head).replace(" ", "")


def slide(analysis: Analysis, view: str, layer: int, head: str, explain_choice: str | None) -> tuple[Image.Image, str]:
    """The chosen view of the analysed image for a slide (at least ``slides.SLIDE_WIDTH`` wide) and its file name."""
    stem = f"{analysis.model}-{analysis.label}"
    width = slides.SLIDE_WIDTH
    if view == CLS_GRID:
        return slides.cls_grid_slide(analysis.input, analysis.attention, width), f"{stem}-cls-grid.png"
    if view == SELECTED:
        return selected_view(analysis, layer, head, width), f"{stem}-layer{int(layer)}-{head_name(head)}.png"
    if view == ROLLOUT:
        return render.overlay(analysis.input, analysis.rollout, width), f"{stem}-rollout.png"
    if view == RELEVANCE:
        label = explain_label(explain_choice) or analysis.label
        return render.overlay(analysis.input, relevance_map(analysis, label), width), f"{stem}-relevance-{label}.png"
    if view == PATCHES:
        return render.patch_grid(analysis.input, analysis.grid, width), f"{stem}-patches.png"
    raise gr.Error(f"Unknown view {view!r}: choose one of the list.")


def on_png(analysis: Analysis | None, view: str, layer: int, head: str, explain_choice: str | None) -> str | None:
    if analysis is None:
        gr.Warning(NOTHING_YET)
        return None
    picture, name = slide(analysis, view, layer, head, explain_choice)
    return str(cached_file(slides.png_bytes(picture), name))


def on_gif(analysis: Analysis | None, head: str) -> str | None:
    if analysis is None:
        gr.Warning(NOTHING_YET)
        return None
    heads = analysis.attention.shape[1]
    data = slides.layers_gif(analysis.input, analysis.attention, head_index(head, heads))
    return str(cached_file(data, f"{analysis.model}-{analysis.label}-layers-{head_name(head)}.gif"))


@dataclasses.dataclass
class ExportView:
    view: gr.Dropdown
    png: gr.Button
    gif: gr.Button
    file: gr.File

    def wire(self, state: gr.State, layer: gr.Slider, head: gr.Radio, explain_class: gr.Dropdown) -> None:
        busy = {**PRIVATE, "show_progress": "minimal"}
        self.png.click(on_png, [state, self.view, layer, head, explain_class], self.file, **busy)
        self.gif.click(on_gif, [state, head], self.file, **busy)


def build_export(prefix: str) -> ExportView:
    """A row: export the image's views for slides."""
    gr.Markdown("### Export for slides\nMade from the image in hand: a view as a PNG 1600 pixels wide or more, or "
                "an animated GIF of where [CLS] looks, layer by layer, for the head chosen above.")
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=260):
            view = gr.Dropdown(list(EXPORTED_VIEWS), value=CLS_GRID, label="View", elem_id=f"{prefix}-export-view")
            with gr.Row():
                png = gr.Button("PNG for slides", elem_id=f"{prefix}-export-png", size="sm")
                gif = gr.Button("GIF through the layers", elem_id=f"{prefix}-export-gif", size="sm")
        with gr.Column(scale=3, min_width=260):
            file = gr.File(label="Download", interactive=False, elem_id=f"{prefix}-export-file")
    return ExportView(view, png, gif, file)
