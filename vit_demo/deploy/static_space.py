"""``python -m vit_demo static DIR``: the app's page as a static Hugging Face Space (``sdk: static``), the model run in
the visitor's browser.

Since 2026 a free account can host static Spaces only (docs/spaces.md). This folder needs no server of ours: the page
runs the exported graphs (vit_demo/onnx/export.py) with the vendored onnxruntime-web (WebAssembly) and preprocesses
drawings and photos as data/preprocess.py does (assets/page/preprocess.js). Its views are the app's own: the same
templates and scripts as the Gradio components (assets/page/live.js, assets/canvas.js), mounted by
assets/page/static.js as Gradio mounts a ``gr.HTML``, their numbers made by the same source (assets/page/source.js)
from the same graphs, run in the page. The canvas is ``canvas.vd-draw``, the top class ``#digit-label .vd-top-class``, as in the
app. What needs the Python server (export for slides) is named on the page, with where to find it.

The folder holds index.html, the page's JS and CSS, the graphs of both models (and their training snapshots'), the
Inside-the-model tab's pictures (made by the app's own functions, vit_demo/app/inside_tab.py, since they depend on
the weights alone), sw.js (the service worker: once the page has answered its first image it keeps every file of the
site in the browser, so that it reloads and runs with the network gone), README.md with the Space's front matter,
and a .gitattributes that puts every binary through LFS/Xet.
Publish it with ``hf upload USER/NAME DIR --repo-type space``.
"""

from __future__ import annotations

import dataclasses
import html
import json
import shutil
from pathlib import Path

from PIL import Image

from vit_demo.app import (attention_view, digit_tab, explanation_view, heads_view, inside_tab, page_model, photo_tab,
                          training_view)
from vit_demo.app.canvas import pad_html
from vit_demo.app.captions import caption_html, query_title, relevance_title
from vit_demo.app.components import ASSETS, live_canvas, live_prediction
from vit_demo.app.demo import INTRO, KEYS_LINE, TALK_FROM_ADDRESS, TALK_KEYS, TALK_TOGGLE
from vit_demo.app.panel import ANSWER_TITLE, deeper_links
from vit_demo.app.service import classifier, model_config, model_problem, training_run, weights_folder
from vit_demo.deploy.space import README, REPO, accuracy_note, needs_lfs, replace_folder, write_gitattributes
from vit_demo.pictures import render
from vit_demo.weights import WeightsError

MARKER = "<!-- Written by `python -m vit_demo static`: running it again rewrites this folder. -->"
SHORT_DESCRIPTION = "Draw a digit: a ViT in your browser shows where it looks"  # the Hub takes 60 characters
PAGE = "index.html"
EXAMPLES = REPO / "examples"


@dataclasses.dataclass(frozen=True)
class Tab:
    """One of the page's tabs, as the app has it (vit_demo/app/digit_tab.py, photo_tab.py)."""

    prefix: str  # in its views' element ids, as the app's
    label: str  # its button's
    model: str
    input_title: str  # its first step's title and sentence
    prompt: str  # what it says until there is an image
    blank: str  # what it says of a blank image
    first_example: str  # the example it starts with
    examples: str  # the folder of examples/ it offers


TABS = (Tab("digit", digit_tab.LABEL, digit_tab.MODEL, digit_tab.INPUT_TITLE, digit_tab.DRAW_PROMPT,
            digit_tab.DRAW_PROMPT, digit_tab.FIRST_EXAMPLE, "digits"),
        Tab("photo", photo_tab.LABEL, photo_tab.MODEL, photo_tab.INPUT_TITLE, photo_tab.UPLOAD_PROMPT,
            photo_tab.BLANK_PHOTO,
            photo_tab.FIRST_EXAMPLE, "photos"))
STYLES = ("app.css", "canvas.css", "heads_view.css", "page/static.css")  # assets/
INSIDE = "inside"  # the Inside-the-model tab's name in the page, and the folder of its pictures
VENDOR = "vendor/onnxruntime-web"  # assets/: the page's runtime, with its licence note and checksums
OFFLINE = "sw.js"  # assets/: the service worker that serves the site from what the browser keeps (offline)
SERVER_ONLY = ("Export for slides (a view as a PNG 1600 px wide, or a GIF through the layers) runs in the Python "
               "app: start it with the README's first command, or open the Gradio Space.")


class StaticError(ValueError):
    """The static folder can't be written; the message says why and what to do."""


def models_folder(model: str) -> str:
    """Where the page finds a model's graphs, copied into the static folder."""
    return f"models/{model}/"


def first_example(tab: Tab) -> Path | None:
    return next((p for p in sorted((EXAMPLES / tab.examples).glob("*.png")) if p.stem == tab.first_example), None)


def model_description(tab: Tab) -> dict:
    """The page's model of a tab (vit_demo/app/page_model.py), its graphs at ``models/<model>/``."""
    return page_model.description(tab.model, tab.prompt, tab.blank, models_folder(tab.model), first_example(tab))


def view(component, prefix: str, kind: str) -> dict:
    """A live view of the app (a ``gr.HTML`` made by vit_demo/app/components.py) as the page mounts it: its element,
    template, and the view of assets/page/live.js it runs."""
    return {"id": component.elem_id, "classes": " ".join(component.elem_classes), "template": component.html_template,
            "prefix": prefix, "view": kind, "value": ""}


def note(markdown: str) -> str:
    """A view's note in the app's markdown as the page's paragraph ("" for none)."""
    return f'<p class="vd-note">{caption_html(markdown)}</p>' if markdown else ""


def section(markdown: str, classes: str = "") -> str:
    """A title and its text, as the app's markdown writes them ("### Title" then the text; ``classes``: the title's)."""
    title, _, text = markdown.partition("\n")
    heading = f'<h3 class="{classes}">' if classes else "<h3>"
    return f"{heading}{html.escape(title.lstrip('# '))}</h3>{note(text)}"


def mount_point(spec: dict) -> str:
    return f'<div id="{spec["id"]}" class="{spec["classes"]}"></div>'


def controls(prefix: str, layers: int, heads: int) -> str:
    """The layer and head controls of the large view, shaped as the app's (page/views/selected.js reads the layer from
    ``#<prefix>-layer input[type=number]`` and the head from ``#<prefix>-head input:checked``)."""
    choices = [attention_view.MEAN] + [f"head {h + 1}" for h in range(heads)]
    radios = "".join(f'<label><input type="radio" name="{prefix}-head" value="{html.escape(c)}"'
                     f'{" checked" if c == attention_view.MEAN else ""}> {html.escape(c)}</label>' for c in choices)
    return (f'<div class="vd-controls"><div id="{prefix}-layer" class="vd-layer vd-control"><label>Layer <input '
            f'type="number" min="1" max="{layers}" value="{layers}"></label><input type="range" min="1" '
            f'max="{layers}" value="{layers}" aria-label="layer"></div><fieldset id="{prefix}-head" '
            f'class="vd-head vd-control"><legend>Head</legend>{radios}</fieldset></div>')


def class_picker(prefix: str, model: str) -> str:
    """The class the relevance view explains, as the app's picker offers them (page/views/selected.js:
    ``live.explain``)."""
    choices = [explanation_view.PREDICTED_CHOICE, *classifier(model).classes]
    options = "".join(f'<option value="{html.escape(c)}">{html.escape(c)}</option>' for c in choices)
    return (f'<label class="vd-control">Explain the class <select id="{prefix}-explain-class">{options}</select>'
            "</label>")


def photo_input(first: Path | None) -> str:
    """The photo tab's input: an upload, the photo shown, and the examples (``first`` shown at the start)."""
    thumbs = "".join(f'<button type="button" title="example: {html.escape(p.stem)}" '
                     f'data-src="examples/photos/{p.name}">'
                     f'<img alt="example {html.escape(p.stem)}" loading="lazy" src="examples/photos/{p.name}"></button>'
                     for p in sorted((EXAMPLES / "photos").glob("*.png")))
    shown = f' src="examples/photos/{first.name}"' if first else ""
    return (f'<div class="vd-photo" data-panel="photo"><img class="vd-photo-shown" alt="the photo" '
            f'loading="lazy"{shown}>'
            '<label class="vd-upload">Upload a photo <input type="file" accept="image/*"></label>'
            f'<div class="vd-examples"><span>Examples:</span>{thumbs}</div></div>')


def tab_html(tab: Tab, described: dict, views: list[dict]) -> str:
    """One tab's HTML: the input, the prediction and the large view on top, then the other views, made as the app
    makes them (``described``: the tab's model, page_model.py; ``views`` gets each live view the page mounts)."""
    prefix, model, config, run = tab.prefix, tab.model, model_config(tab.model), training_run(tab.model)
    examples, first = sorted((EXAMPLES / tab.examples).glob("*.png")), first_example(tab)

    def add(component, kind: str) -> str:
        views.append(view(component, prefix, kind))
        return mount_point(views[-1])

    if prefix == "digit":
        pad = pad_html(examples, first, prefix, {"source": "page/source.js", "model": described})
        source, notes = f'<div id="canvas" class="vd-canvas">{pad}</div>', ""
    else:  # under the answer, as the app's photo_tab.photo_notes: the classes it knows, the square it read
        source = photo_input(first)
        reads = live_canvas("photo-reads", "photo", "input", "the square the model reads", photo_tab.READS_SIZE,
                            photo_tab.READS_SIZE, scale=False)
        notes = (f'<div class="vd-answer-note">{note(photo_tab.CLASSES_NOTE)}' + add(reads, "input")
                 + f"{note(photo_tab.READS_NOTE)}</div>")
    top = (f'<div class="vd-top"><div class="vd-input">{section(tab.input_title, "vd-step")}{source}</div>'
           f'<div class="vd-patches-step vd-detail">{section(attention_view.patches_title(config), "vd-step")}'
           + add(attention_view.patches_view(prefix, config), "patches")
           + f"{note(attention_view.patches_note(config))}</div>"
           + f'<div class="vd-selected">{section(attention_view.LARGE_TITLE, "vd-step")}'
           + controls(prefix, config.depth, config.heads)
           + add(attention_view.large_view(prefix), "selected")
           + f'</div><div class="vd-prediction">{section(ANSWER_TITLE, "vd-step")}'
           + add(live_prediction(prefix, model_problem(model) or tab.prompt), "prediction") + notes
           + "</div></div>" + deeper_links(prefix))
    training = "" if run.problem else (
        section(training_view.TRAINING_TITLE)
        + f'<label id="{prefix}-training-position" class="vd-control">Training progress <input type="range" '
        f'min="1" max="{run.positions}" value="{run.positions}"></label>'
        + add(training_view.training_grid(prefix, config, run), "training"))
    means = heads_view.ablation_means_or_none(model) is not None
    detail = (
        '<div class="vd-detail"><div class="vd-row"><div>'
        + section(attention_view.CLS_GRID_TITLE) + add(attention_view.cls_grid_view(prefix, config), "cls")
        + "</div><div>" + section(attention_view.ROLLOUT_TITLE) + add(attention_view.rollout_view(prefix), "rollout")
        + '</div></div><div class="vd-row"><div>'
        + section(relevance_title(None, None)) + class_picker(prefix, model)
        + add(explanation_view.relevance_view(prefix), "relevance")
        + "</div><div>" + section(explanation_view.FAITHFULNESS_TITLE)
        + add(explanation_view.faithfulness_view(prefix), "faithfulness")
        + '</div></div><div class="vd-row"><div>' + section(query_title(None))
        + add(attention_view.query_view(prefix, config), "query")
        + f"</div><div>{training}</div></div><h3>More in the Python app</h3>"
        f'<p class="vd-note">{html.escape(SERVER_ONLY)}</p>'
        '<h2 class="vd-heads-title">What each head does</h2><div class="vd-row"><div>'
        + section(heads_view.KNOCKOUT_TITLE)
        + add(heads_view.heads_html(prefix, "board", heads_view.board_template(
            prefix, config, means, heads_view.which_heads_matter(model)), f"{prefix}-board"), "board")
        + f"{note(heads_view.KNOCKOUT_NOTE)}</div><div>"
        + section(heads_view.LENS_TITLE)
        + add(heads_view.heads_html(prefix, "lens", heads_view.lens_template(config), f"{prefix}-lens"),
              "lens")
        + f"{note(heads_view.LENS_NOTE)}</div></div>"
        + section(heads_view.PATCHING_TITLE)
        + add(heads_view.heads_html(prefix, "patching", heads_view.patching_template(config),
                                    f"{prefix}-patching"), "patching") + "</div>")
    hidden = "" if tab is TABS[0] else " hidden"  # the first tab shows at the start
    return f'<section class="vd-tab" id="tab-{prefix}" data-panel="{prefix}"{hidden}>{top}{detail}</section>'


def picture(path: str, alt: str) -> str:
    """An Inside-the-model picture, loaded once its tab opens (page/inside.js sets ``src`` from ``data-src``)."""
    return f'<img class="vd-inside-picture" data-src="{path}" alt="{html.escape(alt)}">'


def inside_pictures(model: str, folder: Path) -> dict:
    """Write a model's Inside-the-model pictures into ``folder``, made by the app's own functions (inside_tab.insides,
    and the position views' pictures: the grid with no cell outlined, and every patch's large map, g x g of them in
    one picture in patch order); return the position grid's data for the page: each cell's box, as shares of the grid
    picture's width and height (left, top, right, bottom), each patch's caption, and the patch shown first."""
    found = inside_tab.insides(model)
    g = found.similarity.shape[0]
    grid = inside_tab.position_grid(found.similarity)
    maps = [inside_tab.position_map(found.similarity, patch) for patch in range(g * g)]
    width, height = maps[0].size
    every_map = Image.new("RGB", (g * width, g * height))
    for patch, image in enumerate(maps):
        every_map.paste(image, ((patch % g) * width, (patch // g) * height))
    made = {name: image for name, image in (("filters", found.filters), ("distance", found.distance),
                                            ("positions", grid), ("position", every_map),
                                            ("reliability", found.reliability), ("importance", found.importance))
            if image is not None}  # (a chart the weights have no record for is left out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, image in made.items():
        image.save(folder / f"{name}.png", optimize=True)
    boxes = [render.position_cell_box(patch, g, inside_tab.POSITION_CELL) for patch in range(g * g)]
    return {"grid": g, "size": [width, height],
            "boxes": [[round(x / share, 6) for x, share in zip(box, (grid.width, grid.height) * 2)] for box in boxes],
            "captions": [inside_tab.position_caption(patch, g) for patch in range(g * g)],
            "start": inside_tab.centre_patch(g), "pictures": sorted(made)}


def inside_model_html(choice: str, model: str, data: dict, shown: bool) -> str:
    """One model's Inside-the-model views (``data``: inside_pictures'), laid out as the app's tab lays them out."""
    found, path = inside_tab.insides(model), f"{INSIDE}/{model}"
    g, (width, height) = data["grid"], data["size"]
    hidden = "" if shown else " hidden"

    def figure(name: str, alt: str) -> str:  # none for a picture the weights have no record for
        return picture(f"{path}/{name}.png", alt) if name in data["pictures"] else ""

    def chart_row(title: str, name: str, text: str) -> str:  # as the app's inside_tab.chart_row
        alt = f"{choice}: {title.lstrip('# ')}"
        return (f'<div class="vd-row"><div class="vd-wide">{section(title)}{figure(name, alt)}</div>'
                f"<div>{note(text)}</div></div>")

    return (f'<div class="vd-inside-model" data-model="{model}"{hidden}>'
            f'<div class="vd-row"><div>{section(inside_tab.FILTERS_TITLE)}'
            f'{figure("filters", f"{choice}: the patch-embedding filters")}{note(found.filters_note)}</div>'
            f'<div>{section(inside_tab.DISTANCE_TITLE)}{figure("distance", f"{choice}: how far each head looks")}'
            f'{note(found.distance_note)}</div></div>'
            f'<div class="vd-row"><div class="vd-wide">{section(inside_tab.POSITIONS_TITLE)}'
            f'<div class="vd-positions-grid">{figure("positions", f"{choice}: position embedding similarities")}'
            f'<span class="vd-positions-mark" style="outline-color: rgb{render.SIMILARITY_MARK}"></span></div></div>'
            '<div><p class="vd-note vd-position-caption"></p>'  # the patch chosen: page/inside.js, from the start
            f'<div class="vd-position-large" role="img" data-src="{path}/position.png" style="aspect-ratio: {width} / '
            f'{height}; background-size: {100 * g}% {100 * g}%"></div></div></div>'
            + chart_row(inside_tab.RELIABILITY_TITLE, "reliability", found.reliability_note)
            + chart_row(inside_tab.IMPORTANCE_TITLE, "importance", found.importance_note) + "</div>")


def inside_html(target: Path) -> tuple[str, dict]:
    """The Inside-the-model tab (vit_demo/app/inside_tab.py) for every model, its pictures written under
    ``inside/<model>/`` in ``target``; and the page's data of each model's position grid (inside_pictures)."""
    data = {model: inside_pictures(model, target / INSIDE / model) for model in inside_tab.MODELS.values()}
    radios = "".join(f'<label><input type="radio" name="inside-model" value="{model}"{" checked" if i == 0 else ""}>'
                     f" {html.escape(choice)}</label>" for i, (choice, model) in enumerate(inside_tab.MODELS.items()))
    blocks = "".join(inside_model_html(choice, model, data[model], i == 0)
                     for i, (choice, model) in enumerate(inside_tab.MODELS.items()))
    return (f'<section class="vd-tab" id="tab-{INSIDE}" data-panel="{INSIDE}" hidden>{section(inside_tab.INTRO)}'
            f'<fieldset id="inside-model" class="vd-control"><legend>Model</legend>{radios}</fieldset>{blocks}'
            "</section>"), data


def index_html(page: dict, body: str) -> str:
    """The page: the app's header and tabs, the page's data (``page``: the models, the views), and its script."""
    styles = "".join(f'<link rel="stylesheet" href="{name}">' for name in STYLES)
    tabs = "".join(f'<button type="button" role="tab" data-tab="{tab.prefix}" '
                   f'aria-selected="{str(tab is TABS[0]).lower()}">{html.escape(tab.label)}</button>' for tab in TABS)
    tabs += (f'<button type="button" role="tab" data-tab="{INSIDE}" aria-selected="false">'
             f"{html.escape(inside_tab.LABEL)}</button>")
    data = json.dumps(page).replace("</", "<\\/")  # no "</script>" inside the data
    keys = caption_html(KEYS_LINE)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>ViT demo: what a Vision Transformer looks at</title>
{styles}
</head>
<body>
<main id="vd-app">
<header id="vd-header"><h1>What does a Vision Transformer look at?</h1><p id="vd-keys">{keys}</p>
<label id="talk-mode"><input type="checkbox"> Talk mode</label></header>
<p id="vd-intro">{html.escape(INTRO)}</p>
<nav class="vd-tabs" role="tablist">{tabs}</nav>
<p class="vd-status" id="vd-status" hidden></p>
<p class="vd-note vd-detail" id="vd-offline" aria-live="polite" hidden></p>
{body}
</main>
<script type="application/json" id="vd-page">{data}</script>
<script type="module" src="page/static.js"></script>
</body>
</html>
"""


def space_readme() -> str:
    """The static Space's README.md: its front matter, then a short card."""
    return f"""---
title: ViT demo
emoji: 🔍
colorFrom: indigo
colorTo: yellow
sdk: static
app_file: {PAGE}
pinned: false
short_description: "{SHORT_DESCRIPTION}"
---
{MARKER}

# What does a Vision Transformer look at?

Draw a digit or upload a photo and watch a Vision Transformer, written from scratch in PyTorch, classify it in your
browser, with what every layer and every attention head looks at: the patch grid the model reads, [CLS] attention
per layer and head, attention rollout, where any patch you click looks, the model as it was during training, and
what it has learnt inside (its filters, position embeddings, and which heads matter).

Two small models: one for handwritten digits (MNIST{accuracy_note("mnist")}), one for photos (CIFAR-10
{accuracy_note("cifar10")}), exported to ONNX and run by onnxruntime-web (WebAssembly) in the page. Nothing is sent
anywhere: once loaded, the page works offline.
"""


def build(target: Path) -> None:
    """Write the static folder's contents into the empty folder ``target``."""
    views: list[dict] = []
    inside, positions = inside_html(target)
    models = {tab.prefix: model_description(tab) for tab in TABS}
    body = "".join(tab_html(tab, models[tab.prefix], views) for tab in TABS) + inside
    for tab in TABS:
        for path in page_model.graph_files(tab.model):
            copy = target / models_folder(tab.model) / path.relative_to(weights_folder(tab.model))
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
    shutil.copytree(ASSETS / "page", target / "page")  # the page's modules: its model, its views, its host
    for name in STYLES:
        shutil.copy2(ASSETS / name, target / name)
    shutil.copytree(ASSETS / VENDOR, target / VENDOR)
    shutil.copytree(EXAMPLES / "photos", target / "examples" / "photos")  # the digits' are in the canvas' HTML
    shutil.copy2(ASSETS / OFFLINE, target / OFFLINE)  # at the root: it serves every file of the site
    canvas = {"script": (ASSETS / "canvas.js").read_text(encoding="utf-8")}
    kept = ["./", PAGE, *sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())]
    page = {"models": models, "views": views, "canvas": canvas, "inside": positions, "offline": OFFLINE,
            "files": kept, "bytes": sum(p.stat().st_size for p in target.rglob("*") if p.is_file()),
            "talk": {"keys": TALK_KEYS, "toggle": TALK_TOGGLE, "fromAddress": TALK_FROM_ADDRESS}}
    (target / PAGE).write_text(index_html(page, body), encoding="utf-8")
    (target / README).write_text(space_readme(), encoding="utf-8")
    write_gitattributes(target)


def write_static(folder: Path | str, force: bool = False) -> dict:
    """Write the static Space into ``folder`` (created where needed; an earlier one, or with ``force`` any folder, is
    rewritten whole, keeping only a ``.git``); return what was written, as one JSON-able record."""
    folder = Path(folder)
    for tab in TABS:
        problem = model_problem(tab.model)
        if problem:
            raise StaticError(f"{problem} Nothing was written.")
    try:
        replace_folder(folder, force, MARKER, build)
    except (WeightsError, page_model.GraphsMissing) as exc:
        raise StaticError(f"{exc} Nothing was written.") from None
    files = [p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts]
    return {"static": str(folder), "files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "lfs_files": sum(needs_lfs(p) for p in files),
            "serve": f"python -m http.server --directory {folder}",
            "deploy": f"hf upload USER/NAME {folder} --repo-type space"}
