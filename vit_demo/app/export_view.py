"""Export for slides: a view of the image in hand as a PNG at least 1600 pixels wide, or a GIF stepping through the
layers, made on the server; one file, one download."""

from __future__ import annotations

import dataclasses
import json

import gradio as gr
from PIL import Image

from vit_demo.pictures import figures, slides
from vit_demo.app.attention_view import checked_patch, first_query_patch, head_index
from vit_demo.app.components import cached_file
from vit_demo.app.explanation_view import explain_label, map_curves, relevance_map
from vit_demo.app.captions import read_image
from vit_demo.app.service import Analysis, analyse_inputs, input_shape, training_run
from vit_demo.app.serving import PRIVATE
from vit_demo.app.training_view import snapshot_attention

# The export's choices, as the page words them -> the view in ``slides``.
EXPORTED_VIEWS = {
    "Where [CLS] looks: every layer and head": slides.CLS_GRID,
    "One layer and head, as chosen above": slides.LAYER,
    "Attention rollout": slides.ROLLOUT,
    "Why this class: relevance, for the class chosen above": slides.RELEVANCE,
    "What the model sees: the patches": slides.PATCHES,
    "Where a patch looks: every layer and head, for the patch set here": slides.QUERY,
}
FAITHFULNESS = "How far to trust each map: the chart (some 90 forward passes)"
TRAINING = "Attention through training: the model as it was at the snapshot chosen above"
CHOICES = (*EXPORTED_VIEWS, FAITHFULNESS, TRAINING)
NOTHING_YET = "Draw or upload an image first: the export is made from the image in hand."


def image_analysis(model: str, value: str | None) -> Analysis | None:
    """The image a tab's page shows, through ``model`` again: ``value`` is the tab's numbers as the page sends them
    back with a button's event (as JSON; its pixels, ``image``, are exactly what the model read).
    None when the page shows no image."""
    try:
        image = json.loads(value or "{}").get("image")
    except (json.JSONDecodeError, AttributeError):
        return None
    if image is None:
        return None
    return analyse_inputs(model, [read_image(image, input_shape(model))], [None])[0]


def slide(analysis: Analysis, choice: str, layer: int, head: str, explain_choice: str | None,
          patch: float | None = None, position: int | None = None) -> tuple[Image.Image, str]:
    """The chosen view of the analysed image for a slide (at least ``slides.SLIDE_WIDTH`` wide) and its file name;
    ``patch`` None: the patch the query view starts at; ``position``: the training slider's (None: the last)."""
    stem = f"{analysis.model}-{analysis.label}"
    if choice == FAITHFULNESS:
        scale = slides.SLIDE_WIDTH / figures.FAITHFULNESS_WIDTH
        return figures.faithfulness_plot(map_curves(analysis), scale=scale), f"{stem}-faithfulness.png"
    if choice == TRAINING:
        run = training_run(analysis.model)
        if run.problem:
            raise gr.Error(run.problem)
        attention, epoch, _ = snapshot_attention(analysis, run.positions if position is None else position)
        when = "trained" if epoch is None else f"epoch{epoch}"
        return slides.view_slide(slides.CLS_GRID, analysis.input, attention), f"{stem}-cls-grid-{when}.png"
    if choice not in EXPORTED_VIEWS:
        raise gr.Error(f"Unknown view {choice!r}: choose one of the list.")
    view = EXPORTED_VIEWS[choice]
    layer_index = min(max(int(layer), 1), analysis.attention.shape[0]) - 1
    head = head_index(head, analysis.attention.shape[1])
    explained = explain_label(explain_choice) or analysis.label
    relevance = relevance_map(analysis, explained) if view == slides.RELEVANCE else None
    if patch is None:
        patch = first_query_patch(analysis)
    else:
        try:
            patch = checked_patch(patch, analysis.grid ** 2)
        except ValueError as exc:
            raise gr.Error(f"{exc} Clear the box to export the patch shown above.") from None
    picture = slides.view_slide(view, analysis.input, analysis.attention, layer_index, head, relevance, patch)
    return picture, slides.slide_name(analysis.model, analysis.label, view, layer_index, head, explained, patch)


def on_png(analysis: Analysis | None, choice: str, layer: int, head: str, explain_choice: str | None,
           patch: float | None = None, position: int | None = None, shown: int | None = None) -> str | None:
    """``patch``: the patch box's (None: empty); ``shown``: the patch the query view shows in the page."""
    if analysis is None:
        gr.Warning(NOTHING_YET)
        return None
    picture, name = slide(analysis, choice, layer, head, explain_choice, shown if patch is None else patch, position)
    return str(cached_file(slides.png_bytes(picture), name))


def on_gif(analysis: Analysis | None, head: str) -> str | None:
    if analysis is None:
        gr.Warning(NOTHING_YET)
        return None
    index = head_index(head, analysis.attention.shape[1])
    data = slides.layers_gif(analysis.input, analysis.attention, index)
    return str(cached_file(data, slides.slide_name(analysis.model, analysis.label, slides.LAYERS_GIF, head=index)))


def typed_patch(text: str | None) -> float | str | None:
    """The patch box's text: None when empty, else the number typed (or the text itself, which ``checked_patch``
    refuses with the range)."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


# An empty patch box exports the patch the query view shows (the page knows which: a click there costs no request).
SHOWN_PATCH_JS = "(...inputs) => {{ inputs[7] = window.vdLive?.[{prefix!r}]?.patch ?? null; return inputs; }}"


@dataclasses.dataclass
class ExportView:
    view: gr.Dropdown
    patch: gr.Textbox
    shown: gr.Number  # hidden: the patch the query view shows, which the page knows (set as the button is pressed)
    png: gr.Button
    gif: gr.Button
    file: gr.File

    def wire(self, model: str, prefix: str, numbers: gr.HTML, layer: gr.Slider, head: gr.Radio,
             explain_class: gr.Dropdown, position: gr.Slider) -> None:
        """``numbers``: the tab's (its large view), which the buttons send back for the image in hand."""
        def png(value: str | None, choice: str, layer: int, head: str, explain_choice: str | None,
                patch: str | None, position: int | None, shown: int | None) -> str | None:
            return on_png(image_analysis(model, value), choice, layer, head, explain_choice, typed_patch(patch),
                          position, shown)

        def gif(value: str | None, head: str) -> str | None:
            return on_gif(image_analysis(model, value), head)

        busy = {**PRIVATE, "show_progress": "minimal"}
        self.png.click(png, [numbers, self.view, layer, head, explain_class, self.patch, position, self.shown],
                       self.file, js=SHOWN_PATCH_JS.format(prefix=prefix), **busy)
        self.gif.click(gif, [numbers, head], self.file, **busy)
        # A new image empties the patch box (in the page alone), which then means the patch its query view shows.
        numbers.change(None, None, self.patch, js='() => ""')


def build_export(prefix: str, patches: int) -> ExportView:
    """A row: export the image's views for slides (``patches``: how many the model's grid has)."""
    gr.Markdown("### Export for slides\nMade from the image in hand: a view as a PNG 1600 pixels wide or more, or "
                "an animated GIF of where [CLS] looks, layer by layer, for the head chosen above.")
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=260):
            view = gr.Dropdown(list(CHOICES), value=CHOICES[0], label="View", elem_id=f"{prefix}-export-view")
            # A text box: Gradio's number box shows an empty value as 0, which reads as patch 0.
            patch = gr.Textbox("", label=f"Patch, for 'Where a patch looks': 0 to {patches - 1}",
                               placeholder="empty: the one shown above", max_lines=1,
                               elem_id=f"{prefix}-export-patch")
            with gr.Row():
                png = gr.Button("PNG for slides", elem_id=f"{prefix}-export-png", size="sm")
                gif = gr.Button("GIF through the layers", elem_id=f"{prefix}-export-gif", size="sm")
        with gr.Column(scale=3, min_width=260):
            file = gr.File(label="Download", interactive=False, elem_id=f"{prefix}-export-file")
    return ExportView(view, patch, gr.Number(None, precision=0, visible=False), png, gif, file)
