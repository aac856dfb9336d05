"""What the page needs to run a tab's model (assets/page/source.js, model.js): the model's description.

It holds the model's shape, classes, calibration and unfamiliar rule, the address of its weights folder and the
names of its exported graphs there (vit_demo/onnx/export.py) and its snapshots', the example the tab starts with (its
8-bit pixels), and the captions, as templates with {fields} that the page fills in with its own numbers. The page's
data holds one per tab (site.py): the static Space's graphs are copied beside the page, the app's served from the
weights folders (where they are missing or stale, the page runs the model on the server: vit_demo/app/forward.py).
"""

from __future__ import annotations

import base64
from pathlib import Path

from vit_demo.page.captions import (EXAMPLE_TEXT, GUESS_TEXT, INFO_TEXT, KNOCKOUT_TEXT, READING_TEXT, RELEVANCE_WHY,
                                    RELEVANCE_WHY_NOT, UNREADABLE_TEXT, caption_html, image_text,
                                    QUERY_TEXT, snapshot_note, unfamiliar_text)
from vit_demo.page.layout import LARGE
from vit_demo.app.service import classifier, model_config, training_run, weights_folder
from vit_demo.interpret.faithfulness import FLAT, RANDOM_RANKINGS, STEPS, VERDICT_TEXTS
from vit_demo.onnx.export import (GRAPH_FILE, GRAPH_WEIGHTS_FILE, LENS_GRAPH_FILE, PATCHING_GRAPH_FILES,
                                  RELEVANCE_GRAPH_FILE, expected_metadata, lens_apart, shared_graphs, stale_graphs)
from vit_demo.onnx.patching import patching_kinds
from vit_demo.pictures import render


def snapshot_graphs(model: str) -> list[str]:
    """The names of a model's snapshots' graphs in its weights folder, oldest first."""
    shared = shared_graphs(model_config(model))
    return [name for name in expected_metadata(weights_folder(model)) if name not in shared]


def description(model: str, prompt: str, blank: str, folder: str, example: Path | None = None) -> dict:
    """What the page needs to know of ``model``: its shape, classes, calibration, the address of its weights folder
    (``folder``, ending in "/") and its graphs' names there, whether the page can run them (``pageGraphs``: they
    exist and match the weights), the pixels of the ``example`` the tab starts with, and the captions the page fills
    in (``prompt``: the tab's; ``blank``: what it says of a blank image)."""
    config, clf, run = model_config(model), classifier(model), training_run(model)
    rule = clf.info.unfamiliar
    return {
        "name": model, "classes": list(clf.classes), "temperature": clf.temperature,
        "unfamiliar": rule.to_dict() if rule else None,
        "preprocessing": clf.info.preprocessing.to_dict(),  # what source.js does to a photo (or a drawing)
        "height": config.image_size, "width": config.image_size, "channels": config.in_channels,
        "layers": config.depth, "heads": config.heads, "tokens": config.num_tokens, "grid": config.grid_size,
        "prefix": config.prefix_tokens, "distilled": config.distillation_token,  # the tokens before the patches
        "large": LARGE, "alpha": render.HEAT_ALPHA,
        "colormap": base64.b64encode(render.colormap(render.HEAT).astype("uint8").tobytes()).decode(),
        "folder": folder, "pageGraphs": not stale_graphs(weights_folder(model)),
        "graph": GRAPH_FILE, "relevance": RELEVANCE_GRAPH_FILE,
        "lens": LENS_GRAPH_FILE if lens_apart(config) else GRAPH_FILE,  # the graph with the lens output
        "patching": {kind: PATCHING_GRAPH_FILES[kind] for kind in patching_kinds(config)},  # loaded when asked
        "shared": {"file": GRAPH_WEIGHTS_FILE, "graphs": list(shared_graphs(config))},  # their weights, fetched once
        "snapshots": [{"graph": name, "note": caption_html(
                           snapshot_note(run, i + 1, "{label}", "{percent}"))}
                      for i, name in enumerate(snapshot_graphs(model))],
        "example": None if example is None else image_text(clf.preprocess(example)),
        "texts": {key: caption_html(text) for key, text in {
            "prompt": prompt, "blank": blank, "notice": unfamiliar_text(model),
            "unreadable": UNREADABLE_TEXT, "query": QUERY_TEXT,
            "info": INFO_TEXT, "guess": GUESS_TEXT, "example": EXAMPLE_TEXT,
            "reading": READING_TEXT, "knockout": KNOCKOUT_TEXT, "why": RELEVANCE_WHY, "why_not": RELEVANCE_WHY_NOT,
            **{f"verdict_{name}": text for name, text in VERDICT_TEXTS.items()},
        }.items()},
        "faithfulness": {"steps": STEPS, "rankings": RANDOM_RANKINGS, "flat": FLAT},  # faithfulness.py's protocol
    }
