"""Gradio components made for this app: inputs that reach Python undecoded, and picture outputs cached once."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import processing_utils
from gradio.data_classes import ImageData
from gradio.utils import get_upload_folder
from PIL import Image

from vit_demo import render
from vit_demo.atomic import atomic_write

LARGE = 336  # pixels a side of the large views
THUMB = 96  # pixels a side of a layer x head grid's tiles (render.attention_grid's default)
VIEW_BUTTONS = ["fullscreen", "download"]  # no "share": nothing leaves the server
VIEW_FORMAT = "jpeg"  # encodes in ~1 ms where WebP (Gradio's default) took ~30 ms for the layer x head grid
LIVE_VIEW_JS = (Path(__file__).resolve().parents[1] / "assets" / "live_view.js").read_text(encoding="utf-8")


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


def live_canvas(elem_id: str, prefix: str, view: str, description: str) -> gr.HTML:
    """A view the page draws itself from numbers (``vit_demo/live_view.py``, ``assets/live_view.js``) in tab
    ``prefix``: ``view`` "selected" (the large view: its value is the image's numbers) or "map" (its value is one
    map over the same image). ``description``: what it shows, for screen readers."""
    return gr.HTML("", html_template=(f'<canvas class="vd-live-canvas" width="{LARGE}" height="{LARGE}" role="img" '
                                      f'aria-label="{description}"></canvas>'),
                   js_on_load=LIVE_VIEW_JS.replace("__PREFIX__", prefix).replace("__VIEW__", view),
                   elem_id=elem_id, elem_classes=["vd-view", "vd-live"], padding=False)


def live_grid(elem_id: str, prefix: str, layers: int, heads: int, description: str, visible: bool = True) -> gr.HTML:
    """A layer x head grid the page draws itself (``live_canvas``'s "grid" view): ``render.attention_grid``'s frame
    as the canvas' background, the tiles drawn from the tab's numbers (value "") or from those of another model
    (a training snapshot: ``live_view.grid_payload``)."""
    frame, origins = render.attention_grid_layout(layers, heads)
    data = base64.b64encode(processing_utils.encode_pil_to_bytes(frame, "png")).decode()
    return gr.HTML("", html_template=(
        f'<canvas class="vd-live-canvas vd-live-grid" width="{frame.width}" height="{frame.height}" role="img" '
        f'aria-label="{description}" data-thumb="{THUMB}" data-origins="{json.dumps(origins).replace(" ", "")}" '
        f'style="background: url(data:image/png;base64,{data}) 0 0 / 100% 100% no-repeat"></canvas>'),
        js_on_load=LIVE_VIEW_JS.replace("__PREFIX__", prefix).replace("__VIEW__", "grid"),
        elem_id=elem_id, elem_classes=["vd-view", "vd-live"], padding=False, visible=visible)
