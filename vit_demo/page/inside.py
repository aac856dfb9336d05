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
    """What one model has learnt inside, as pictures (None: a chart the weights have no record for) and the numbers
    page.html words their notes with."""

    filters: Image.Image
    filters_shown: int  # how many of the patch filters' principal components are shown...
    filters_share: float  # ...and the share of the filters' variance they explain together
    similarity: np.ndarray  # (g, g, g, g) cosine similarity of the patches' position embeddings
    distance: Image.Image | None
    reliability: Image.Image | None
    calibration: dict | None  # calibration.json, and the temperature (``temperature``)
    importance: Image.Image | None
    heads: dict | None  # head_importance.json, and where its curves differ most (``widest``: heads off)


def insides(model: str) -> Insides:
    clf = classifier(model)
    components, share = inside.embedding_components(clf.model, FILTERS)  # (K, C, p, p), (K,)
    distance = inside.read_attention_distance(clf.info.folder)  # (L, H) pixels, or None
    report, record = calibration_report(model), heads.read_head_importance(clf.info.folder)
    if record is not None:  # heads off where the importance order and random ones differ most
        ranked, random = record["curves"]["importance"], record["curves"]["random"]
        record = {**record, "widest": max(range(len(ranked)), key=lambda n: random[n] - ranked[n])}
    return Insides(
        render.filter_components(components, share), len(components), float(share.sum()),
        inside.position_similarity(clf.model),
        None if distance is None else figures.attention_distance_plot(distance),
        None if report is None else figures.reliability_diagram(report["before"], report["after"], clf.temperature),
        None if report is None else {**report, "temperature": clf.temperature},
        None if record is None else figures.head_importance_plot(record), record)


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
        "start": (g // 2) * g + g // 2, "pictures": sorted(made)}  # (start: the centre patch)
