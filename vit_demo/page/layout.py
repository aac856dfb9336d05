"""The page's layout, written once: the header, the tabs, every view's place and template, and the Inside-the-model
tab. The static Space writes it into index.html (vit_demo/deploy/static_space.py), the Gradio app serves it in one
``gr.HTML`` (vit_demo/app/demo.py). Its scripts (assets/page/host.js) mount each view (``data-view``: a module of
assets/page/views/, listed in live.js) and compute every number from the model's raw outputs (source.js).

Every file the page loads is named through ``address`` (a path inside the static site -> where the browser finds
it: the same path in the static Space, Gradio's file route in the app).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from vit_demo.app.service import (ablation_means, classifier, model_config, model_problem, training_run,
                                  TrainingRun)
from vit_demo.data.datasets import dataset_spec
from vit_demo.data.preprocess import DRAWING_PIXELS, PENS
from vit_demo.interpret import heads
from vit_demo.model import ViTConfig
from vit_demo.page.captions import caption_html, query_title, trained_note
from vit_demo.pictures import render, slides
from vit_demo.weights import WeightsError

if TYPE_CHECKING:
    from vit_demo.page.inside import Insides

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
LARGE = 336  # pixels a side of the large views' canvases
THUMB = 96  # pixels a side of a layer x head grid's tiles (render.attention_grid's default)
GRID_WIDTH = 480  # pixels on screen a layer x head grid takes at most (the shipped models' grids: 5 and 7 columns)...
GRID_TILE = 60  # ...or more, where that would draw its tiles smaller than this (a model of more heads: 12 of them)
LENS_TILE = 64  # pixels a side of each layer's per-patch lens map
RESIDUAL_AT_ONCE_WIDTH = 4096  # dim x tokens at most for the residual grid to come with the heads' (see below)
MARKED_HEADS = 3  # the board marks this many heads: those that matter most by the weights' head_importance.json
READS_SIZE = 128  # pixels a side of the picture of what the photo model reads
MEAN = "mean"  # the head control's choice for the mean over heads
PREDICTED_CHOICE = "the predicted class"  # the class picker's default
TITLE = "What does a Vision Transformer look at?"
INTRO = ("A Vision Transformer written from scratch in PyTorch, running in your browser: draw, and follow it "
         "step by step.")
KEYS_LINE = "**Keys:** ←/→ layer · ↑/↓ head · `c` clear"  # talk mode's alone (app.css)
INSIDE = "inside"  # the Inside-the-model tab's name, and the folder of its pictures


@dataclasses.dataclass(frozen=True)
class Tab:
    """One of the page's tabs of an image."""

    prefix: str  # in its views' element ids
    label: str  # its button's
    model: str
    input_title: str  # its first step's title and sentence
    prompt: str  # what it says until there is an image
    blank: str  # what it says of a blank image
    first_example: str  # the example it starts with
    examples: str  # the folder of examples/ it offers

    def example_files(self) -> list[Path]:
        return sorted((EXAMPLES / self.examples).glob("*.png"))

    def first(self) -> Path | None:
        return next((p for p in self.example_files() if p.stem == self.first_example), None)


PHOTO_SIZE = dataset_spec("cifar10").image_size
DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."
TABS = (
    Tab("digit", "Draw a digit (MNIST)", "mnist",
        "### Draw a digit\nAnywhere, any size: it is cropped, scaled and centred as MNIST's digits were.",
        DRAW_PROMPT, DRAW_PROMPT, "2", "digits"),
    Tab("photo", "Upload a photo (CIFAR-10)", "cifar10",
        f"### Choose a photo\nUpload one or pick an example: it is shrunk to {PHOTO_SIZE} x {PHOTO_SIZE} pixels, as "
        "CIFAR-10's are.",
        "Upload a photo, or pick an example below.", "This image is blank: there is nothing to classify.", "horse",
        "photos"),
)
INSIDE_LABEL = "Inside the model"
INSIDE_MODELS = {"Digits (MNIST)": "mnist", "Photos (CIFAR-10)": "cifar10"}

# ---- Words: the first screen tells a story a step a column (class vd-step, which the CSS numbers): the input -> the
# patches it reads -> where it looks -> the answer, each a title and one plain sentence.

ANSWER_TITLE = "### The answer\nRead from [CLS] after the last layer: how sure the model is of each class."
LARGE_TITLE = ("### Where it looks\nIn each layer every token takes in the others. Bright: where [CLS], the "
               "answer's token, looked.")
CLS_GRID_TITLE = ("### Every layer and head\nWhere [CLS] looked in each layer (rows) and head (columns), and each "
                  "layer's mean.")
ROLLOUT_TITLE = ("### All layers together\nWhere [CLS] looks once every layer is followed back to the patches, the "
                 "shortcut around each layer included (*attention rollout*, Abnar & Zuidema, 2020).")
FAITHFULNESS_TITLE = ("### How far to trust each map\nRank the patches by a map, then remove (or add back) the top "
                      "10%, 20%, ...: the faster the prediction falls (or returns), the more faithful the map. A "
                      "random ranking is the floor. Scored with every head on.")
SCORE_PROMPT = ("Press **Score the maps** to see, for this image, how fast each map's most relevant patches take "
                "the prediction away (deletion) or bring it back (insertion).")
TRAINING_TITLE = ("### Attention through training\nThe same image through the model as it was during training: "
                  "watch the heads learn where to look.")
EXPORT_TITLE = ("### Export for slides\nMade from the image in hand, in this page: a view as a PNG 1600 pixels wide "
                "or more, or an animated GIF of where [CLS] looks, layer by layer, for the head chosen above.")
KNOCKOUT_TITLE = ("### Switch heads off\nClick a head to switch it off, a layer's name for the whole layer. Its "
                  "output is replaced by its average over training images (*mean*), or by zeros (*zero*). The "
                  "prediction and every view then show the model without it (the training slider's earlier models "
                  "keep theirs).")
KNOCKOUT_NOTE = ("The **logit difference** is the predicted class's score minus the runner-up's, the scores before "
                 "they become probabilities (*logits*): it keeps moving where a probability near 0% or 100% hardly "
                 "does (Heimersheim & Nanda, 2024).")
LENS_TITLE = ("### The answer, layer by layer\nWhat the model would answer if it stopped after each layer: its "
              "classifier read from [CLS] there instead of at the end (the *logit lens*).")
LENS_NOTE = ("Under each layer: the lens applied to every patch instead, the probability of the final answer (0 to "
             "1, one scale for all). The classifier never reads the patches, so this shows where the class is "
             "written, not what the model says.")
PATCHING_TITLE = ("### Patch one image into another\nKeep two images the model tells apart (a 3 and an 8, say): "
                  "one as *clean*, one as *corrupt*. Each head's output, and each token's running total after each "
                  "layer (the *residual stream*, which every layer adds to), is copied from one image's run into "
                  "the other's, one at a time.")
PATCHING_HOW = ("**How to read it:** each square is one part of the model copied across; its colour says how far "
                "that alone moves the answer from the corrupt image's (0, white) to the clean image's (1, red), "
                "measured on the logit difference between the two classes. *Clean into corrupt*: red parts are "
                "enough to bring the clean answer back. *Corrupt into clean*: the clean answer needs the parts that "
                "turn white or blue; it survives without the red ones.")
CLASSES_NOTE = (f"**It knows ten classes:** {', '.join(dataset_spec('cifar10').classes)}. Anything else gets one of "
                "these ten, with a warning when the photo looks unlike them.")
READS_NOTE = (f"**What the model reads:** {PHOTO_SIZE} x {PHOTO_SIZE} pixels, the photo's shorter side scaled down "
              "and the centre square kept: a wide or tall photo loses its edges.")
INSIDE_INTRO = ("### What the model has learnt inside\nAs in the ViT paper's Figure 7 (Dosovitskiy et al., 2021), "
                "for the weights this page runs.")
POSITIONS_TITLE = ("### Position embeddings\nCell (row, column): that patch's similarity to every patch. Nearby "
                   "patches learn alike embeddings: the model learns the image's 2-D layout.")
DEEPER = (("cls-grid", "every layer and head"), ("rollout", "all layers together"), ("relevance", "why this class?"),
          ("faithfulness", "can you trust these maps?"), ("query", "where one patch looks"),
          ("training", "how it learned to look"), ("board", "what each head does"), ("export", "slides"))
# The export's choices (assets/page/export.js makes each): its key -> as the page words it.
EXPORTS = {"cls-grid": "Where [CLS] looks: every layer and head",
           "layer": "One layer and head, as chosen above",
           "rollout": "Attention rollout",
           "relevance": "Why this class: relevance, for the class chosen above",
           "patches": "What the model sees: the patches",
           "query": "Where a patch looks: every layer and head, for the patch set here"}


# ---- HTML pieces ---------------------------------------------------------------------------------------------------

def note(markdown: str, elem_id: str = "") -> str:
    """A note in markdown as the page's paragraph ("" for none)."""
    attribute = f' id="{elem_id}"' if elem_id else ""
    return f'<p class="vd-note"{attribute}>{caption_html(markdown)}</p>' if markdown else ""


def section(markdown: str, classes: str = "") -> str:
    """A title and its text ("### Title" then the text; ``classes``: the title's)."""
    title, _, text = markdown.partition("\n")
    heading = f'<h3 class="{classes}">' if classes else "<h3>"
    return f"{heading}{html.escape(title.lstrip('# '))}</h3>{note(text)}"


def data_attributes(data: dict[str, str]) -> str:
    return "".join(f' data-{name}="{html.escape(value)}"' for name, value in data.items())


def png_data_url(picture: Image.Image) -> str:
    return "data:image/png;base64," + base64.b64encode(slides.png_bytes(picture)).decode()


def colour_scale(low: str = "none", high: str = "most (each map's own maximum)", cmap: str = render.HEAT,
                 classes: str = "vd-scale") -> str:
    """A colour scale (by default every overlay's) as a bar, from ``low`` to ``high``."""
    table = render.colormap(cmap)  # (256, 3)
    stops = ", ".join(f"rgb{tuple(int(v) for v in table[round(255 * i / 8)])} {100 * i / 8:g}%" for i in range(9))
    return (f'<div class="{classes}" aria-hidden="true"><span>{html.escape(low)}</span>'
            f'<span class="vd-scale-bar" style="background: linear-gradient(to right, {stops})"></span>'
            f"<span>{html.escape(high, quote=False)}</span></div>")


def view(prefix: str, name: str, template: str, elem_id: str, classes: str = "vd-view vd-live") -> str:
    """A view's place: its element (``elem_id``) holding ``template``, drawn by module ``name`` of
    assets/page/views/ (live.js lists them) for tab ``prefix``."""
    return f'<div id="{elem_id}" class="{classes}" data-view="{name}" data-prefix="{prefix}">{template}</div>'


def canvas_view(prefix: str, name: str, elem_id: str, description: str, width: int = LARGE, height: int = LARGE,
                scale: bool = True, extra: str = "", style: str = "", **data: str) -> str:
    """A view drawn on a canvas: a caption, the canvas ``width`` x ``height`` (``description``: for screen readers;
    ``style``: its CSS; ``data``: its data-* attributes), ``extra`` HTML, and the colour scale (``scale``)."""
    template = (f'<div class="vd-caption" aria-live="polite"></div><canvas class="vd-live-canvas" width="{width}" '
                f'height="{height}" role="img" aria-label="{description}"{data_attributes(data)} style="{style}">'
                f'</canvas>{extra}{colour_scale() if scale else ""}')
    return view(prefix, name, template, elem_id)


def grid_view(prefix: str, name: str, elem_id: str, config: ViTConfig, description: str, **data: str) -> str:
    """A layer x head grid: ``render.attention_grid``'s frame as the canvas' background, a tile per layer and head
    drawn over it."""
    frame, origins = render.attention_grid_layout(config.depth, config.heads)
    widest = max(GRID_WIDTH, frame.width * GRID_TILE // THUMB)  # on screen, as its column allows
    return canvas_view(prefix, name, elem_id, description, frame.width, frame.height,
                       style=f"max-width: min(100%, {widest}px); background: url({png_data_url(frame)}) 0 0 / "
                             "100% 100% no-repeat",
                       thumb=str(THUMB), origins=json.dumps(origins).replace(" ", ""), **data)


def prediction_view(prefix: str, prompt: str) -> str:
    """The notice above an image the model should not be trusted with, the one that says which heads are switched
    off, the top class large, the top three classes' probabilities as bars, and the info line (``prompt`` until there
    is an image)."""
    template = (f'<div class="vd-notice" id="{prefix}-notice" hidden></div>'
                f'<div class="vd-ablated" id="{prefix}-ablated" hidden></div>'
                f'<div class="vd-label" id="{prefix}-label"><span class="vd-label-title">Prediction</span>'
                '<div class="vd-top-class" aria-live="polite"></div><div class="vd-probs"></div></div>'
                f'<div class="vd-info" id="{prefix}-info" data-prompt="{html.escape(caption_html(prompt))}"></div>')
    return view(prefix, "prediction", template, f"{prefix}-prediction", "vd-live vd-prediction-view")


def controls(prefix: str, layers: int, heads_: int) -> str:
    """The large view's layer (``#<prefix>-layer``: a number and a range) and head (``#<prefix>-head``) controls."""
    choices = [MEAN] + [f"head {h + 1}" for h in range(heads_)]
    radios = "".join(f'<label><input type="radio" name="{prefix}-head" value="{html.escape(c)}"'
                     f'{" checked" if c == MEAN else ""}> {html.escape(c)}</label>' for c in choices)
    return (f'<div class="vd-controls"><div id="{prefix}-layer" class="vd-layer vd-control"><label>Layer <input '
            f'type="number" min="1" max="{layers}" value="{layers}"></label><input type="range" min="1" '
            f'max="{layers}" value="{layers}" aria-label="layer"></div><fieldset id="{prefix}-head" '
            f'class="vd-head vd-control"><legend>Head</legend>{radios}</fieldset></div>')


def options(choices: list[str] | dict[str, str]) -> str:
    pairs = choices.items() if isinstance(choices, dict) else ((c, c) for c in choices)
    return "".join(f'<option value="{html.escape(value)}">{html.escape(text)}</option>' for value, text in pairs)


def pad(tab: Tab) -> str:
    """The drawing canvas (assets/page/canvas.js): the drawing surface, the pens, Clear, and the examples (the first
    drawn at the start), inlined."""
    pens = "".join(f'<button type="button" class="vd-pen" data-width="{width}" aria-pressed="{str(i == 1).lower()}">'
                   f"{name}</button>" for i, (name, width) in enumerate(PENS))
    thumbs = "".join(
        f'<button type="button" title="example: {html.escape(p.stem)}"{" data-first" if p == tab.first() else ""}>'
        f'<img alt="example {html.escape(p.stem)}" '
        f'src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        "</button>" for p in tab.example_files())
    return (f'<div id="canvas" class="vd-canvas"><div class="vd-pad" data-panel="{tab.prefix}">'
            f'<canvas class="vd-draw" width="{DRAWING_PIXELS}" height="{DRAWING_PIXELS}" '
            'aria-label="drawing canvas: draw a digit with the mouse, a finger or a pen"></canvas>'
            f'<div class="vd-bar">{pens}<button type="button" class="vd-clear">Clear</button></div>'
            f'<div class="vd-examples"><span>Examples:</span>{thumbs}</div></div></div>')


def photo_input(tab: Tab, address: Callable[[str], str]) -> str:
    """The photo tab's input: an upload, the photo shown (the first example at the start), and the examples."""
    def src(p: Path) -> str:
        return html.escape(address(f"examples/{tab.examples}/{p.name}"))

    thumbs = "".join(f'<button type="button" title="example: {html.escape(p.stem)}" data-src="{src(p)}">'
                     f'<img alt="example {html.escape(p.stem)}" loading="lazy" src="{src(p)}"></button>'
                     for p in tab.example_files())
    first = tab.first()
    shown = f' src="{src(first)}"' if first else ""
    return (f'<div id="{tab.prefix}-input" class="vd-photo">'
            f'<img class="vd-photo-shown" alt="the photo" loading="lazy"{shown}>'
            '<div class="vd-bar"><label class="vd-upload">Upload a photo <input type="file" accept="image/*"></label>'
            '<button type="button" class="vd-clear">Clear</button></div>'
            f'<div class="vd-examples"><span>Examples:</span>{thumbs}</div></div>')


# ---- The heads' section ---------------------------------------------------------------------------------------------

def residual_at_once(config: ViTConfig) -> bool:
    """Whether the residual stream's patching grid comes with the heads' at once: yes for the digits' model (the two
    together take some 0.5 s in the page, 0.16 s in PyTorch), no for the photos' (some 12 s in the page against 1.3 s
    for the heads alone: benchmarks/page_patching.py), whose page asks for it on a button that says what it costs."""
    return config.dim * config.num_tokens <= RESIDUAL_AT_ONCE_WIDTH


def which_heads_matter(model: str) -> dict | None:
    """What the board says of the heads (from the weights' head_importance.json; None where it was never measured):
    the MARKED_HEADS most important ("marked", as layer * heads + head) and the most test accuracy one head alone
    switched off costs ("worst_drop", a share), over how many images ("images")."""
    record = heads.read_head_importance(classifier(model).info.folder)
    if record is None:
        return None
    importance, accuracy = np.asarray(record["importance"]), np.asarray(record["accuracy"])  # (L, H) each
    marked = np.argsort(-importance.ravel(), kind="stable")[:MARKED_HEADS]
    return {"marked": sorted(int(i) for i in marked), "images": record["images"],
            "worst_drop": round(max(float(record["baseline"] - accuracy.min()), 0.0), 4)}


def has_means(model: str) -> bool:
    """Whether the weights hold the heads' mean outputs (mean-ablation); a model that can't load has none."""
    try:
        return ablation_means(model) is not None
    except WeightsError:
        return False


def board_template(prefix: str, config: ViTConfig, means: bool, matter: dict | None = None) -> str:
    """The board: a toggle per head and layer (views/board.js draws them), the heads that matter (``matter``:
    which_heads_matter's, marked), mean or zero ablation (mean only where the weights have ``means``), all heads on,
    and the logit difference."""
    about = f' data-matter="{html.escape(json.dumps(matter))}"' if matter else ""
    return (f'<div class="vd-board" data-layers="{config.depth}" data-heads="{config.heads}" '
            f'data-means="{str(means).lower()}"{about} role="group" aria-label="switch heads off"></div>'
            f'<div class="vd-board-bar"><label><input type="radio" name="vd-mode-{prefix}" value="mean"'
            f'{" checked" if means else " disabled"}> mean-ablation</label><label><input type="radio" '
            f'name="vd-mode-{prefix}" value="zero"{"" if means else " checked"}> zero-ablation</label>'
            '<button type="button" class="vd-heads-reset">All heads on</button></div>'
            '<div class="vd-caption vd-board-status" aria-live="polite"></div><div class="vd-logit-diff"></div>')


def lens_template(config: ViTConfig) -> str:
    """The lens strip: [CLS]'s answer after each layer, and a canvas for the per-patch maps."""
    return ('<div class="vd-caption" aria-live="polite"></div><div class="vd-lens-strip"></div>'
            f'<canvas class="vd-live-canvas vd-lens-maps" width="{config.depth * (LENS_TILE + 6) - 6}" '
            f'height="{LENS_TILE}" role="img" aria-label="per patch, the probability of the answer after each '
            f'layer"></canvas>{colour_scale("0", "1 (the answer for sure)")}')


def patching_template(config: ViTConfig) -> str:
    """The two images kept (clean and corrupt), the status, the residual stream's button (where its grid doesn't
    come with the heads' at once), how to read it, the grids, and their colour scale (-1 blue, 0 white: the corrupt
    run, 1 red: the clean run)."""
    slots = "".join(f'<div class="vd-slot" data-slot="{slot}"><canvas class="vd-slot-image" width="96" height="96" '
                    f'role="img" aria-label="the {slot} image"></canvas><div><b>{slot.capitalize()}</b>'
                    f'<div class="vd-slot-label">none yet</div><button type="button" class="vd-use" '
                    f'data-slot="{slot}">Use this image as {slot}</button></div></div>'
                    for slot in ("clean", "corrupt"))
    return (f'<div class="vd-patching" data-residual="{str(residual_at_once(config)).lower()}" '
            f'data-colours="{base64.b64encode(render.colormap(render.DIVERGING).tobytes()).decode()}">'
            f'<div class="vd-patching-pair">{slots}</div>'
            '<div class="vd-caption vd-patching-status" aria-live="polite"></div>'
            '<button type="button" class="vd-residual" hidden>Patch the residual stream too (a few seconds on the '
            "server, some 15 in the page)</button>"
            f'<div class="vd-note vd-patching-how">{caption_html(PATCHING_HOW)}</div>'
            '<div class="vd-patching-grids"></div>'
            f'{colour_scale("−1", "1 (clean)", render.DIVERGING, "vd-scale vd-diverging")}</div>')


def heads_section(prefix: str, model: str, config: ViTConfig) -> str:
    heads_view = "vd-view vd-live vd-heads"
    board = board_template(prefix, config, has_means(model), which_heads_matter(model))
    return ('<h2 class="vd-heads-title">What each head does</h2><div class="vd-row"><div>'
            + section(KNOCKOUT_TITLE) + view(prefix, "board", board, f"{prefix}-board", heads_view)
            + note(KNOCKOUT_NOTE) + "</div><div>" + section(LENS_TITLE)
            + view(prefix, "lens", lens_template(config), f"{prefix}-lens", heads_view) + note(LENS_NOTE)
            + "</div></div>" + section(PATCHING_TITLE)
            + view(prefix, "patching", patching_template(config), f"{prefix}-patching", heads_view))


# ---- A tab of an image -----------------------------------------------------------------------------------------------

def patches_title(config: ViTConfig) -> str:
    return (f"### The patches it reads\nThe image is cut into {config.grid_size} x {config.grid_size} patches, one "
            "token each. Click a patch to see where it looks.")


def patches_note(config: ViTConfig) -> str:
    return (f"{config.grid_size * config.grid_size} patches of {config.patch_size} x {config.patch_size} pixels, "
            f"numbered in reading order, and one more token in front, **[CLS]**, which the answer is read from "
            f"({config.num_tokens} tokens).")


def training_section(prefix: str, config: ViTConfig, run: TrainingRun) -> str:
    """Where [CLS] looks through training, with a slider over the snapshots; what is missing where there are none."""
    if run.problem:
        return section(TRAINING_TITLE) + note(run.problem, f"{prefix}-training-note")
    return (section(TRAINING_TITLE)
            + f'<label id="{prefix}-training-position" class="vd-control">Training progress (snapshot) <input '
            f'type="range" min="1" max="{run.positions}" value="{run.positions}"></label>'
            + grid_view(prefix, "training", f"{prefix}-training", config,
                        "where [CLS] looked in every layer and head at this point of training",
                        positions=str(run.positions), note=caption_html(trained_note(run))))


def export_section(prefix: str, config: ViTConfig) -> str:
    """Export for slides, made in the page (assets/page/export.js): the view, the patch for the query view, the two
    buttons, and the file made (a download link) or why there is none; the layer x head grid's geometry at slide
    width (render.attention_grid_geometry), which the page draws it by."""
    patches = config.grid_size ** 2
    grid = render.attention_grid_geometry(config.depth, config.heads,
                                          render.attention_grid_thumb(config.heads, slides.SLIDE_WIDTH))
    return (f'<div id="{prefix}-export" class="vd-export" data-grid="{html.escape(json.dumps(grid))}">'
            f'{section(EXPORT_TITLE)}'
            f'<label class="vd-control">View <select id="{prefix}-export-view">{options(EXPORTS)}</select></label>'
            f'<label class="vd-control">Patch, for \'Where a patch looks\': 0 to {patches - 1} <input '
            f'id="{prefix}-export-patch" type="text" inputmode="numeric" placeholder="empty: the one shown above">'
            f'</label><div class="vd-control"><button type="button" id="{prefix}-export-png">PNG for slides</button>'
            f'<button type="button" id="{prefix}-export-gif">GIF through the layers</button></div>'
            f'<div id="{prefix}-export-file" class="vd-export-file" aria-live="polite"></div></div>')


def tab_html(tab: Tab, address: Callable[[str], str], shown: bool) -> str:
    """One tab of an image: the first screen's story (the input, the patches, one layer and head large, the answer),
    the links to every other view, then those views in a section talk mode hides (class vd-detail)."""
    prefix, model = tab.prefix, tab.model
    problem = model_problem(model)
    if problem:  # no model: the tab says why, and how to make one
        return (f'<section class="vd-tab" id="tab-{prefix}" data-panel="{prefix}"{"" if shown else " hidden"}>'
                + prediction_view(prefix, problem) + "</section>")
    config, run = model_config(model), training_run(model)
    if tab.examples == "digits":
        source, notes = pad(tab), ""
    else:  # under the answer: the classes it knows, the square it read
        reads = canvas_view(prefix, "input", f"{prefix}-reads", "the square the model reads", READS_SIZE, READS_SIZE,
                            scale=False)
        source = photo_input(tab, address)
        notes = (f'<div class="vd-answer-note vd-detail">{note(CLASSES_NOTE, f"{prefix}-classes")}'
                 f"{reads}{note(READS_NOTE)}</div>")
    patch_layer = (f'<img class="vd-patch-layer" hidden alt="" '
                   f'src="{png_data_url(render.patch_grid_layer(config.grid_size, LARGE))}">')
    links = " · ".join(f'<a href="#{prefix}-{name}">{words}</a>' for name, words in DEEPER)
    top = (f'<div class="vd-top"><div class="vd-input">{section(tab.input_title, "vd-step")}{source}</div>'
           f'<div class="vd-patches-step vd-detail">{section(patches_title(config), "vd-step")}'
           + canvas_view(prefix, "patches", f"{prefix}-patches",
                         "the input cut into numbered patches; click one to see where it looks", scale=False,
                         extra=patch_layer)
           + note(patches_note(config)) + "</div>"
           + f'<div class="vd-selected">{section(LARGE_TITLE, "vd-step")}{controls(prefix, config.depth, config.heads)}'
           + canvas_view(prefix, "selected", f"{prefix}-selected", "where [CLS] attends in the chosen layer and head")
           + f'</div><div class="vd-prediction">{section(ANSWER_TITLE, "vd-step")}'
           + prediction_view(prefix, tab.prompt) + notes + "</div></div>"
           + f'<nav class="vd-deeper vd-detail" aria-label="Go deeper"><b>Go deeper:</b> {links}</nav>')
    class_picker = (f'<label class="vd-control">Explain the class <select id="{prefix}-explain-class">'
                    f"{options([PREDICTED_CHOICE, *classifier(model).classes])}</select></label>")
    faithfulness = ('<div class="vd-faithfulness"><button type="button" class="vd-score">Score the maps</button>'
                    '<div class="vd-caption" aria-live="polite" '
                    f'data-prompt="{html.escape(caption_html(SCORE_PROMPT))}"></div>'
                    f'<canvas class="vd-live-canvas vd-faithfulness-chart" width="{LARGE}" height="400" role="img" '
                    'aria-label="deletion and insertion curves of each map"></canvas>'
                    '<ul class="vd-faithfulness-key"></ul><div class="vd-faithfulness-verdict" aria-live="polite">'
                    "</div></div>")
    detail = (
        '<div class="vd-detail"><div class="vd-row"><div>' + section(CLS_GRID_TITLE)
        + grid_view(prefix, "cls", f"{prefix}-cls-grid", config, "where [CLS] looks in every layer and head")
        + "</div><div>" + section(ROLLOUT_TITLE) + canvas_view(prefix, "rollout", f"{prefix}-rollout",
                                                               "attention rollout")
        + '</div></div><div class="vd-row"><div>' + section("### Why this class?") + class_picker
        + canvas_view(prefix, "relevance", f"{prefix}-relevance", "class-specific relevance",
                      predicted=PREDICTED_CHOICE)
        + "</div><div>" + section(FAITHFULNESS_TITLE)
        + view(prefix, "faithfulness", faithfulness, f"{prefix}-faithfulness")
        + '</div></div><div class="vd-row"><div>' + section(query_title(None))
        + grid_view(prefix, "query", f"{prefix}-query", config, "where the chosen patch looks in every layer and head")
        + f"</div><div>{training_section(prefix, config, run)}</div></div>"
        + heads_section(prefix, model, config) + export_section(prefix, config) + "</div>")
    return (f'<section class="vd-tab" id="tab-{prefix}" data-panel="{prefix}"{"" if shown else " hidden"}>'
            f"{top}{detail}</section>")


# ---- The Inside-the-model tab --------------------------------------------------------------------------------------

def inside_model_html(choice: str, model: str, found: Insides, data: dict, address: Callable[[str], str],
                      shown: bool) -> str:
    """One model's Inside-the-model views (``data``: inside.write_insides'), its pictures loaded once the tab
    opens (inside.js sets ``src`` from ``data-src``)."""
    g, (width, height) = data["grid"], data["size"]

    def src(name: str) -> str:
        return html.escape(address(f"{INSIDE}/{model}/{name}.png"))

    def figure(name: str, alt: str) -> str:  # none for a picture the weights have no record for
        return (f'<div class="vd-view" id="{INSIDE}-{model}-{name}"><img class="vd-inside-picture" '
                f'data-src="{src(name)}" alt="{html.escape(f"{choice}: {alt}")}"></div>'
                if name in data["pictures"] else "")

    def chart_row(title: str, name: str, text: str) -> str:
        return (f'<div class="vd-row"><div class="vd-wide">{section(title)}{figure(name, title.lstrip("# "))}</div>'
                f"<div>{note(text)}</div></div>")

    return (f'<div class="vd-inside-model" data-model="{model}"{"" if shown else " hidden"}>'
            f'<div class="vd-row"><div>{section("### Patch-embedding filters")}'
            f'{figure("filters", "the patch-embedding filters")}{note(found.filters_note)}</div>'
            f'<div>{section("### How far each head looks")}{figure("distance", "how far each head looks")}'
            f'{note(found.distance_note)}</div></div>'
            f'<div class="vd-row"><div class="vd-wide">{section(POSITIONS_TITLE)}'
            f'<div class="vd-positions-grid">{figure("positions", "position embedding similarities")}'
            f'<span class="vd-positions-mark" style="outline-color: rgb{render.SIMILARITY_MARK}"></span></div></div>'
            '<div><p class="vd-note vd-position-caption"></p>'  # the patch chosen: inside.js
            f'<div class="vd-position-large" role="img" data-src="{src("position")}" style="aspect-ratio: {width} / '
            f'{height}; background-size: {100 * g}% {100 * g}%"></div></div></div>'
            + chart_row("### How far to trust its probabilities", "reliability", found.reliability_note)
            + chart_row("### Which heads matter", "importance", found.importance_note) + "</div>")


def inside_html(insides: dict[str, tuple[Insides, dict]], address: Callable[[str], str]) -> str:
    """The Inside-the-model tab for every model that loads (``insides``: model -> inside.write_insides' answer)."""
    chosen = [(choice, model) for choice, model in INSIDE_MODELS.items() if model in insides]
    radios = "".join(f'<label><input type="radio" name="inside-model" value="{model}"{" checked" if i == 0 else ""}>'
                     f" {html.escape(choice)}</label>" for i, (choice, model) in enumerate(chosen))
    blocks = "".join(inside_model_html(choice, model, *insides[model], address, i == 0)
                     for i, (choice, model) in enumerate(chosen))
    return (f'<section class="vd-tab" id="tab-{INSIDE}" data-panel="{INSIDE}" hidden>{section(INSIDE_INTRO)}'
            f'<fieldset id="inside-model" class="vd-control"><legend>Model</legend>{radios}</fieldset>{blocks}'
            "</section>")


# ---- The page --------------------------------------------------------------------------------------------------------

def page_html(insides: dict[str, tuple[Insides, dict]], address: Callable[[str], str]) -> str:
    """The whole page, in ``<main id="vd-app">``: the header (the title, talk mode's keys and toggle), the intro,
    the tabs, the status lines, each tab of an image, and the Inside-the-model tab."""
    tabs = "".join(f'<button type="button" role="tab" data-tab="{tab.prefix}" '
                   f'aria-selected="{str(i == 0).lower()}">{html.escape(tab.label)}</button>'
                   for i, tab in enumerate(TABS))
    tabs += (f'<button type="button" role="tab" data-tab="{INSIDE}" aria-selected="false">'
             f"{html.escape(INSIDE_LABEL)}</button>")
    return (f'<main id="vd-app"><header id="vd-header"><h1>{html.escape(TITLE)}</h1>'
            f'<p id="vd-keys">{caption_html(KEYS_LINE)}</p>'
            '<label id="talk-mode"><input type="checkbox"> Talk mode</label></header>'
            f'<p id="vd-intro">{html.escape(INTRO)}</p><nav class="vd-tabs" role="tablist">{tabs}</nav>'
            '<p class="vd-status" id="vd-status" hidden></p>'
            '<p class="vd-note vd-detail" id="vd-offline" aria-live="polite" hidden></p>'
            + "".join(tab_html(tab, address, i == 0) for i, tab in enumerate(TABS))
            + inside_html(insides, address) + "</main>")
