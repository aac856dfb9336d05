"""One tab's views of an image: the input beside the prediction, then every view below. A new image is answered
once, with its prediction and the numbers the page draws every view from (``vit_demo/live_view.py``); the analysed
image stays in the session's state for what the server still draws (the faithfulness chart, export)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gradio as gr

from vit_demo import live_view
from vit_demo.data import dataset_spec
from vit_demo.preprocess import InputError, NothingDrawn
from vit_demo.ui import attention_view, explanation_view, export_view, training_view
from vit_demo.ui.attention_view import MEAN, AttentionView, first_query_patch, query_answer
from vit_demo.ui.components import LARGE, view_image
from vit_demo.ui.explanation_view import ExplanationView, relevance_answer
from vit_demo.ui.export_view import ExportView
from vit_demo.ui.models import Analysis, calibration_report, model_config, model_problem


def info_text(analysis: Analysis) -> str:
    return f"**{analysis.label}** ({100 * analysis.probs[analysis.label]:.1f}%) · model {analysis.model_ms:.1f} ms on `{analysis.device}`"


def unfamiliar_text(model: str) -> str:
    """The notice above an unfamiliar image's label, with how often the model reads such images right (the share
    of its own test images this unfamiliar that it classified right, from calibration.json)."""
    classes = ", ".join(dataset_spec(model).classes)
    found = (calibration_report(model) or {}).get("unfamiliar") or {}
    odds = (f" Of the test photos that look this unfamiliar to it, it reads {100 * found['accuracy_on_flagged']:.0f}% "
            "right." if "accuracy_on_flagged" in found else "")
    return (f"**This looks unlike the photos the model knows.** It only knows {classes}, so its answer is a "
            f"guess.{odds}")


def notice(text: str = "") -> gr.Markdown:
    """The notice above the label: shown with ``text``, hidden without."""
    return gr.Markdown(text, visible=bool(text))


def message(text: str) -> tuple:
    """A message in place of a prediction (the order of ``Panel.prediction_outputs``)."""
    return notice(), None, text, None


def prediction(result: Analysis | InputError, blank_message: str) -> tuple:
    """An image's notice, label, info and analysis (the order of ``Panel.prediction_outputs``): ``blank_message``
    when it is blank, or why it can't be read.

    An image that can't be read is answered, not raised: the page shows why in place of the
    prediction, rather than a red "Error" over every output, and in a batch it fails no one else's
    request.
    """
    if isinstance(result, NothingDrawn):
        return message(blank_message)
    if isinstance(result, InputError):
        return message(f"Can't read this image: {result}")
    return notice(unfamiliar_text(result.model) if result.unfamiliar else ""), result.probs, info_text(result), result


def numbers(analysis: Analysis | None) -> str:
    """What the page draws every view of an analysed image from (the large view's value; "" for none): the image's
    numbers with the stroke's answers for rollout, the class it was analysed for and the first query patch."""
    if analysis is None:
        return ""
    patch = first_query_patch(analysis)
    answers = {"rollout": {"map": live_view.map_payload(analysis.rollout)},
               "query": {patch: query_answer(analysis.attention, patch)},
               "relevance": {analysis.relevance_label: relevance_answer(analysis, analysis.relevance_label)}}
    return live_view.payload(analysis.input, analysis.attention, LARGE, analysis.label, patch, answers)


def page_answer(result: Analysis | InputError | str, blank_message: str) -> tuple:
    """The page's answer (``Panel.page_outputs``) for an analysed image, one that failed, or a message (a str): the
    prediction, then the numbers every view draws from."""
    answer = message(result) if isinstance(result, str) else prediction(result, blank_message)
    return *answer, numbers(answer[-1]), *ExplanationView.reset()


def api_answer(model: str, result: Analysis | InputError | str, blank_message: str) -> tuple:
    """The API's answer (``Panel.api_outputs``) for an analysed image, one that failed, or a message (a str)."""
    _, label, info, analysis = message(result) if isinstance(result, str) else prediction(result, blank_message)
    return (label, info, *AttentionView.pictures(analysis, model_config(model).depth, MEAN),
            *ExplanationView.pictures(analysis))


@dataclasses.dataclass
class Panel:
    """A tab's outputs and the controls that choose what they show."""

    prefix: str  # the tab's, in its components' elem_ids
    notice: gr.Markdown
    label: gr.Label
    info: gr.Markdown
    attention: AttentionView
    explanation: ExplanationView
    position: gr.Slider  # the training slider's
    export: ExportView
    state: gr.State

    @property
    def page_outputs(self) -> list:
        """What one new image updates in the page: the prediction (``prediction``'s order), the numbers every view
        draws from, and what the image resets."""
        return [self.notice, self.label, self.info, self.state, self.attention.selected, *self.explanation.outputs]

    @property
    def api_outputs(self) -> list:
        """The API endpoints' answer: the label, the info, the attention pictures, and the relevance and its note."""
        return [self.label, self.info, *self.attention.api_outputs, *self.explanation.api_outputs]

    def wire_input(self, source: Any, answer: Callable[..., tuple], **event_args: Any) -> None:
        """``answer(source value, class to explain)`` answers a new image with ``page_answer``: one event, some 7 to 14 KB,
        whatever the views shown (the page draws them)."""
        source.change(answer, [source, self.explanation.explain_class], self.page_outputs, api_visibility="private",
                      **event_args)

    def wire(self) -> None:
        self.attention.wire(self.prefix)
        self.explanation.wire(self.state, self.prefix)
        self.export.wire(self.prefix, self.state, self.attention.layer, self.attention.head,
                         self.explanation.explain_class, self.position)


def build_panel(prefix: str, model: str, prompt: str, build_input: Callable[[], Any]) -> tuple[Panel, Any]:
    """One tab: the input (made by ``build_input``) beside the prediction and one layer and head large, then every
    other view in a section that talk mode hides (class ``vd-detail``)."""
    config = model_config(model)
    with gr.Row(equal_height=False, elem_classes="vd-top"):
        with gr.Column(scale=1, min_width=300, elem_classes="vd-input"):
            source = build_input()
        with gr.Column(scale=1, min_width=260, elem_classes="vd-prediction"):
            notice_above = gr.Markdown(visible=False, elem_id=f"{prefix}-notice", elem_classes="vd-notice")
            label = gr.Label(num_top_classes=3, label="Prediction", elem_id=f"{prefix}-label")
            info = gr.Markdown(model_problem(model) or prompt, elem_id=f"{prefix}-info")
        with gr.Column(scale=1, min_width=300, elem_classes="vd-selected"):
            layer, head, selected = attention_view.build_selected(prefix, config)
    with gr.Column(elem_classes="vd-detail"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=300):
                attention_view.build_patches(prefix, config)
            with gr.Column(scale=3, min_width=300):
                attention_view.build_cls_grid(prefix, config)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                attention_view.build_rollout(prefix)
            with gr.Column(scale=1, min_width=300):
                explain_class = explanation_view.build_relevance(prefix, model)
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                attention_view.build_query(prefix, model, config)
            with gr.Column(scale=2):
                score, faithfulness, faithfulness_note = explanation_view.build_faithfulness(prefix)
        position = training_view.build_training(prefix, model, config)
        export = export_view.build_export(prefix, config.grid_size ** 2)
    with gr.Column(visible=False):  # the API's answer: the views as pictures
        api_views = [view_image(f"{prefix}-api-{name}") for name in ("patches", "cls-grid", "selected", "rollout",
                                                                     "query")]
        api_query_note = gr.Markdown()
        api_relevance, api_relevance_note = view_image(f"{prefix}-api-relevance"), gr.Markdown()
    panel = Panel(
        prefix, notice_above, label, info,
        AttentionView(layer, head, selected, *api_views, api_query_note),
        ExplanationView(explain_class, score, faithfulness, faithfulness_note, api_relevance, api_relevance_note),
        position,
        export,
        gr.State(),
    )
    panel.wire()
    return panel, source
