"""The light drawing canvas of the app: a ``gr.HTML`` widget with its own JS (``assets/canvas.js``).

Gradio's stock Sketchpad uploads the full canvas image after each stroke (0.8-2.4 s here); this
canvas sends a 112x112 greyscale copy as base64 while the user draws, so the prediction keeps up. It sends it to a
server function (one small request outside Gradio's queue, some 2 ms of server time less than a queued event's) and
hands the answer to the views itself.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
from collections.abc import Callable
from pathlib import Path

import gradio as gr
import numpy as np

from vit_demo.app.components import ASSETS
from vit_demo.data.preprocess import CANVAS_SIZE, DRAWING_PIXELS, PENS, InputError



def pad_html(examples: list[Path], first: Path | None, panel: str, page_model: dict | None = None) -> str:
    """The canvas' HTML: the drawing surface, the pens, Clear, and the examples (``first``: shown at the start);
    ``page_model``: the model the page runs itself (app/page_model.py), None: the server reads every drawing."""
    pens = "".join(
        f'<button type="button" class="vd-pen" data-width="{width}" aria-pressed="{str(i == 1).lower()}">{name}</button>'
        for i, (name, width) in enumerate(PENS)
    )
    thumbs = "".join(
        f'<button type="button" title="example: {html.escape(p.stem)}"{" data-first" if p == first else ""}>'
        f'<img alt="example {html.escape(p.stem)}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        "</button>"
        for p in examples
    )
    return (
        f'<div class="vd-pad" data-panel="{panel}"'
        + (f' data-page-model="{html.escape(json.dumps(page_model))}"' if page_model else "") + ">"
        f'<canvas class="vd-draw" width="{DRAWING_PIXELS}" height="{DRAWING_PIXELS}" '
        'aria-label="drawing canvas: draw a digit with the mouse, a finger or a pen"></canvas>'
        f'<div class="vd-bar">{pens}<button type="button" class="vd-clear">Clear</button></div>'
        f'<div class="vd-examples"><span>Examples:</span>{thumbs}</div>'
        "</div>"
    )


def drawing_canvas(examples: list[Path], stroke: Callable[[dict], dict], first: Path | None = None,
                   elem_id: str = "canvas", panel: str = "digit", page_model: dict | None = None) -> gr.HTML:
    """The canvas component. As the pen moves and when it lifts, it hands the drawing (as base64, see
    :func:`decode_drawing`) to the page's own model (``page_model``, where given and the browser can run it) or to
    its server function ``stroke``, and the answer to tab ``panel``'s views (``assets/page/live.js``). ``first``: the
    example it shows at the start, until the pen touches it."""
    return gr.HTML(
        value="",
        html_template=pad_html(examples, first, panel, page_model),
        server_functions=[stroke],
        css_template=(ASSETS / "canvas.css").read_text(encoding="utf-8"),
        js_on_load=(ASSETS / "canvas.js").read_text(encoding="utf-8"),
        elem_id=elem_id,
    )


def decode_drawing(value: object) -> np.ndarray | None:
    """The canvas value -> a (112, 112) uint8 ink image (ink is bright), or None for an empty canvas."""
    if not value:
        return None
    if not isinstance(value, str):
        raise InputError("the drawing must be a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("the drawing is not valid base64") from None
    if len(raw) != CANVAS_SIZE * CANVAS_SIZE:
        raise InputError(f"the drawing must be {CANVAS_SIZE}x{CANVAS_SIZE} bytes, not {len(raw)}")
    return np.frombuffer(raw, dtype=np.uint8).reshape(CANVAS_SIZE, CANVAS_SIZE)
