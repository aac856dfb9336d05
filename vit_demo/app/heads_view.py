"""What each head does, for the image in hand (``vit_demo/interpret/heads/`` in the page): a board of toggles that
switches heads off, the answer forming layer by layer (the logit lens), and two-image activation patching.

The page computes and draws all of it itself (``assets/page/views/``: board.js, lens.js, patching.js, on the tab's
store, ``assets/page/store.js``, from the source's answers, ``assets/page/source.js``), from the graphs' raw outputs:
the graph takes the heads switched off (mean- or zero-ablated), gives the lens at every token, and the patching
graphs give each head's and each residual-stream position's share of the logit difference restored. Here: the
section's layout, and which heads the board marks.
"""

from __future__ import annotations

import base64
import html
import json

import gradio as gr
import numpy as np
import torch

from vit_demo.app.captions import caption_html
from vit_demo.app.components import ASSETS, colour_scale, live_script
from vit_demo.app.service import ablation_means, classifier
from vit_demo.interpret import heads
from vit_demo.model import ViTConfig
from vit_demo.pictures import render
from vit_demo.weights import WeightsError

HEADS_CSS = (ASSETS / "heads_view.css").read_text(encoding="utf-8")
LENS_TILE = 64  # pixels a side of each layer's per-patch lens map
RESIDUAL_AT_ONCE_WIDTH = 4096  # dim x tokens at most for the residual grid to come with the heads' (see below)
MARKED_HEADS = 3  # the board marks this many heads: those that matter most by the weights' head_importance.json


def residual_at_once(config: ViTConfig) -> bool:
    """Whether the residual stream's patching grid comes with the heads' at once: yes for the digits' model (the two
    together take some 0.5 s in the page, 0.16 s in PyTorch), no for the photos' (some 12 s in the page against 1.3 s
    for the heads alone: benchmarks/page_patching.py), whose page asks for it on a button that says what it costs."""
    return config.dim * config.num_tokens <= RESIDUAL_AT_ONCE_WIDTH


# ---- The section in the page -----------------------------------------------------------------------------------

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


def diverging_scale() -> str:
    """HTML: the patching grids' colour scale, from -1 (blue) through 0 (white, the corrupt run) to 1 (red, the
    clean run); values beyond are drawn as the ends."""
    return colour_scale("−1", "1 (clean)", render.DIVERGING, "vd-scale vd-diverging")


def heads_html(prefix: str, view: str, template: str, elem_id: str) -> gr.HTML:
    """One of the section's views: ``template``'s HTML, drawn by the live view ``view`` (``assets/page/views/``)."""
    return gr.HTML("", html_template=template, js_on_load=live_script(prefix, view),
                   css_template=HEADS_CSS, elem_id=elem_id, elem_classes=["vd-view", "vd-live", "vd-heads"],
                   padding=False)


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


def board_template(prefix: str, config: ViTConfig, means: bool, matter: dict | None = None) -> str:
    """The board's HTML: a toggle per head and layer (assets/page/views/board.js draws them), the heads that matter
    (``matter``: which_heads_matter's, marked), mean or zero ablation (mean only where the weights have ``means``),
    all heads on, and the logit difference."""
    about = f' data-matter="{html.escape(json.dumps(matter))}"' if matter else ""
    return (f'<div class="vd-board" data-layers="{config.depth}" data-heads="{config.heads}" '
            f'data-means="{str(means).lower()}"{about} role="group" aria-label="switch heads off"></div>'
            '<div class="vd-board-bar"><label><input type="radio" name="vd-mode-' + prefix + '" value="mean"'
            f'{" checked" if means else " disabled"}> mean-ablation</label><label><input type="radio" '
            f'name="vd-mode-{prefix}" value="zero"{"" if means else " checked"}> zero-ablation</label>'
            '<button type="button" class="vd-heads-reset">All heads on</button></div>'
            '<div class="vd-caption vd-board-status" aria-live="polite"></div>'
            '<div class="vd-logit-diff"></div>')


def lens_template(config: ViTConfig) -> str:
    """The lens strip's HTML: [CLS]'s answer after each layer, and a canvas for the per-patch maps."""
    return ('<div class="vd-caption" aria-live="polite"></div><div class="vd-lens-strip"></div>'
            f'<canvas class="vd-live-canvas vd-lens-maps" width="{config.depth * (LENS_TILE + 6) - 6}" '
            f'height="{LENS_TILE}" role="img" aria-label="per patch, the probability of the answer after each '
            f'layer"></canvas>{colour_scale("0", "1 (the answer for sure)")}')


def build_heads(prefix: str, model: str, config: ViTConfig) -> None:
    """The section "What each head does" of a tab: the board beside the lens strip, then the patching grids; talk mode
    hides it with the other detail views."""
    means = ablation_means_or_none(model) is not None
    gr.Markdown("## What each head does", elem_classes="vd-heads-title")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            gr.Markdown(KNOCKOUT_TITLE)
            heads_html(prefix, "board", board_template(prefix, config, means, which_heads_matter(model)),
                       f"{prefix}-board")
            gr.Markdown(KNOCKOUT_NOTE, elem_classes="vd-note")
        with gr.Column(scale=1, min_width=300):
            gr.Markdown(LENS_TITLE)
            heads_html(prefix, "lens", lens_template(config), f"{prefix}-lens")
            gr.Markdown(LENS_NOTE, elem_classes="vd-note")
    gr.Markdown(PATCHING_TITLE)
    heads_html(prefix, "patching", patching_template(config), f"{prefix}-patching")


def patching_template(config: ViTConfig) -> str:
    """The patching view's HTML: the two images kept (clean and corrupt), the status, the residual stream's button
    (where its grid doesn't come with the heads' at once: ``residual_at_once``), how to read it, and the grids."""
    return (
        f'<div class="vd-patching" data-residual="{str(residual_at_once(config)).lower()}" '
        f'data-colours="{base64.b64encode(render.colormap(render.DIVERGING).tobytes()).decode()}">'
        '<div class="vd-patching-pair">'
        + "".join(f'<div class="vd-slot" data-slot="{slot}"><canvas class="vd-slot-image" width="96" height="96" '
                  f'role="img" aria-label="the {slot} image"></canvas><div><b>{slot.capitalize()}</b>'
                  f'<div class="vd-slot-label">none yet</div><button type="button" class="vd-use" '
                  f'data-slot="{slot}">Use this image as {slot}</button></div></div>' for slot in ("clean", "corrupt"))
        + '</div><div class="vd-caption vd-patching-status" aria-live="polite"></div>'
        '<button type="button" class="vd-residual" hidden>Patch the residual stream too (a few seconds on the '
        "server, some 15 in the page)</button>"
        f'<div class="vd-note vd-patching-how">{caption_html(PATCHING_HOW)}</div>'
        '<div class="vd-patching-grids"></div>'
        f'{diverging_scale()}</div>')


def ablation_means_or_none(model: str) -> torch.Tensor | None:
    """``ablation_means``, or None where the model can't be loaded (the tab says why elsewhere)."""
    try:
        return ablation_means(model)
    except WeightsError:
        return None
