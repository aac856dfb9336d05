"""The page's layout: page.html, a Jinja template that holds the whole page and its words (the header, the tabs, every
view's place and template, the Inside tab), filled here with what each tab's model needs (its shape, classes,
examples, the pictures a view is drawn over). The static Space writes it into index.html
(vit_demo/deploy/static_space.py), the Gradio app serves it in one ``gr.HTML`` (vit_demo/app/demo.py). Its scripts
(assets/page/host.js) mount each view (``data-view``: a module of assets/page/views/, listed in live.js) and compute
every number from the model's raw outputs (source.js).

Every file the page loads is named through ``address`` (a path inside the static site -> where the browser finds
it: the same path in the static Space, Gradio's file route in the app).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
import markupsafe
import numpy as np
from PIL import Image

from vit_demo.app.service import (ADDED, ablation_means, classifier, model_config, model_problem, training_run,
                                  weights_folder)
from vit_demo.data.preprocess import DRAWING_PIXELS, PENS
from vit_demo.interpret import heads
from vit_demo.interpret.faithfulness import first_map
from vit_demo.model import ViTConfig
from vit_demo.onnx.patching import patching_kinds
from vit_demo.page.captions import caption_html
from vit_demo.pictures import render, slides
from vit_demo.weights import WeightsInfo

if TYPE_CHECKING:
    from vit_demo.page.inside import Insides

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                               undefined=jinja2.StrictUndefined)
TEMPLATES.filters["markdown"] = lambda text: markupsafe.Markup(caption_html(text))  # a note's words (captions.py)
LARGE = 336  # pixels a side of the large views' canvases
THUMB = 96  # pixels a side of a layer x head grid's tiles (render.attention_grid's default)
GRID_WIDTH = 480  # pixels on screen a layer x head grid takes at most (the shipped models' grids: 5 and 7 columns)...
GRID_TILE = 60  # ...or more, where that would draw its tiles smaller than this (a model of more heads: 12 of them)
LENS_TILE = 64  # pixels a side of each layer's per-patch lens map
RESIDUAL_AT_ONCE_WIDTH = 4096  # dim x tokens at most for the residual grid to come with the heads' (see below)
MARKED_HEADS = 3  # the board marks this many heads: those that matter most by the weights' head_importance.json
READS_SIZE = 128  # pixels a side of the picture of what the photo model reads
INSIDE = "inside"  # the Inside-the-model tab's name, and the folder of its pictures


@dataclasses.dataclass(frozen=True)
class Tab:
    """One of the page's tabs of an image."""

    prefix: str  # in its views' element ids
    label: str  # its button's
    model: str
    prompt: str  # what it says until there is an image
    blank: str  # what it says of a blank image
    first_example: str  # the example it starts with
    examples: str  # the folder of examples/ it offers
    outside: bool = True  # it offers examples/outside's too ("Also try": things the shipped models were never taught)

    def example_files(self) -> list[Path]:
        return sorted(p for p in (EXAMPLES / self.examples).iterdir() if p.suffix in (".png", ".jpg"))

    def tries(self) -> dict[Path, str]:  # "Also try": things its model was never taught -> what each teaches
        folder = EXAMPLES / "outside" / self.examples
        if not self.outside:
            return {}
        return {folder / f: lesson for f, lesson in json.loads((folder / "lessons.json").read_text("utf-8")).items()}

    def first(self) -> Path | None:
        return next((p for p in self.example_files() if p.stem == self.first_example), None)


DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."
PHOTO_PROMPT = "Upload a photo, or pick an example below."
PHOTO_BLANK = "This image is blank: there is nothing to classify."
TABS = (Tab("digit", "Draw a digit (MNIST)", "mnist", DRAW_PROMPT, DRAW_PROMPT, "2", "digits"),
        Tab("photo", "Upload a photo (CIFAR-10)", "cifar10", PHOTO_PROMPT, PHOTO_BLANK, "horse", "photos"))


def added_tab(model: str) -> Tab:
    """The tab of a model served beside the shipped ones (service.add_model): a photo's, large photos its examples."""
    prefix = "m-" + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")  # (an element id's start, and the page's key)
    return Tab(prefix, f"Upload a photo ({model})", model, PHOTO_PROMPT, PHOTO_BLANK, "chelsea", "large-photos",
               outside=False)


def tabs() -> tuple[Tab, ...]:
    """The page's tabs of an image: the shipped models', then one for each model added."""
    return (*TABS, *(added_tab(model) for model in ADDED))


INSIDE_MODELS = {"Digits (MNIST)": "mnist", "Photos (CIFAR-10)": "cifar10"}


def png_data_url(picture: Image.Image) -> str:
    return "data:image/png;base64," + base64.b64encode(slides.png_bytes(picture)).decode()


def colour_stops(cmap: str) -> str:
    """A colour map as a CSS gradient's stops (the colour scale under a view)."""
    table = render.colormap(cmap)  # (256, 3)
    return ", ".join(f"rgb{tuple(int(v) for v in table[round(255 * i / 8)])} {100 * i / 8:g}%" for i in range(9))


def grid_geometry(config: ViTConfig) -> dict:
    """A layer x head grid's canvas: ``render.attention_grid``'s frame (a data URL, for its background), its size,
    the widest it may be on screen (as its column allows) and each tile's origin (``data``, for the page)."""
    frame, origins = render.attention_grid_layout(config.depth, config.heads)
    return {"frame": png_data_url(frame), "width": frame.width, "height": frame.height,
            "widest": max(GRID_WIDTH, frame.width * GRID_TILE // THUMB),
            "data": {"thumb": THUMB, "origins": json.dumps(origins).replace(" ", "")}}


def residual_at_once(config: ViTConfig) -> bool:
    """Whether the residual stream's patching grid comes with the heads' at once: yes for the digits' model (the two
    together take some 0.5 s in the page, 0.16 s in PyTorch), no for the photos' (some 12 s in the page against 1.3 s
    for the heads alone: benchmarks/page_patching.py), whose page asks for it on a button that says what it costs."""
    return config.dim * config.num_tokens <= RESIDUAL_AT_ONCE_WIDTH


def which_heads_matter(model: str) -> dict | None:
    """What the board says of the heads (from the weights' head_importance.json; None where it was never measured):
    the MARKED_HEADS most important ("marked", as layer * heads + head) and the most test accuracy one head alone
    switched off costs ("worst_drop", a share), over how many images ("images") of which split ("split")."""
    record = heads.read_head_importance(classifier(model).info.folder)
    if record is None:
        return None
    importance, accuracy = np.asarray(record["importance"]), np.asarray(record["accuracy"])  # (L, H) each
    marked = np.argsort(-importance.ravel(), kind="stable")[:MARKED_HEADS]
    return {"marked": sorted(int(i) for i in marked), "images": record["images"], "split": record["split"],
            "worst_drop": round(max(float(record["baseline"] - accuracy.min()), 0.0), 4)}


def reads_text(info: WeightsInfo) -> str:
    """How a photo becomes what the model reads, in words (its weights' preprocessing)."""
    p, size = info.preprocessing, info.config.image_size
    if p.method == "resize_crop":
        resize = f"the shorter side resized to {p.resize} pixels" if isinstance(p.resize, int) else \
            f"resized to {p.resize[1]} x {p.resize[0]} pixels"
        source = f", as {info.imported['source']} was trained to read photos" if info.imported else ""
        return (f"It is {resize} ({p.interpolation}) and the centre {size} x {size} square kept{source}: a wide or tall "
                "photo loses its edges.")
    return (f"It is shrunk to {size} x {size} pixels, as CIFAR-10's photos are: the shorter side scaled down and the "
            "centre square kept, so a wide or tall photo loses its edges.")


def tab_data(tab: Tab, address: Callable[[str], str]) -> dict:
    """What page.html needs to lay out ``tab``: its model's shape, classes and training run, its examples (a
    drawing's inlined, a photo's addressed), and what its views are drawn over; ``problem`` alone where the model
    can't load (the tab says why, and how to make one)."""
    if problem := model_problem(tab.model):
        return {"prefix": tab.prefix, "label": tab.label, "problem": caption_html(problem)}
    config, run, drawing = model_config(tab.model), training_run(tab.model), tab.examples == "digits"
    matter = which_heads_matter(tab.model)

    def src(p: Path) -> str:
        if drawing:  # a few hundred bytes each: inlined, so the digits' tab needs no request
            return "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()
        return address(p.relative_to(EXAMPLES.parent).as_posix())

    first, info = tab.first(), classifier(tab.model).info
    export_thumb = render.attention_grid_thumb(config.heads, slides.SLIDE_WIDTH)
    return {
        "prefix": tab.prefix, "label": tab.label, "problem": None, "drawing": drawing, "config": config, "run": run,
        "prompt": caption_html(tab.prompt), "classes": list(info.classes), "reads": reads_text(info),
        "unfamiliar": info.unfamiliar is not None,
        "head_names": [f"head {h + 1}" for h in range(config.heads)],
        "examples": [{"name": p.stem, "src": src(p), "first": p == first} for p in tab.example_files()],
        "tries": [{"name": p.stem, "src": src(p), "lesson": lesson} for p, lesson in tab.tries().items()],
        "first": src(first) if first else None, "grid": grid_geometry(config),
        "patch_layer": png_data_url(render.patch_grid_layer(config.grid_size, LARGE)),
        "means": ablation_means(tab.model) is not None,  # the weights hold the heads' means (mean-ablation)
        "matter": json.dumps(matter) if matter else None, "map": first_map(weights_folder(tab.model)),
        # the residual stream's patching: "true" with the heads' at once, "false" on its button, "none" where the model
        # has no residual patching graph (patching_kinds: too large to run in the page)
        "residual": str(residual_at_once(config)).lower() if "residual" in patching_kinds(config) else "none",
        "export_grid": json.dumps(render.attention_grid_geometry(config.depth, config.heads, export_thumb))}


def inside_data(model: str, found: Insides, data: dict, address: Callable[[str], str]) -> dict:
    """What page.html needs of one model's Inside views (``data``: inside.write_insides')."""
    choice = next(choice for choice, name in INSIDE_MODELS.items() if name == model)
    return {**data, "name": model, "choice": choice, "found": found, "config": model_config(model),
            "src": lambda name: address(f"{INSIDE}/{model}/{name}.png")}


def page_html(insides: dict[str, tuple[Insides, dict]], address: Callable[[str], str]) -> str:
    """The whole page, in ``<main id="vd-app">`` (``insides``: model -> inside.write_insides' answer, for the
    Inside-the-model tab of every model that loads). The template's line breaks between tags go: they only lay out
    its source."""
    page = TEMPLATES.get_template("page.html").render(
        tabs=[tab_data(tab, address) for tab in tabs()],
        insides=[inside_data(model, *insides[model], address) for model in INSIDE_MODELS.values()
                 if model in insides],
        large=LARGE, reads_size=READS_SIZE, lens_tile=LENS_TILE, drawing_pixels=DRAWING_PIXELS, pens=PENS,
        heat_stops=colour_stops(render.HEAT), diverging_stops=colour_stops(render.DIVERGING),
        similarity_mark=render.SIMILARITY_MARK,
        diverging_colours=base64.b64encode(render.colormap(render.DIVERGING).tobytes()).decode())
    return re.sub(r">\s*\n\s*<", "><", page).strip()
