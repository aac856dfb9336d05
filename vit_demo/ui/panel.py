"""One tab's views of an image: the input beside the prediction, then every view below, all wired to the
analysed image kept in the session's state."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gradio as gr

from vit_demo.data import dataset_spec
from vit_demo.preprocess import InputError, NothingDrawn
from vit_demo.ui import attention_view, explanation_view, export_view, training_view
from vit_demo.ui.attention_view import MEAN, AttentionView
from vit_demo.ui.components import view_image
from vit_demo.ui.explanation_view import ExplanationView
from vit_demo.ui.export_view import ExportView
from vit_demo.ui.models import Analysis, calibration_report, model_config, model_problem, training_run
from vit_demo.ui.serving import PRIVATE
from vit_demo.ui.training_view import TrainingView, training_views


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


def views(model: str, analysis: Analysis | None, layer: int, head: str, position: int | None = None,
          live: bool = True) -> tuple:
    """Every view of an analysed image (None: none), in the order of ``Panel.view_outputs`` (position None: the
    trained model; ``live``: the large view as the numbers the page draws it from, else as a picture)."""
    attention = AttentionView.views(analysis, layer, head, live)
    if analysis is None:
        return *attention, *ExplanationView.views(None, live), *training_views(model, None, 1)
    position = training_run(model).positions if position is None else position
    return (*attention, *ExplanationView.views(analysis, live),
            *training_views(model, analysis, position))


def api_answer(model: str, result: Analysis | InputError | str, blank_message: str) -> tuple:
    """The API's answer (``Panel.api_outputs``) for an analysed image, one that failed, or a message (a str)."""
    _, label, info, analysis = message(result) if isinstance(result, str) else prediction(result, blank_message)
    attention = AttentionView.views(analysis, model_config(model).depth, MEAN, live=False)
    return label, info, *attention, *ExplanationView.views(analysis, live=False)[:2]


@dataclasses.dataclass
class Panel:
    """A tab's outputs and the controls that choose what they show."""

    model: str
    prefix: str  # the tab's, in its components' elem_ids
    notice: gr.Markdown
    label: gr.Label
    info: gr.Markdown
    attention: AttentionView
    explanation: ExplanationView
    training: TrainingView
    export: ExportView
    state: gr.State

    @property
    def prediction_outputs(self) -> list:
        return [self.notice, self.label, self.info, self.state]

    @property
    def view_outputs(self) -> list:
        return [*self.attention.outputs, *self.explanation.outputs, *self.training.outputs]

    @property
    def api_outputs(self) -> list:
        """The API endpoints' answer: the label, the info, the attention pictures, and the relevance and its note."""
        return [self.label, self.info, *self.attention.api_outputs, *self.explanation.api_outputs]

    def wire_input(self, source: Any, predict: Callable[..., tuple], **event_args: Any) -> None:
        """``predict(source value, class to explain)`` answers a new image with its label first; its views follow
        when the analysis in the state changes, so the label never waits for some forty pictures. (A ``.then``
        would do the same, but Gradio drops the one after a change event that ``always_last`` merged.)"""
        source.change(predict, [source, self.explanation.explain_class], self.prediction_outputs,
                      api_visibility="private", **event_args)
        self.state.change(lambda analysis, layer, head, position: views(self.model, analysis, layer, head, position),
                          [self.state, self.attention.layer, self.attention.head, self.training.position],
                          self.view_outputs, **PRIVATE)

    def wire(self) -> None:
        self.attention.wire(self.state, self.prefix)
        self.explanation.wire(self.state)
        self.training.wire(self.model, self.state)
        self.export.wire(self.state, self.attention.layer, self.attention.head, self.explanation.explain_class,
                         self.attention.patches, self.training.position)


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
                patches = attention_view.build_patches(prefix, config)
            with gr.Column(scale=3, min_width=300):
                cls_grid = attention_view.build_cls_grid(prefix, config)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                rollout = attention_view.build_rollout(prefix)
            with gr.Column(scale=1, min_width=300):
                explain_class, relevance, relevance_note = explanation_view.build_relevance(
                    prefix, dataset_spec(model).classes)
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                query, query_note = attention_view.build_query(prefix, config)
            with gr.Column(scale=2):
                score, faithfulness, faithfulness_note = explanation_view.build_faithfulness(prefix)
        training = training_view.build_training(prefix, model, config)
        export = export_view.build_export(prefix, (config.image_size // config.patch_size) ** 2)
    panel = Panel(
        model, prefix, notice_above, label, info,
        AttentionView(patches, cls_grid, layer, head, selected, rollout, query, query_note,
                      view_image(f"{prefix}-api-selected", visible=False),
                      view_image(f"{prefix}-api-rollout", visible=False),
                      view_image(f"{prefix}-api-cls-grid", visible=False),
                      view_image(f"{prefix}-api-query", visible=False)),
        ExplanationView(explain_class, relevance, relevance_note, score, faithfulness, faithfulness_note,
                        view_image(f"{prefix}-api-relevance", visible=False)),
        training,
        export,
        gr.State(),
    )
    panel.wire()
    return panel, source
