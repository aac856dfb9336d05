"""The inside-the-model tab (Dosovitskiy et al., 2021, Fig. 7, for our own weights): the patch-embedding
filters' principal components, how alike the position embeddings are, how far each head looks, which heads matter
(Michel et al., 2019), and how far to trust its probabilities (the reliability diagram of its calibration).

Each picture is made once per model, on first view, and kept; the attention distance and the heads' importance were
computed over test images when the weights were made (``attention_distance.json``, ``head_importance.json``),
never per request: the app has no dataset.
"""

from __future__ import annotations

import dataclasses
import functools

import gradio as gr
import numpy as np
from PIL import Image

from vit_demo.app.components import LARGE, VIEW_BUTTONS, view_image
from vit_demo.app.service import calibration_report, classifier, model_problem
from vit_demo.app.serving import PRIVATE
from vit_demo.app.zerogpu import model_work
from vit_demo.interpret import heads, inside
from vit_demo.pictures import figures, render

LABEL = "Inside the model"
MODELS = {"Digits (MNIST)": "mnist", "Photos (CIFAR-10)": "cifar10"}
# The tab's titles and texts, in the app's markdown (the static page writes them too: vit_demo/deploy/static_space.py).
INTRO = ("### What the model has learnt inside\nAs in the ViT paper's Figure 7 (Dosovitskiy et al., 2021), for the "
         "weights this app runs.")
FILTERS_TITLE = "### Patch-embedding filters"
DISTANCE_TITLE = "### How far each head looks"
POSITIONS_TITLE = ("### Position embeddings\nCell (row, column): that patch's similarity to every patch. Nearby "
                   "patches learn alike embeddings: the model learns the image's 2-D layout.")
RELIABILITY_TITLE = "### How far to trust its probabilities"
IMPORTANCE_TITLE = "### Which heads matter"
FILTERS = 28  # principal components shown, as in the ViT paper
POSITION_CELL = 56  # pixels a side of each small map in the position-similarity grid


@dataclasses.dataclass(frozen=True)
class Insides:
    """What one model has learnt inside, as pictures."""

    filters: Image.Image
    filters_note: str
    similarity: np.ndarray  # (g, g, g, g) cosine similarity of the patches' position embeddings
    distance: Image.Image | None
    distance_note: str
    reliability: Image.Image | None
    reliability_note: str
    importance: Image.Image | None
    importance_note: str


@functools.cache
@model_work
def insides(model: str) -> Insides:
    """A model's insides, made on first view and kept for the life of the process."""
    clf = classifier(model)
    components, share = inside.embedding_components(clf.model, FILTERS)  # (K, C, p, p), (K,)
    config = clf.info.config
    filters_note = (f"Each of the {config.dim} filters of the patch projection weighs a patch's "
                    f"{config.in_channels * config.patch_size**2} pixel values; these are their top "
                    f"{len(components)} principal components, with the share of the filters' variance each explains "
                    f"(the top {len(components)} together: {100 * share.sum():.0f}%).")
    distance = inside.read_attention_distance(clf.info.folder)  # (L, H) pixels, or None
    if distance is None:
        distance_note = "How far each head looks has not been measured for this model's weights yet."
    else:
        distance_note = (f"For each head: how far, in pixels, a patch looks on average (the distance between patch "
                         f"centres weighted by attention, over test images; [CLS] left out). The image is "
                         f"{config.image_size} pixels wide: low heads look near, high ones across the image.")
    return Insides(render.filter_components(components, share), filters_note, inside.position_similarity(clf.model),
                   None if distance is None else figures.attention_distance_plot(distance), distance_note,
                   *reliability_views(model), *importance_views(model))


def importance_views(model: str) -> tuple[Image.Image | None, str]:
    """Which heads matter: their importance beside the pruning curves that test it, and what it says (None and why,
    for weights never measured)."""
    record = heads.read_head_importance(classifier(model).info.folder)
    if record is None:
        return None, "Which heads matter has not been measured for this model's weights yet."
    ranked, random = record["curves"]["importance"], record["curves"]["random"]
    widest = max(range(len(ranked)), key=lambda n: random[n] - ranked[n])  # heads off where the curves differ most
    gap = (f" With the {widest} most important heads off the accuracy is **{100 * ranked[widest]:.0f}%**; with "
           f"{widest} picked at random, {100 * random[widest]:.0f}%." if random[widest] - ranked[widest] > 0.01
           else " Here the importance order does no better than random orders.")
    note = (f"Each head's **importance** is how much the loss moves when its output is scaled (the mean |d loss / d "
            f"gate| of a gate on it, over {record['images']} {record['split']} images; Michel et al., 2019). The "
            f"test of the score: switch heads off cumulatively ({record['ablation']}-ablation), most important "
            f"first, against random orders. Accuracy with every head on: **{100 * record['baseline']:.1f}%**.{gap} "
            "Try it on one image with *Switch heads off* in the other tabs.")
    return figures.head_importance_plot(record), note


def reliability_views(model: str) -> tuple[Image.Image | None, str]:
    """How far to trust the model's probabilities: its reliability diagram before and after calibration, and
    what it says (None and how to fit it, for weights never calibrated)."""
    clf = classifier(model)
    report = calibration_report(model)
    if report is None:
        return None, "How far to trust this model's probabilities has not been measured for its weights yet."
    before, after = report["before"], report["after"]
    note = (f"How often the model is right when it says a given probability, on {report['measured_on']}. Its "
            f"logits are divided by a temperature of **{clf.temperature:.2f}** before the softmax (Guo et al., 2017; "
            f"under 1 sharpens, over 1 softens), fitted on {report['fitted_on']}. Expected calibration error **{100 * before['ece']:.1f}% → "
            f"{100 * after['ece']:.1f}%**, negative log-likelihood {before['nll']:.3f} → {after['nll']:.3f}; the "
            f"accuracy stays {100 * after['accuracy_overall']:.2f}%. Where the bars meet the diagonal, a probability "
            "means what it says.")
    return figures.reliability_diagram(before, after, clf.temperature), note


def centre_patch(grid: int) -> int:
    """The patch the position views start with: the grid's centre (row-major index)."""
    return (grid // 2) * grid + grid // 2


def position_caption(patch: int, grid: int) -> str:
    row, col = divmod(patch, grid)
    return (f"Patch {patch} (row {row + 1}, column {col + 1}): how alike its position embedding is to every patch's "
            "(cosine similarity, -1 to 1). Click another patch in the grid.")


def position_grid(similarity: np.ndarray, selected: int | None = None) -> Image.Image:
    """The position-similarity grid (``similarity``: (g, g, g, g)), ``selected`` outlined."""
    return render.position_similarity_grid(similarity, POSITION_CELL, selected=selected)


def position_map(similarity: np.ndarray, patch: int) -> Image.Image:
    """One patch's position similarity to every patch, large."""
    return render.position_similarity_large(similarity, patch, LARGE)


def position_views(model: str, patch: int) -> tuple[Image.Image, Image.Image, str]:
    """The similarity grid with ``patch`` outlined, that patch's own map large, and its caption."""
    similarity = insides(model).similarity
    return (position_grid(similarity, patch), position_map(similarity, patch),
            position_caption(patch, similarity.shape[0]))


def inside_views(choice: str) -> tuple:
    """Every output of the tab for the chosen model, in the order of ``InsideTab.outputs``."""
    model = MODELS[choice]
    problem = model_problem(model)
    if problem:
        return None, problem, None, None, "", None, "", None, "", None, ""
    found = insides(model)
    return (found.filters, found.filters_note, *position_views(model, centre_patch(found.similarity.shape[0])),
            found.distance, found.distance_note, found.reliability, found.reliability_note, found.importance,
            found.importance_note)


@dataclasses.dataclass
class InsideTab:
    model: gr.Radio
    filters: gr.Image
    filters_note: gr.Markdown
    positions: gr.Image
    position: gr.Image
    position_note: gr.Markdown
    distance: gr.Image
    distance_note: gr.Markdown
    reliability: gr.Image
    reliability_note: gr.Markdown
    importance: gr.Image
    importance_note: gr.Markdown

    @property
    def outputs(self) -> list:
        return [self.filters, self.filters_note, self.positions, self.position, self.position_note, self.distance,
                self.distance_note, self.reliability, self.reliability_note, self.importance, self.importance_note]

    def wire(self, tab: gr.Tab) -> None:
        tab.select(inside_views, self.model, self.outputs, **PRIVATE)
        self.model.change(inside_views, self.model, self.outputs, **PRIVATE)
        self.positions.select(on_position_click, self.model, [self.positions, self.position, self.position_note],
                              **PRIVATE)


def on_position_click(choice: str, event: gr.SelectData) -> tuple:
    model = MODELS[choice]
    if model_problem(model):
        return None, None, ""
    patch = render.position_cell_at(*event.index, insides(model).similarity.shape[0], POSITION_CELL)
    if patch is None:  # a click between the cells
        return gr.skip(), gr.skip(), gr.skip()
    return position_views(model, patch)


def chart_row(title: str, name: str) -> tuple[gr.Image, gr.Markdown]:
    """A row: a chart under its ``title`` (``#inside-NAME``), and the note that says what it shows beside it."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            gr.Markdown(title)
            chart = view_image(f"inside-{name}", format="png", buttons=VIEW_BUTTONS)
        with gr.Column(scale=2, min_width=300):
            note = gr.Markdown(elem_id=f"inside-{name}-note", elem_classes="vd-note")
    return chart, note


def build_inside_tab(tab: gr.Tab) -> InsideTab:
    gr.Markdown(INTRO)
    model = gr.Radio(list(MODELS), value=next(iter(MODELS)), label="Model", elem_id="inside-model")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            gr.Markdown(FILTERS_TITLE)
            filters = view_image("inside-filters", format="png", buttons=VIEW_BUTTONS)
            filters_note = gr.Markdown(elem_classes="vd-note")
        with gr.Column(scale=1, min_width=300):
            gr.Markdown(DISTANCE_TITLE)
            distance = view_image("inside-distance", format="png", buttons=VIEW_BUTTONS)
            distance_note = gr.Markdown(elem_classes="vd-note")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            gr.Markdown(POSITIONS_TITLE)
            positions = view_image("inside-positions", format="png", buttons=VIEW_BUTTONS)
        with gr.Column(scale=2, min_width=300):
            position_note = gr.Markdown(elem_id="inside-position-note")
            position = view_image("inside-position", format="png", buttons=VIEW_BUTTONS)
    reliability, reliability_note = chart_row(RELIABILITY_TITLE, "reliability")
    importance, importance_note = chart_row(IMPORTANCE_TITLE, "importance")
    inside_tab = InsideTab(model, filters, filters_note, positions, position, position_note, distance, distance_note,
                           reliability, reliability_note, importance, importance_note)
    inside_tab.wire(tab)
    return inside_tab
