"""One tab's views of an image: the input beside the prediction, then every view below. The page computes every
view's numbers itself (assets/page/source.js) from the model's raw outputs, keeps them as the large view's value, and
sends them back with what the server still draws (export), which works from the image's pixels."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gradio as gr

from vit_demo.app import attention_view, explanation_view, export_view, heads_view, training_view
from vit_demo.app.attention_view import MEAN, AttentionView
from vit_demo.app.captions import info_text, message_text
from vit_demo.app.components import live_prediction, view_image
from vit_demo.app.explanation_view import ExplanationView
from vit_demo.app.export_view import ExportView
from vit_demo.app.service import Analysis, model_config, model_problem
from vit_demo.data.preprocess import InputError


def api_answer(model: str, result: Analysis | InputError | str, blank_message: str) -> tuple:
    """The API's answer (``Panel.api_outputs``) for an analysed image, one that failed, or a message (a str)."""
    if isinstance(result, Analysis):
        label, info, analysis = result.probs, info_text(result), result
    else:
        label, info, analysis = None, message_text(result, blank_message), None
    return (label, info, *AttentionView.pictures(analysis, model_config(model).depth, MEAN),
            *ExplanationView.pictures(analysis))


@dataclasses.dataclass
class Panel:
    """A tab's outputs and the controls that choose what they show."""

    prefix: str  # the tab's, in its components' elem_ids
    model: str
    attention: AttentionView
    explanation: ExplanationView
    position: gr.Slider  # the training slider's
    export: ExportView
    api_label: gr.Label  # hidden: the API's answer's label and info line (the page draws its own)
    api_info: gr.Markdown

    @property
    def numbers(self) -> gr.HTML:
        """The large view, whose value is the tab's numbers (as JSON, set by the page): every view in the page draws
        from it, and a button's event sends it back for the image it shows."""
        return self.attention.selected

    @property
    def api_outputs(self) -> list:
        """The API endpoints' answer: the label, the info, the attention pictures, and the relevance and its note."""
        return [self.api_label, self.api_info, *self.attention.api_outputs, *self.explanation.api_outputs]

    def wire(self) -> None:
        self.attention.wire(self.prefix)
        self.explanation.wire(self.prefix)
        self.export.wire(self.model, self.prefix, self.numbers, self.attention.layer, self.attention.head,
                         self.explanation.explain_class, self.position)


ANSWER_TITLE = "### The answer\nRead from [CLS] after the last layer: how sure the model is of each class."


def deeper_links(prefix: str) -> str:
    """Under the first screen: where to go deeper, each view's plain name linking to it."""
    links = " · ".join(f'<a href="#{prefix}-{view}">{name}</a>' for view, name in DEEPER)
    return f'<nav class="vd-deeper vd-detail" aria-label="Go deeper"><b>Go deeper:</b> {links}</nav>'


DEEPER = (("cls-grid", "every layer and head"), ("rollout", "all layers together"), ("relevance", "why this class?"),
          ("faithfulness", "can you trust these maps?"), ("query", "where one patch looks"),
          ("training", "how it learned to look"), ("board", "what each head does"))


def build_panel(prefix: str, model: str, prompt: str, input_title: str, build_input: Callable[[], Any],
                build_answer_notes: Callable[[], None] | None = None) -> tuple[Panel, Any]:
    """One tab: the first screen's story, a step a column (the input, made by ``build_input`` under
    ``input_title``; the patches it reads; one layer and head large; the prediction, with what
    ``build_answer_notes`` adds under it), then every other view in a section that talk mode hides (class
    ``vd-detail``), which links under the story lead to."""
    config = model_config(model)
    with gr.Row(equal_height=False, elem_classes="vd-top"):
        with gr.Column(scale=1, min_width=280, elem_classes="vd-input"):
            gr.Markdown(input_title, elem_classes="vd-step")
            source = build_input()
        with gr.Column(scale=1, min_width=260, elem_classes=["vd-patches-step", "vd-detail"]):
            attention_view.build_patches(prefix, config)
        with gr.Column(scale=1, min_width=280, elem_classes="vd-selected"):
            layer, head, selected = attention_view.build_selected(prefix, config)
        with gr.Column(scale=1, min_width=240, elem_classes="vd-prediction"):
            gr.Markdown(ANSWER_TITLE, elem_classes="vd-step")
            live_prediction(prefix, model_problem(model) or prompt)
            if build_answer_notes:
                build_answer_notes()
    gr.HTML(deeper_links(prefix), padding=False)
    with gr.Column(elem_classes="vd-detail"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=300):
                attention_view.build_cls_grid(prefix, config)
            with gr.Column(scale=2, min_width=300):
                attention_view.build_rollout(prefix)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                explain_class = explanation_view.build_relevance(prefix, model)
            with gr.Column(scale=1, min_width=300):
                explanation_view.build_faithfulness(prefix)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                attention_view.build_query(prefix, config)
            with gr.Column(scale=1, min_width=300):
                position = training_view.build_training(prefix, model, config)
        heads_view.build_heads(prefix, model, config)  # what each head does: knockout, lens, patching
        export = export_view.build_export(prefix, config.grid_size ** 2)
    with gr.Column(visible=False):  # the API's answer: the prediction, and the views as pictures
        api_label, api_info = gr.Label(num_top_classes=3, label="prediction"), gr.Markdown()
        api_views = [view_image(f"{prefix}-api-{name}") for name in ("patches", "cls-grid", "selected", "rollout",
                                                                     "query")]
        api_query_note = gr.Markdown()
        api_relevance, api_relevance_note = view_image(f"{prefix}-api-relevance"), gr.Markdown()
    panel = Panel(
        prefix, model,
        AttentionView(layer, head, selected, *api_views, api_query_note),
        ExplanationView(explain_class, api_relevance, api_relevance_note),
        position,
        export,
        api_label, api_info,
    )
    panel.wire()
    return panel, source
