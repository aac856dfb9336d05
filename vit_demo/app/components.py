"""Gradio components made for this app: inputs that reach Python undecoded, and picture outputs cached once."""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import processing_utils
from gradio.data_classes import ImageData
from gradio.utils import get_upload_folder
from PIL import Image

from vit_demo.app.captions import caption_html
from vit_demo.atomic import atomic_write
from vit_demo.pictures import render

LARGE = 336  # pixels a side of the large views (the page's canvas, the server's pictures)
THUMB = 96  # pixels a side of a layer x head grid's tiles (render.attention_grid's default)
GRID_WIDTH = 480  # pixels on screen a layer x head grid takes at most (the shipped models' grids: 5 and 7 columns)...
GRID_TILE = 60  # ...or more, where that would draw its tiles smaller than this (a model of more heads: 12 of them)
VIEW_BUTTONS = ["fullscreen", "download"]  # no "share": nothing leaves the server
VIEW_FORMAT = "jpeg"  # encodes in ~1 ms where WebP (Gradio's default) took ~30 ms for the layer x head grid
ASSETS = Path(__file__).resolve().parent / "assets"  # the page's JS and CSS, and its vendored runtime
LIVE_VIEWS = ASSETS / "page" / "live.js"  # the live views' module: every view the page draws itself


class UndecodedImage(gr.Image):
    """An image input whose upload reaches Python as a file path, undecoded.

    Gradio's own preprocessing opens images with PIL before our code runs, so a bad file would fail
    there with a generic error; this way only our decoder, with its size limits, reads uploads.
    """

    is_template = True  # use gr.Image's frontend

    def preprocess(self, payload):
        return None if payload is None else payload.path


class UndecodedSketch(gr.ImageEditor):
    """A sketch input (an ImageEditor value) whose composite reaches Python as a file path, undecoded."""

    is_template = True  # use gr.ImageEditor's frontend

    def preprocess(self, payload):
        if payload is None:
            return None
        image = payload.composite or payload.background
        return None if image is None else image.path


def cached_file(data: bytes, name: str) -> Path:
    """``data`` as a file called ``name`` in Gradio's cache, written once and atomically (see ``CachedImage``); the
    cache's sweep deletes it with the other pictures."""
    path = Path(get_upload_folder()) / processing_utils.hash_bytes(data) / name  # where every component caches
    try:
        os.utime(path)  # Blocks(delete_cache=...) ages files by ctime: a file handed out again is fresh
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data))
    return path


class CachedImage(gr.Image):
    """A picture output that is written to Gradio's cache once, atomically.

    ``gr.Image`` rewrites a cached picture in place whenever the same picture is made again (two
    users drawing the same digit), so a download of the earlier copy that is under way can read a
    truncated file: the stock app drops such requests under load. Here a picture already in the
    cache is reused, and a new one appears under its final name complete or not at all.
    """

    is_template = True  # use gr.Image's frontend

    def postprocess(self, value: Image.Image | None) -> ImageData | None:
        if value is None:
            return None
        path = cached_file(processing_utils.encode_pil_to_bytes(value, self.format), f"image.{self.format}")
        return ImageData(path=str(path), orig_name=path.name)


def view_image(elem_id: str, format: str = VIEW_FORMAT, **layout: Any) -> CachedImage:
    """A picture made by the server, never edited by the user (``format="png"`` for charts: crisp lines and text)."""
    return CachedImage(show_label=False, type="pil", format=format, interactive=False, elem_id=elem_id,
                       elem_classes="vd-view", **layout)


def png_data_url(picture: Image.Image) -> str:
    return "data:image/png;base64," + base64.b64encode(processing_utils.encode_pil_to_bytes(picture, "png")).decode()


def colour_scale(low: str = "none", high: str = "most (each map's own maximum)", cmap: str = render.HEAT,
                 classes: str = "vd-scale") -> str:
    """HTML: a colour scale (by default every overlay's) as a bar, from ``low`` to ``high`` (by default: none to the
    most, each map scaled to its own maximum)."""
    table = render.colormap(cmap)  # (256, 3)
    stops = ", ".join(f"rgb{tuple(int(v) for v in table[round(255 * i / 8)])} {100 * i / 8:g}%" for i in range(9))
    return (f'<div class="{classes}" aria-hidden="true"><span>{html.escape(low)}</span>'
            f'<span class="vd-scale-bar" style="background: linear-gradient(to right, {stops})"></span>'
            f"<span>{html.escape(high, quote=False)}</span></div>")


def live_canvas(elem_id: str, prefix: str, view: str, description: str, width: int = LARGE, height: int = LARGE,
                scale: bool = True, extra: str = "", style: str = "", visible: bool = True, **data: str) -> gr.HTML:
    """A view the page draws itself from the tab's numbers (``assets/page/live.js``, which lists the ``view``s, and
    source.js, which computes the numbers) in tab ``prefix``: a caption, a canvas ``width`` x ``height``, and the
    colour scale (``scale``). ``description``: what it shows, for screen readers; ``extra``: more HTML after the
    canvas; ``style``: the canvas' CSS; ``data``: the canvas' data-* attributes. The large view's value holds the
    tab's numbers, which the page sets."""
    attributes = "".join(f' data-{name}="{html.escape(value)}"' for name, value in data.items())
    template = (f'<div class="vd-caption" aria-live="polite"></div><canvas class="vd-live-canvas" width="{width}" '
                f'height="{height}" role="img" aria-label="{description}"{attributes} style="{style}"></canvas>{extra}'
                f'{colour_scale() if scale else ""}')
    return gr.HTML("", html_template=template, js_on_load=live_script(prefix, view),
                   elem_id=elem_id, elem_classes=["vd-view", "vd-live"], padding=False, visible=visible)


def served(path: Path) -> str:
    """Where the app serves a file of its assets or of a weights folder (``gr.set_static_paths``, page_model.py):
    Gradio's file route, relative to the page."""
    return f"gradio_api/file={path.resolve().as_posix()}"


def live_script(prefix: str, view: str) -> str:
    """A live view's js_on_load: view ``view`` of tab ``prefix``, mounted by ``assets/page/live.js`` (which lists the
    views, one module each) with what Gradio hands the script."""
    address = json.dumps(served(LIVE_VIEWS))
    return (f"import(new URL({address}, document.baseURI).href).then(({{ mount }}) => "
            f"mount({{ element, props, watch }}, {json.dumps(prefix)}, {json.dumps(view)}));")


def live_prediction(prefix: str, prompt: str) -> gr.HTML:
    """The prediction, drawn in the page from the tab's numbers (``live_canvas``'s "prediction"): the notice above
    an image the model should not be trusted with, the one that says which heads are switched off (the model the
    views show), the top class large, the top three classes' probabilities as bars, and the info line under them
    (``prompt`` until there is an image)."""
    prompt_html = html.escape(caption_html(prompt))
    template = (f'<div class="vd-notice" id="{prefix}-notice" hidden></div>'
                f'<div class="vd-ablated" id="{prefix}-ablated" hidden></div>'
                f'<div class="vd-label" id="{prefix}-label"><span class="vd-label-title">Prediction</span>'
                '<div class="vd-top-class" aria-live="polite"></div><div class="vd-probs"></div></div>'
                f'<div class="vd-info" id="{prefix}-info" data-prompt="{prompt_html}"></div>')
    return gr.HTML("", html_template=template, js_on_load=live_script(prefix, "prediction"),
                   elem_id=f"{prefix}-prediction", elem_classes=["vd-live", "vd-prediction-view"], padding=False)


def live_grid(elem_id: str, prefix: str, view: str, layers: int, heads: int, description: str,
              visible: bool = True, **data: str) -> gr.HTML:
    """A layer x head grid the page draws itself (``live_canvas``): ``render.attention_grid``'s frame as the canvas'
    background, a tile per layer and head drawn over it."""
    frame, origins = render.attention_grid_layout(layers, heads)
    widest = max(GRID_WIDTH, frame.width * GRID_TILE // THUMB)  # on screen, as its column allows
    return live_canvas(elem_id, prefix, view, description, frame.width, frame.height, visible=visible,
                       style=f"max-width: min(100%, {widest}px); background: url({png_data_url(frame)}) 0 0 / "
                             "100% 100% no-repeat",
                       thumb=str(THUMB), origins=json.dumps(origins).replace(" ", ""), **data)


def live_patches(elem_id: str, prefix: str, grid: int, description: str) -> gr.HTML:
    """The input cut into numbered patches, drawn in the page (``live_canvas``'s "patches"): the patch grid's lines
    and numbers (``render.patch_grid_layer``) go over the input."""
    layer = f'<img class="vd-patch-layer" hidden alt="" src="{png_data_url(render.patch_grid_layer(grid, LARGE))}">'
    return live_canvas(elem_id, prefix, "patches", description, scale=False, extra=layer)
