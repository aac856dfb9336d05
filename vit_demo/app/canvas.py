"""The light drawing canvas of the app: a ``gr.HTML`` widget with its own JS (``assets/canvas.js``).

Gradio's stock Sketchpad uploads the full canvas image after each stroke (0.8-2.4 s here); this canvas reads a
112x112 greyscale copy while the user draws, in the page (preprocessing and the model: assets/page/source.js), so
the prediction keeps up, and hands the answer to the views itself. Where the page can't run the model, its server
function ``forward`` runs it (vit_demo/app/forward.py: one small request outside Gradio's queue).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from vit_demo.app.components import ASSETS
from vit_demo.data.preprocess import DRAWING_PIXELS, PENS



def pad_html(examples: list[Path], first: Path | None, panel: str, page_model: dict | None = None) -> str:
    """The canvas' HTML: the drawing surface, the pens, Clear, and the examples (``first``: shown at the start);
    ``page_model``: the tab's source and model (app/page_model.py), None: no model to read drawings with."""
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


def drawing_canvas(examples: list[Path], forward: Callable[[dict], dict], first: Path | None = None,
                   elem_id: str = "canvas", panel: str = "digit", page_model: dict | None = None) -> gr.HTML:
    """The canvas component. As the pen moves and when it lifts, it hands the drawing to the tab's source (in
    ``page_model``, app/page_model.py; None: no model, nothing is read), whose forward pass runs in the page or
    through the server function ``forward``, and the answer to tab ``panel``'s views (``assets/page/live.js``).
    ``first``: the example it shows at the start, until the pen touches it."""
    return gr.HTML(
        value="",
        html_template=pad_html(examples, first, panel, page_model),
        server_functions=[forward],
        css_template=(ASSETS / "canvas.css").read_text(encoding="utf-8"),
        js_on_load=(ASSETS / "canvas.js").read_text(encoding="utf-8"),
        elem_id=elem_id,
    )
