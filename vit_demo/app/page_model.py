"""The model in the page: what the browser needs to run a tab's model itself (assets/page/source.js).

A tab's description holds the model's shape, classes, calibration and unfamiliar rule, the addresses of its exported
graphs (vit_demo/onnx/export.py) and its snapshots', and the captions the server would write, as templates with
{fields} that the page fills in (the same templates the server fills). The app hands it to its canvas (graphs served
from the weights folders), the static Space writes it into its page (graphs copied beside it): both then classify
in the browser, and ask the server only for what the page can't do.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

from vit_demo.app import page_numbers, training_view
from vit_demo.app.components import ASSETS, LARGE, served
from vit_demo.app.explanation_view import VERDICT_TEXTS
from vit_demo.app.page_numbers import (INFO_TEXT, KNOCKOUT_TEXT, READING_TEXT, RELEVANCE_WHY, RELEVANCE_WHY_NOT,
                                      UNREADABLE_TEXT, query_title, unfamiliar_text)
from vit_demo.app.service import classifier, model_config, training_run, weights_folder
from vit_demo.interpret.faithfulness import FLAT, RANDOM_RANKINGS, STEPS
from vit_demo.onnx.export import GRAPH_FILE, PATCHING_GRAPH_FILES, RELEVANCE_GRAPH_FILE, expected_metadata, stale_graphs
from vit_demo.pictures import render

SOURCE = ASSETS / "page" / "source.js"  # the page's model: the module the app's canvas imports
SERVED = (ASSETS / "page", ASSETS / "vendor")  # what the app serves for it, with the weights folders


class GraphsMissing(ValueError):
    """A model's graphs are missing or older than its weights; the message says how to make them."""


def graph_files(model: str) -> tuple[Path, Path, list[Path]]:
    """A model's exported graph, its relevance graph and its snapshots' (oldest first), checked to exist and to match
    its weights."""
    folder = weights_folder(model)
    stale = stale_graphs(folder)
    if stale:
        raise GraphsMissing(f"The {model} graphs are missing or older than the weights ({', '.join(stale)}): make "
                            f"them with `python -m vit_demo onnx --model {model}`.")
    trained = (GRAPH_FILE, RELEVANCE_GRAPH_FILE, *PATCHING_GRAPH_FILES.values())
    snapshots = [folder / name for name in expected_metadata(folder) if name not in trained]
    return folder / GRAPH_FILE, folder / RELEVANCE_GRAPH_FILE, snapshots


def patching_files(model: str) -> dict[str, Path]:
    """A model's patching graphs (vit_demo/onnx/patching.py), {"heads": path, "residual": path}, checked as
    ``graph_files`` checks them."""
    folder = graph_files(model)[0].parent
    return {kind: folder / name for kind, name in PATCHING_GRAPH_FILES.items()}


def description(model: str, prompt: str, blank: str, address: Callable[[Path], str]) -> dict:
    """What the page's model needs to know of ``model``: its shape, classes, calibration, graphs (at ``address(path)``:
    where the page finds a graph file) and the captions the server would write (``prompt``: the tab's; ``blank``:
    what it says of a blank image)."""
    config, clf, run = model_config(model), classifier(model), training_run(model)
    rule = clf.info.unfamiliar
    graph, relevance, snapshots = graph_files(model)
    return {
        "name": model, "classes": list(clf.classes), "temperature": clf.temperature,
        "unfamiliar": rule.to_dict() if rule else None,
        "height": config.image_size, "width": config.image_size, "channels": config.in_channels,
        "layers": config.depth, "heads": config.heads, "tokens": config.num_tokens, "grid": config.grid_size,
        "large": LARGE, "alpha": render.HEAT_ALPHA,
        "colormap": base64.b64encode(render.colormap(render.HEAT).astype("uint8").tobytes()).decode(),
        "graph": address(graph), "relevance": address(relevance),
        "patching": {kind: address(path) for kind, path in patching_files(model).items()},  # loaded when asked
        "snapshots": [{"graph": address(path), "note": page_numbers.caption_html(
                           training_view.snapshot_note(run, i + 1, "{label}", "{percent}"))}
                      for i, path in enumerate(snapshots)],
        "texts": {key: page_numbers.caption_html(text) for key, text in {
            "prompt": prompt, "blank": blank, "notice": unfamiliar_text(model),
            "unreadable": UNREADABLE_TEXT, "query": query_title("{patch}"),
            "info": INFO_TEXT.format(label="{label}", percent="{percent}", ms="{ms}", where="in this page"),
            "reading": READING_TEXT, "knockout": KNOCKOUT_TEXT, "why": RELEVANCE_WHY, "why_not": RELEVANCE_WHY_NOT,
            **{f"verdict_{name}": text for name, text in VERDICT_TEXTS.items()},
        }.items()},
        "faithfulness": {"steps": STEPS, "rankings": RANDOM_RANKINGS, "flat": FLAT},  # faithfulness.py's protocol
    }


def app_description(model: str, prompt: str, blank: str) -> dict | None:
    """What the app's page needs to run ``model`` itself ({"source": the module, "model": its ``description``}), or
    None where its graphs are missing: then the page asks the server for everything, as before."""
    try:
        return {"source": served(SOURCE), "model": description(model, prompt, blank, served)}
    except (GraphsMissing, OSError, ValueError) as exc:
        print(f"{model} runs on the server alone: {exc}")
        return None


def served_paths(models: list[str]) -> list[Path]:
    """What the app must let the page load: the page's modules, the runtime, and the ``models``' weights folders."""
    return [*SERVED, *(weights_folder(model) for model in models)]
