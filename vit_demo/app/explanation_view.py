"""Why this class and not that one (class-specific relevance, for any class), and how far to trust each map for
the image in hand (its deletion and insertion curves, scored in the page by assets/page/faithfulness.js and drawn by
assets/page/views/faithfulness.js; the verdict's words are written here, ``VERDICT_TEXTS``, and
``verdict_parts`` is the reference the page's verdict is tested against)."""

from __future__ import annotations

import dataclasses
import html

import gradio as gr
import numpy as np

from vit_demo.app.captions import caption_html, relevance_title
from vit_demo.app.components import LARGE, live_canvas, live_script
from vit_demo.app.service import Analysis, classifier, relevance
from vit_demo.app.zerogpu import model_work
from vit_demo.data.datasets import dataset_spec
from vit_demo.interpret.faithfulness import RANDOM_RANKINGS, Curves, Verdict, faithfulness
from vit_demo.pictures import render

PREDICTED_CHOICE = "the predicted class"  # the class picker's default
# A change of the class to explain redraws the relevance view in the page (which asks for a class it lacks).
EXPLAIN_JS = "(choice) => {{ window.vdLive?.[{prefix!r}]?.explain(choice); }}"
SCORE_PROMPT = ("Press **Score the maps** to see, for this image, how fast each map's most relevant patches take "
                "the prediction away (deletion) or bring it back (insertion).")
FAITHFULNESS_TITLE = ("### How far to trust each map\nRank the patches by a map, then remove (or add back) the top "
                      "10%, 20%, ...: the faster the prediction falls (or returns), the more faithful the map. A "
                      "random ranking is the floor. Scored with every head on.")


def explain_label(choice: str | None) -> str | None:
    """The class picker's choice -> the class to explain (None: the predicted one)."""
    return None if choice in (None, "", PREDICTED_CHOICE) else choice


def relevance_map(analysis: Analysis, label: str | None) -> np.ndarray:
    """The relevance of ``label`` (None: the predicted class) for the analysed image, (g, g): the one computed with
    the prediction when it is that class, else one more forward and backward pass."""
    label = label or analysis.label
    if label == analysis.relevance_label:
        return analysis.relevance
    return relevance(analysis.model, [analysis.input], [label])[0]


@model_work
def image_curves(model: str, image: np.ndarray) -> dict[str, Curves]:
    """Each kind of map's deletion and insertion curves for one preprocessed image, random as the mean of several
    rankings with their spread (some 240 forward passes)."""
    clf = classifier(model)
    return faithfulness(clf.model, clf.batch([image]), clf.info.dataset.name, temperature=clf.temperature,
                        random_rankings=RANDOM_RANKINGS)


def map_curves(analysis: Analysis) -> dict[str, Curves]:
    """``image_curves`` of the analysed image."""
    return image_curves(analysis.model, analysis.input)


# The verdict's words, filled in by the page (assets/page/faithfulness.js, which gets them from
# vit_demo/app/page_model.py and follows the rules of ``verdict_parts``): {fields} are numbers shown
# with two decimals, percentages with one, map names, or other entries of this table, filled in first.
VERDICT_TEXTS = {
    "spread": "the spread of the area under the curve over {rankings} random rankings of this image",
    "noise": "the noise (±{deletion} on deletion, ±{insertion} on insertion: {spread})",
    "scores": "deletion {deletion}, insertion {insertion}",
    "flat_why": "with every patch removed, the blank image still reads **{label}** at {blank}% ({whole}% for the "
                "whole image)",
    "winner": "For this image, **{winner}** is the map to trust: it leads on both curves by more than {noise} "
              "({scores}; lower deletion and higher insertion are better).",
    "split": "No map wins for this image: **{deletion_leader}** leads on deletion ({deletion_auc}, lower is better) "
             "and **{insertion_leader}** on insertion ({insertion_auc}, higher is better), each by more than "
             "{noise}.",
    "one": "No map wins for this image: **{lead}** leads on {curve} by more than the noise (±{curve_noise}, "
           "{spread}; {scores}), but on {other} the maps tie, within ±{other_noise}.",
    "one_flat": "No map wins for this image: **{lead}** leads on {curve} by more than the noise (±{curve_noise}, "
                "{spread}; {scores}), but on {other} no map can lead: {flat_why}, and every {other} curve stays "
                "between {low}% and {high}%.",
    "tie": "The maps tie for this image: on both curves they differ by less than {noise}.",
    "tie_flat": "The maps tie for this image: on {curve} they differ by less than the noise (±{curve_noise}, "
                "{spread}), and on {other} no map can lead: {flat_why}, and every {other} curve stays between "
                "{low}% and {high}%.",
    "flat": "The maps can't be told apart on this image: {flat_why}, so deletion has nowhere to fall and insertion "
            "nowhere to rise. Every ranking of the patches, random ones too, keeps the prediction between {low}% "
            "and {high}%: the areas under their curves differ by noise, not by anything the maps found.",
}


def verdict_parts(v: Verdict, label: str) -> tuple[str, dict[str, str]]:
    """Which of ``VERDICT_TEXTS`` says the verdict on an image the model reads as ``label``, and its fields: a
    winner only where one map leads on both curves by more than the noise; no leader on a flat curve (FLAT)."""
    def two(x: float) -> str:
        return f"{x:.2f}"

    def pc(x: float) -> str:
        return f"{100 * x:.1f}"

    spread = VERDICT_TEXTS["spread"].format(rankings=RANDOM_RANKINGS)
    noise = VERDICT_TEXTS["noise"].format(deletion=two(v.deletion_noise), insertion=two(v.insertion_noise),
                                          spread=spread)
    flat_why = VERDICT_TEXTS["flat_why"].format(label=label, blank=pc(v.blank), whole=pc(v.whole))
    curves = {"deletion": (v.deletion_leader, v.deletion_noise, v.deletion_flat, v.deletion_band),
              "insertion": (v.insertion_leader, v.insertion_noise, v.insertion_flat, v.insertion_band)}

    def scores(kind: str) -> str:
        return VERDICT_TEXTS["scores"].format(deletion=two(v.deletion_auc[kind]), insertion=two(v.insertion_auc[kind]))

    if v.deletion_flat and v.insertion_flat:
        low, high = min(v.deletion_band[0], v.insertion_band[0]), max(v.deletion_band[1], v.insertion_band[1])
        return "flat", {"flat_why": flat_why, "low": pc(low), "high": pc(high)}
    if v.winner:
        return "winner", {"winner": v.winner, "noise": noise, "scores": scores(v.winner)}
    if v.deletion_leader and v.insertion_leader:
        return "split", {"deletion_leader": v.deletion_leader, "insertion_leader": v.insertion_leader,
                         "deletion_auc": two(v.deletion_auc[v.deletion_leader]),
                         "insertion_auc": two(v.insertion_auc[v.insertion_leader]), "noise": noise}
    # At most one curve has a leader, or is judged at all: ``curve`` is that one (deletion first), ``other`` the rest.
    curve = next((c for c in curves if curves[c][0]), next((c for c in curves if not curves[c][2]), "deletion"))
    other = "insertion" if curve == "deletion" else "deletion"
    lead, curve_noise = curves[curve][:2]
    other_noise, other_flat, (low, high) = curves[other][1:]
    fields = {"curve": curve, "other": other, "curve_noise": two(curve_noise), "spread": spread}
    flat_fields = {"flat_why": flat_why, "low": pc(low), "high": pc(high)}
    if lead:
        fields = {**fields, "lead": lead, "scores": scores(lead)}
        if other_flat:
            return "one_flat", {**fields, **flat_fields}
        return "one", {**fields, "other_noise": two(other_noise)}
    if other_flat:
        return "tie_flat", {**fields, **flat_fields}
    return "tie", {"noise": noise}


def verdict_text(v: Verdict, label: str) -> str:
    """The verdict in words (markdown), for an image the model reads as ``label``."""
    key, fields = verdict_parts(v, label)
    return VERDICT_TEXTS[key].format(**fields)


@dataclasses.dataclass
class ExplanationView:
    explain_class: gr.Dropdown
    api_relevance: gr.Image  # hidden: the relevance as a picture, and its note, in the API's answer
    api_relevance_note: gr.Markdown

    @property
    def api_outputs(self) -> list:
        return [self.api_relevance, self.api_relevance_note]

    @staticmethod
    def pictures(analysis: Analysis | None) -> tuple:
        """The relevance of the class the image was analysed for (None: nothing), as a picture, and its note."""
        if analysis is None:
            return None, relevance_title(None, None)
        return (render.overlay(analysis.input, analysis.relevance, LARGE),
                relevance_title(analysis, analysis.relevance_label))

    def wire(self, prefix: str) -> None:
        self.explain_class.change(None, self.explain_class, None, js=EXPLAIN_JS.format(prefix=prefix))


def build_relevance(prefix: str, model: str) -> gr.Dropdown:
    """A column: the relevance view (drawn in the page), with the picker of the class to explain."""
    gr.Markdown(relevance_title(None, None))
    explain_class = gr.Dropdown([PREDICTED_CHOICE, *dataset_spec(model).classes], value=PREDICTED_CHOICE,
                                label="Explain the class", elem_id=f"{prefix}-explain-class")
    relevance_view(prefix)
    return explain_class


def relevance_view(prefix: str) -> gr.HTML:
    """The view the page draws itself: the relevance of the class shown."""
    return live_canvas(f"{prefix}-relevance", prefix, "relevance", "class-specific relevance",
                       predicted=PREDICTED_CHOICE)


FAITHFULNESS_SIZE = (LARGE, 400)  # the chart's canvas: deletion above insertion


def faithfulness_view(prefix: str) -> gr.HTML:
    """How far to trust each map, drawn in the page (assets/page/views/faithfulness.js): the button that scores the
    maps of the image in hand, the deletion and insertion curves of each (a chart with a key), and the verdict
    under them."""
    width, height = FAITHFULNESS_SIZE
    prompt = html.escape(caption_html(SCORE_PROMPT))
    template = ('<div class="vd-faithfulness"><button type="button" class="vd-score">Score the maps</button>'
                f'<div class="vd-caption" aria-live="polite" data-prompt="{prompt}"></div>'
                f'<canvas class="vd-live-canvas vd-faithfulness-chart" width="{width}" height="{height}" role="img" '
                'aria-label="deletion and insertion curves of each map"></canvas>'
                '<ul class="vd-faithfulness-key"></ul><div class="vd-faithfulness-verdict" aria-live="polite"></div>'
                "</div>")
    return gr.HTML("", html_template=template, js_on_load=live_script(prefix, "faithfulness"),
                   elem_id=f"{prefix}-faithfulness", elem_classes=["vd-view", "vd-live"], padding=False)


def build_faithfulness(prefix: str) -> gr.HTML:
    """A column: how far to trust each map for this image."""
    gr.Markdown(FAITHFULNESS_TITLE)
    return faithfulness_view(prefix)
