"""Why this class and not that one (class-specific relevance, for any class), and how far to trust each map for
the image in hand (its deletion and insertion curves)."""

from __future__ import annotations

import dataclasses

import gradio as gr
import numpy as np
from PIL import Image

from vit_demo import figures, live_view, render
from vit_demo.faithfulness import RANDOM_RANKINGS, Verdict, faithfulness, verdict
from vit_demo.ui.components import LARGE, VIEW_BUTTONS, live_canvas, view_image
from vit_demo.ui.models import Analysis, classifier
from vit_demo.ui.serving import PRIVATE

PREDICTED_CHOICE = "the predicted class"  # the class picker's default
SCORE_PROMPT = ("Press **Score the maps** to see, for this image, how fast each map's most relevant patches take "
                "the prediction away (deletion) or bring it back (insertion).")


def explain_label(choice: str | None) -> str | None:
    """The class picker's choice -> the class to explain (None: the predicted one)."""
    return None if choice in (None, "", PREDICTED_CHOICE) else choice


def relevance_map(analysis: Analysis, label: str | None) -> np.ndarray:
    """The relevance of ``label`` (None: the predicted class) for the analysed image, (g, g): the one computed with
    the prediction when it is that class, else one more forward and backward pass."""
    label = label or analysis.label
    if label == analysis.relevance_label:
        return analysis.relevance
    return classifier(analysis.model).relevance_preprocessed([analysis.input], [label])[0]


def relevance_title(analysis: Analysis | None, label: str | None) -> str:
    if analysis is None:
        return "### Why this class?"
    label = label or analysis.label
    share = f"{100 * analysis.probs[label]:.1f}%"
    if label == analysis.label:
        return (f"### Why {label}?\nThe patches whose attention pushed the model towards **{label}**, its answer "
                f"({share}): class-specific relevance (Chefer et al., 2021).")
    return (f"### Why not {label}?\nThe patches that speak for **{label}** ({share}); the model says "
            f"**{analysis.label}**. Class-specific relevance (Chefer et al., 2021).")


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


@dataclasses.dataclass
class ExplanationView:
    explain_class: gr.Dropdown
    relevance: gr.HTML  # drawn in the page from the map's numbers (live_view.map_payload)
    relevance_note: gr.Markdown
    score: gr.Button
    faithfulness: gr.Image
    faithfulness_note: gr.Markdown
    api_relevance: gr.Image  # hidden: the relevance as a picture, in the API's answer

    @property
    def outputs(self) -> list:
        """The outputs a new image updates, in the order of ``views``."""
        return [self.relevance, self.relevance_note, self.faithfulness, self.faithfulness_note]

    @property
    def api_outputs(self) -> list:
        """The relevance as a picture, and its note: what the API answers (``views`` with ``live=False``)."""
        return [self.api_relevance, self.relevance_note]

    @staticmethod
    def views(analysis: Analysis | None, live: bool = True) -> tuple:
        """An image's relevance view, for the class it was analysed for (None: nothing), as the numbers the page
        draws it from (``live``) or as a picture (for the API); the faithfulness chart waits for the button (it
        takes some 240 more forward passes)."""
        if analysis is None:
            return "" if live else None, relevance_title(None, None), None, SCORE_PROMPT
        relevance = (live_view.map_payload(analysis.relevance) if live
                     else render.overlay(analysis.input, analysis.relevance, LARGE))
        return relevance, relevance_title(analysis, analysis.relevance_label), None, SCORE_PROMPT

    def wire(self, state: gr.State) -> None:
        self.explain_class.change(on_explain_class, [state, self.explain_class], [self.relevance, self.relevance_note],
                                  **PRIVATE)
        self.score.click(on_score, state, [self.faithfulness, self.faithfulness_note],
                         **{**PRIVATE, "show_progress": "minimal"})


def on_explain_class(analysis: Analysis | None, choice: str) -> tuple:
    if analysis is None:
        return "", relevance_title(None, None)
    label = explain_label(choice)
    return live_view.map_payload(relevance_map(analysis, label)), relevance_title(analysis, label)


def on_score(analysis: Analysis | None) -> tuple:
    if analysis is None:
        return None, "Draw or upload an image first: the maps are scored for the image in hand."
    return score_maps(analysis)


def build_relevance(prefix: str, classes: tuple[str, ...]) -> tuple[gr.Dropdown, gr.HTML, gr.Markdown]:
    """A column: the relevance view (drawn in the page), with the picker of the class to explain."""
    note = gr.Markdown(relevance_title(None, None), elem_id=f"{prefix}-relevance-note")
    explain_class = gr.Dropdown([PREDICTED_CHOICE, *classes], value=PREDICTED_CHOICE, label="Explain the class",
                                elem_id=f"{prefix}-explain-class")
    return explain_class, live_canvas(f"{prefix}-relevance", prefix, "map", "class-specific relevance"), note


def build_faithfulness(prefix: str) -> tuple[gr.Button, gr.Image, gr.Markdown]:
    """A column: how far to trust each map for this image."""
    gr.Markdown("### How far to trust each map\nRank the patches by a map, then remove (or add back) the top "
                "10%, 20%, ...: the faster the prediction falls (or returns), the more faithful the map. A random "
                "ranking is the floor.")
    score = gr.Button("Score the maps", elem_id=f"{prefix}-score", size="sm")
    note = gr.Markdown(SCORE_PROMPT, elem_id=f"{prefix}-faithfulness-note")
    return score, view_image(f"{prefix}-faithfulness", format="png", buttons=VIEW_BUTTONS), note
