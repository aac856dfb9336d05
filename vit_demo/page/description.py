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

from vit_demo.app.service import classifier, model_config, training_run, weights_folder
from vit_demo.interpret.faithfulness import FLAT, RANDOM_RANKINGS, STEPS, VERDICT_TEXTS
from vit_demo.onnx.export import (GRAPH_FILE, GRAPH_WEIGHTS_FILE, LENS_GRAPH_FILE, PATCHING_GRAPH_FILES,
                                  RELEVANCE_GRAPH_FILE, lens_apart, shared_graphs, snapshot_graph, stale_graphs)
from vit_demo.onnx.patching import patching_kinds
from vit_demo.page.captions import TEXTS, caption_html, image_text, unfamiliar_text
from vit_demo.page.layout import LARGE
from vit_demo.pictures import render
from vit_demo.unfamiliar_rule import FEATURE_SCORES, UnfamiliarRule
from vit_demo.weights import CONFIG_FILE

# Multiply-adds an image (depth x block_macs) beyond which the app reads the model on its server, quicker there
# (docs/import.md, a photo to every view: ViT-S's 4.5e9 496 ms in the page, 549 there; ViT-B's 1.7e10 1,501 and 1,146).
SERVER_FIRST_MACS = 1e10
# ... and beyond which the page reads it on WebGPU where the browser offers a GPU (model.js: choose): an imported ViT at
# 224 pixels (ViT-Ti's 1.2e9), not the shipped models (1.9e8 the photos), whose first answer would wait for WebGPU's
# larger runtime (6.6 MB where WebAssembly's is 3.7).
GPU_FIRST_MACS = 1e9


def page_rule(rule: UnfamiliarRule | None) -> dict | None:
    """The unfamiliar rule as the page gets it: whole where it reads the logits alone; where it reads the features,
    its score and the file of the weights folder that holds it (``config.json``), which the page fetches with the
    model's graphs: its arrays (0.3 MB of the photo model's read-out) would otherwise come with every page."""
    if rule is None or rule.score not in FEATURE_SCORES:
        return rule and rule.to_dict()
    return {"score": rule.score, "file": CONFIG_FILE}


def description(model: str, prompt: str, blank: str, folder: str, example: Path | None = None) -> dict:
    """What the page needs to know of ``model``: its shape, classes, calibration, the address of its weights folder
    (``folder``, ending in "/") and its graphs' names there, whether the page can run them (``pageGraphs``: they
    exist and match the weights), the pixels of the ``example`` the tab starts with, and the captions the page fills
    in (``prompt``: the tab's; ``blank``: what it says of a blank image)."""
    config, clf, run = model_config(model), classifier(model), training_run(model)
    macs = config.depth * config.block_macs  # multiply-adds an image
    epochs = f" of {run.epochs}" if run.epochs else ""  # (in the snapshots' notes)
    return {
        "name": model, "classes": list(clf.classes), "temperature": clf.temperature,
        "unfamiliar": page_rule(clf.info.unfamiliar),
        "preprocessing": clf.info.preprocessing.to_dict(),  # what source.js does to a photo (or a drawing)
        "height": config.image_size, "width": config.image_size, "channels": config.in_channels,
        "layers": config.depth, "heads": config.heads, "tokens": config.num_tokens, "grid": config.grid_size,
        "prefix": config.prefix_tokens, "distilled": config.distillation_token,  # the tokens before the patches
        "large": LARGE, "alpha": render.HEAT_ALPHA,
        "colormap": base64.b64encode(render.colormap(render.HEAT).astype("uint8").tobytes()).decode(),
        "folder": folder, "pageGraphs": not stale_graphs(weights_folder(model)),
        "serverFirst": macs > SERVER_FIRST_MACS,  # (where there is a server)
        "gpu": macs > GPU_FIRST_MACS,  # (where the browser offers one)
        "graph": GRAPH_FILE, "relevance": RELEVANCE_GRAPH_FILE,
        "lens": LENS_GRAPH_FILE if lens_apart(config) else GRAPH_FILE,  # the graph with the lens output
        "patching": {kind: PATCHING_GRAPH_FILES[kind] for kind in patching_kinds(config)},  # loaded when asked
        "shared": {"file": GRAPH_WEIGHTS_FILE, "graphs": list(shared_graphs(config))},  # their weights, fetched once
        "snapshots": [{"graph": snapshot_graph(s.epoch), "note": caption_html(  # the page fills in label, percent
            f"**Epoch {s.epoch}{epochs}**: test accuracy then **{100 * s.test_accuracy:.2f}%**. For this image it said "
            "**{label}** ({percent}%).")} for s in run.snapshots],
        "example": None if example is None else image_text(clf.preprocess(example)),
        "texts": {key: caption_html(text) for key, text in {
            "prompt": prompt, "blank": blank, "notice": unfamiliar_text(model), **TEXTS,
            **{f"verdict_{name}": text for name, text in VERDICT_TEXTS.items()}}.items()},
        "faithfulness": {"steps": STEPS, "rankings": RANDOM_RANKINGS, "flat": FLAT},  # faithfulness.py's protocol
    }
