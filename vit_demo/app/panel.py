"""One tab's views of an image: the input beside the prediction, then every view below. A new image is answered
once, with its prediction and the numbers the page draws every view from (``page_numbers.py``): a drawing by
the canvas' server function, an upload by one event. The page keeps them as the large view's value, and sends them
back with what the server still draws (export), which works from the image's pixels."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import gradio as gr
import numpy as np

from vit_demo.app import page_numbers
from vit_demo.data.datasets import dataset_spec
from vit_demo.data.preprocess import InputError, NothingDrawn
from vit_demo.app import attention_view, explanation_view, export_view, heads_view, training_view
from vit_demo.app.attention_view import MEAN, AttentionView, first_query_patch, query_answer
from vit_demo.app.components import LARGE, live_prediction, view_image
from vit_demo.app.explanation_view import ExplanationView, relevance_answer
from vit_demo.app.export_view import ExportView
from vit_demo.app.service import Analysis, calibration_report, model_config, model_problem, predict


# The captions a prediction is said with, filled in by the server here and by the page's own model (page/numbers.js
# fills the same templates, which vit_demo/app/page_model.py hands it).
INFO_TEXT = "**{label}** ({percent}%) · model {ms} ms {where}"
READING_TEXT = "**{label}** ({percent}%) · the views follow when the pen lifts"
UNREADABLE_TEXT = "Can't read this image: {why}"


def info_text(analysis: Analysis) -> str:
    return INFO_TEXT.format(label=analysis.label, percent=f"{100 * analysis.probs[analysis.label]:.1f}",
                            ms=f"{analysis.model_ms:.1f}", where=f"on `{analysis.device}`")


def unfamiliar_text(model: str) -> str:
    """The notice above an unfamiliar image's label. For a drawing: that it does not look like a digit. For a photo:
    that it looks unlike the photos the model knows, with how often the model reads such photos right (the share of
    its own test photos this unfamiliar that it classified right, from calibration.json)."""
    if dataset_spec(model).channels == 1:
        return ("**This does not look like a digit.** The model only knows the digits 0 to 9, so its answer is a "
                "guess.")
    classes = ", ".join(dataset_spec(model).classes)
    found = (calibration_report(model) or {}).get("unfamiliar") or {}
    odds = (f" Of the test photos that look this unfamiliar to it, it reads {100 * found['accuracy_on_flagged']:.0f}% "
            "right." if "accuracy_on_flagged" in found else "")
    return (f"**This looks unlike the photos the model knows.** It only knows {classes}, so its answer is a "
            f"guess.{odds}")


def message_text(result: InputError | str, blank_message: str) -> str:
    """What is said in place of a prediction: ``blank_message`` for a blank image, why one can't be read, or
    ``result`` itself (a str: no model, nothing yet)."""
    if isinstance(result, str):
        return result
    if isinstance(result, NothingDrawn):
        return blank_message
    return UNREADABLE_TEXT.format(why=result)


def numbers(result: Analysis | InputError | str, blank_message: str) -> dict:
    """The page's answer to a new image: for an analysed one, the prediction and the numbers every view draws from
    (``page_numbers.payload``: the image's, with its answers for rollout, the first query patch and the class it was
    analysed for, where it was); else a ``message``: ``blank_message`` for a blank image, why one can't be read, or
    ``result`` itself (a str: no model, nothing yet).

    An image that can't be read is answered, not raised: the page shows why in place of the prediction, and in a
    batch it fails no one else's request.
    """
    if not isinstance(result, Analysis):
        return {"message": page_numbers.caption_html(message_text(result, blank_message))}
    patch = first_query_patch(result)
    answers = {"rollout": {"map": page_numbers.map_payload(result.rollout)},
               "query": {str(patch): query_answer(result.attention, patch)}}
    if result.relevance_label is not None:
        answers["relevance"] = {result.relevance_label: relevance_answer(result, result.relevance_label)}
    notice = page_numbers.caption_html(unfamiliar_text(result.model)) if result.unfamiliar else ""
    return page_numbers.payload(result.input, result.attention, LARGE, result.label, patch, answers,
                             probs=result.probs, info=page_numbers.caption_html(info_text(result)), notice=notice)


def reading(model: str, image: np.ndarray) -> dict:
    """The page's answer while the pen is down: the prediction alone for a preprocessed image, from one forward pass
    without attention (some 2 ms less than ``numbers``, a few hundred bytes); the other views wait for the pen to
    lift."""
    prediction = predict(model, [image], attention=False)[0]
    info = READING_TEXT.format(label=prediction.label, percent=f"{100 * prediction.confidence:.1f}")
    return {"reading": True, "label": prediction.label, "probs": prediction.probs,
            "info": page_numbers.caption_html(info), "notice": ""}


def starting_numbers(first: Analysis | None, prompt: str) -> str:
    """The numbers a tab's page starts with (JSON; "" for none): those of the example ``first``, which the page shows
    until the user gives an image of their own."""
    if first is None:
        return ""
    return json.dumps({**numbers(first, prompt), "info": page_numbers.caption_html(
        f"An example: **{first.label}** ({100 * first.probs[first.label]:.1f}%). {prompt}")})


def page_answer(result: Analysis | InputError | str, blank_message: str) -> str:
    """``numbers`` as the large view's value (JSON): what an upload's one event answers."""
    return json.dumps(numbers(result, blank_message))


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
        """The large view, whose value is the tab's numbers (``numbers``, as JSON): every view in the page draws from
        it, and a button's event sends it back for the image it shows."""
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
                first: Analysis | None = None) -> tuple[Panel, Any]:
    """One tab: the first screen's story, a step a column (the input, made by ``build_input`` under
    ``input_title``; the patches it reads; one layer and head large; the prediction), then every other view in a
    section that talk mode hides (class ``vd-detail``), which links under the story lead to; ``first``: the image
    the page starts with (an example), whose numbers come with the page."""
    config = model_config(model)
    with gr.Row(equal_height=False, elem_classes="vd-top"):
        with gr.Column(scale=1, min_width=280, elem_classes="vd-input"):
            gr.Markdown(input_title, elem_classes="vd-step")
            source = build_input()
        with gr.Column(scale=1, min_width=260, elem_classes=["vd-patches-step", "vd-detail"]):
            attention_view.build_patches(prefix, config)
        with gr.Column(scale=1, min_width=280, elem_classes="vd-selected"):
            layer, head, selected = attention_view.build_selected(prefix, config, starting_numbers(first, prompt))
        with gr.Column(scale=1, min_width=240, elem_classes="vd-prediction"):
            gr.Markdown(ANSWER_TITLE, elem_classes="vd-step")
            live_prediction(prefix, model_problem(model) or prompt)
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
                explanation_view.build_faithfulness(prefix, model)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                attention_view.build_query(prefix, model, config)
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
