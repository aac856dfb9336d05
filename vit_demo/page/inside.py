"""The Inside-the-model tab's pictures (Dosovitskiy et al., 2021, Fig. 7, for our own weights): the patch-embedding
filters' principal components, how alike the position embeddings are, how far each head looks, which heads matter
(Michel et al., 2019), and how far to trust its probabilities (the reliability diagram of its calibration).

They depend on the weights alone, so they are made once and written as files beside the page (``write_insides``);
the attention distance and the heads' importance were computed over test images when the weights were made
(``attention_distance.json``, ``head_importance.json``): the page has no dataset.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from PIL import Image

from vit_demo.app.service import calibration_report, classifier
from vit_demo.interpret import heads, inside
from vit_demo.page.layout import LARGE
from vit_demo.pictures import figures, render

FILTERS = 28  # principal components shown, as in the ViT paper
POSITION_CELL = 56  # pixels a side of each small map in the position-similarity grid


@dataclasses.dataclass(frozen=True)
class Insides:
    """What one model has learnt inside, as pictures (None: a chart the weights have no record for) and notes."""

    filters: Image.Image
    filters_note: str
    similarity: np.ndarray  # (g, g, g, g) cosine similarity of the patches' position embeddings
    distance: Image.Image | None
    distance_note: str
    reliability: Image.Image | None
    reliability_note: str
    importance: Image.Image | None
    importance_note: str


def insides(model: str) -> Insides:
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


def write_insides(model: str, folder: Path) -> tuple[Insides, dict]:
    """Write a model's pictures into ``folder``: the charts, the position grid with no cell outlined, and every
    patch's large position map (g x g of them in one picture, in patch order). Return the insides and the page's data
    of the position grid: each cell's box, as shares of the grid picture's width and height (left, top, right,
    bottom), each patch's caption, the patch shown first, and the pictures written."""
    found = insides(model)
    g = found.similarity.shape[0]
    grid = render.position_similarity_grid(found.similarity, POSITION_CELL)
    maps = [render.position_similarity_large(found.similarity, patch, LARGE) for patch in range(g * g)]
    width, height = maps[0].size
    every_map = Image.new("RGB", (g * width, g * height))
    for patch, image in enumerate(maps):
        every_map.paste(image, ((patch % g) * width, (patch // g) * height))
    made = {name: image for name, image in (("filters", found.filters), ("distance", found.distance),
                                            ("positions", grid), ("position", every_map),
                                            ("reliability", found.reliability), ("importance", found.importance))
            if image is not None}
    folder.mkdir(parents=True, exist_ok=True)
    for name, image in made.items():
        image.save(folder / f"{name}.png", optimize=True)
    boxes = [render.position_cell_box(patch, g, POSITION_CELL) for patch in range(g * g)]
    return found, {
        "grid": g, "size": [width, height],
        "boxes": [[round(x / share, 6) for x, share in zip(box, (grid.width, grid.height) * 2)] for box in boxes],
        "captions": [position_caption(patch, g) for patch in range(g * g)],
        "start": centre_patch(g), "pictures": sorted(made)}
