"""Why this class and not that one (class-specific relevance, for any class), and how far to trust each map for
the image in hand (its deletion and insertion curves)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import gradio as gr
import numpy as np
from PIL import Image

from vit_demo import figures, live_view, render
from vit_demo.data import dataset_spec
from vit_demo.faithfulness import RANDOM_RANKINGS, Verdict, faithfulness, verdict
from vit_demo.ui.components import LARGE, VIEW_BUTTONS, live_asker, live_canvas, view_image
from vit_demo.ui.models import Analysis, analyse_inputs, classifier, heads_off, image_analysis
from vit_demo.ui.models import relevance
from vit_demo.ui.serving import PRIVATE
from vit_demo.zerogpu import model_work

PREDICTED_CHOICE = "the predicted class"  # the class picker's default
# A change of the class to explain redraws the relevance view in the page (which asks for a class it lacks).
EXPLAIN_JS = "(choice) => {{ window.vdLive?.[{prefix!r}]?.explain(choice); }}"
SCORE_PROMPT = ("Press **Score the maps** to see, for this image, how fast each map's most relevant patches take "
                "the prediction away (deletion) or bring it back (insertion).")
# A new image hides the last image's chart and says what the button does, in the page alone.
RESET_JS = f"() => [{{__type__: 'update', visible: false, value: null}}, {json.dumps(SCORE_PROMPT)}]"


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


# The relevance view's caption, for the class the model says and for another (filled in here, and by the page's own
# model: vit_demo/ui/page_model.py).
RELEVANCE_WHY = ("### Why {label}?\nThe patches whose attention pushed the model towards **{label}**, its answer "
                 "({percent}%): class-specific relevance (Chefer et al., 2021).")
RELEVANCE_WHY_NOT = ("### Why not {label}?\nThe patches that speak for **{label}** ({percent}%); the model says "
                     "**{predicted}**. Class-specific relevance (Chefer et al., 2021).")


def relevance_title(analysis: Analysis | None, label: str | None) -> str:
    if analysis is None:
        return "### Why this class?"
    label = label or analysis.label
    template = RELEVANCE_WHY if label == analysis.label else RELEVANCE_WHY_NOT
    return template.format(label=label, percent=f"{100 * analysis.probs[label]:.1f}", predicted=analysis.label)


@model_work
def map_curves(analysis: Analysis) -> dict:
    """Each kind of map's deletion and insertion curves for this image, random as the mean of several rankings
    with their spread (some 240 forward passes)."""
    clf = classifier(analysis.model)
    return faithfulness(clf.model, clf.batch([analysis.input]), clf.info.dataset.name, temperature=clf.temperature,
                        random_rankings=RANDOM_RANKINGS)


def _scores(v: Verdict, kind: str) -> str:
    return f"deletion {v.deletion_auc[kind]:.2f}, insertion {v.insertion_auc[kind]:.2f}"


def verdict_text(v: Verdict) -> str:
    """The verdict in words: a winner only where one map leads on both curves by more than the noise."""
    spread = f"the spread of the AUC over {RANDOM_RANKINGS} random rankings of this image"
    noise = {"deletion": v.deletion_noise, "insertion": v.insertion_noise}
    both = f"the noise (±{v.deletion_noise:.2f} on deletion, ±{v.insertion_noise:.2f} on insertion: {spread})"
    if v.winner:
        return (f"For this image, **{v.winner}** is the map to trust: it leads on both curves by more than {both} "
                f"({_scores(v, v.winner)}; lower deletion and higher insertion are better).")
    if v.deletion_leader and v.insertion_leader:
        return (f"No map wins for this image: **{v.deletion_leader}** leads on deletion "
                f"({v.deletion_auc[v.deletion_leader]:.2f}, lower is better) and **{v.insertion_leader}** on "
                f"insertion ({v.insertion_auc[v.insertion_leader]:.2f}, higher is better), each by more than {both}.")
    if v.deletion_leader or v.insertion_leader:
        lead, curve, other = ((v.deletion_leader, "deletion", "insertion") if v.deletion_leader
                              else (v.insertion_leader, "insertion", "deletion"))
        return (f"No map wins for this image: **{lead}** leads on {curve} by more than the noise "
                f"(±{noise[curve]:.2f}, {spread}; {_scores(v, lead)}), but on {other} the maps tie, within "
                f"±{noise[other]:.2f}.")
    return f"The maps tie for this image: on both curves they differ by less than {both}."


def score_maps(analysis: Analysis) -> tuple[Image.Image, str]:
    """Each kind of map's deletion and insertion curve for this image, as a chart, and which map to trust."""
    curves = map_curves(analysis)
    return figures.faithfulness_plot(curves), verdict_text(verdict(curves))


def relevance_answer(analysis: Analysis, label: str) -> dict:
    """The relevance of ``label`` for the analysed image as the numbers the page draws it from, with its caption."""
    return live_view.map_payload(relevance_map(analysis, label), label=label,
                                 title=live_view.caption_html(relevance_title(analysis, label)))


def ask_relevance(model: str) -> Callable[[dict], dict]:
    """The relevance view's server function: the relevance of the class the page asks for, computed from the page's
    pixels (one forward and one backward pass; with the heads the page switched off, ``models.heads_off``)."""
    def answer(image: np.ndarray, request: dict) -> dict:
        label = request.get("label")
        if label not in classifier(model).classes:
            raise ValueError(f"there is no class {label!r}")
        return relevance_answer(analyse_inputs(model, [image], [label], heads_off(model, request))[0], label)
    return live_asker("relevance", model, answer)


@dataclasses.dataclass
class ExplanationView:
    explain_class: gr.Dropdown
    score: gr.Button
    faithfulness: gr.Image
    faithfulness_note: gr.Markdown
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

    def wire(self, model: str, numbers: gr.HTML, prefix: str) -> None:
        """``numbers``: the tab's (its large view), which the score button sends back for the image in hand; a new
        image hides the chart (no blank gap) until the button is pressed again (some 240 more forward passes)."""
        def score(value: str | None) -> tuple:
            return on_score(image_analysis(model, value))

        self.explain_class.change(None, self.explain_class, None, js=EXPLAIN_JS.format(prefix=prefix))
        self.score.click(score, numbers, [self.faithfulness, self.faithfulness_note],
                         **{**PRIVATE, "show_progress": "minimal"})
        numbers.change(None, None, [self.faithfulness, self.faithfulness_note], js=RESET_JS)


def on_score(analysis: Analysis | None) -> tuple:
    if analysis is None:
        return (gr.update(value=None, visible=False),
                "Draw or upload an image first: the maps are scored for the image in hand.")
    chart, note = score_maps(analysis)
    return gr.update(value=chart, visible=True), note


def build_relevance(prefix: str, model: str) -> gr.Dropdown:
    """A column: the relevance view (drawn in the page; another class's numbers asked for once), with the picker of
    the class to explain."""
    gr.Markdown(relevance_title(None, None))
    explain_class = gr.Dropdown([PREDICTED_CHOICE, *dataset_spec(model).classes], value=PREDICTED_CHOICE,
                                label="Explain the class", elem_id=f"{prefix}-explain-class")
    relevance_view(prefix, [ask_relevance(model)])
    return explain_class


def relevance_view(prefix: str, ask: list[Callable[[dict], dict]] | None = None) -> gr.HTML:
    """The view the page draws itself: the relevance of the class shown (another class's asked for once)."""
    return live_canvas(f"{prefix}-relevance", prefix, "relevance", "class-specific relevance", ask=ask,
                       predicted=PREDICTED_CHOICE)


def build_faithfulness(prefix: str) -> tuple[gr.Button, gr.Image, gr.Markdown]:
    """A column: how far to trust each map for this image."""
    gr.Markdown("### How far to trust each map\nRank the patches by a map, then remove (or add back) the top "
                "10%, 20%, ...: the faster the prediction falls (or returns), the more faithful the map. A random "
                "ranking is the floor.")
    score = gr.Button("Score the maps", elem_id=f"{prefix}-score", size="sm")
    note = gr.Markdown(SCORE_PROMPT, elem_id=f"{prefix}-faithfulness-note")
    return score, view_image(f"{prefix}-faithfulness", format="png", buttons=VIEW_BUTTONS, visible=False), note
