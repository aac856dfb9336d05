"""What each head does, for the image in hand (``vit_demo/interpret/heads/`` in the page): a board of toggles that
switches heads off, the answer forming layer by layer (the logit lens), and two-image activation patching.

The page draws all of it itself (``assets/page/views/``: board.js, lens.js, patching.js, on the tab's store,
``assets/page/store.js``), from the answers of three server functions, each one small request outside
Gradio's queue computed from the pixels the page sends back, and kept in the page:

- ``knockout``: the image with the heads the board switched off (mean- or zero-ablated), one batched forward pass
  of the intact and the ablated model: the ablated prediction, the logit difference (the intact model's class
  against its runner-up) before and after, and the ablated run's [CLS] maps and rollout, in the form of the
  stroke's own numbers, so that the prediction and the attention views redraw for the knocked-out model (the
  query, relevance and lens views ask their own server functions with the same heads off: ``service.heads_off``);
- ``lens``: what [CLS] would answer after each layer, and per patch, where the class is written;
- ``patching``: for two images the page kept (clean and corrupt), how much of the logit difference each head and
  each position of the residual stream restores, both directions.

A pen stroke's answer is untouched: none of this is computed until the page asks for it.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import threading
import time
from collections.abc import Callable

import gradio as gr
import numpy as np
import torch

from vit_demo.app import page_numbers
from vit_demo.app.components import ASSETS, colour_scale, live_asker, live_script
from vit_demo.app.service import (HeadsOff, ablation_means, classifier, heads_off, input_shape, knockout,
                                  switched_off)
from vit_demo.app.serving import SERVER_FUNCTION_SLOTS
from vit_demo.app.zerogpu import model_work
from vit_demo.interpret import heads
from vit_demo.interpret.calibration import probabilities
from vit_demo.model import ViTConfig
from vit_demo.pictures import render
from vit_demo.weights import WeightsError

HEADS_CSS = (ASSETS / "heads_view.css").read_text(encoding="utf-8")
LENS_TILE = 64  # pixels a side of each layer's per-patch lens map
PATCHING = threading.BoundedSemaphore(1)  # one patching grid at a time: a photo's can take seconds
PATCHING_WAIT_S = 15  # how long a patching request waits for the one before it, before it is told to retry
RESIDUAL_AT_ONCE_WIDTH = 4096  # dim x tokens at most for the residual grid to come with the heads' (see below)
MARKED_HEADS = 3  # the board marks this many heads: those that matter most by the weights' head_importance.json


def residual_at_once(config: ViTConfig) -> bool:
    """Whether the residual stream's patching grid comes with the heads' at once: yes for the digits' model (the two
    together take some 160 ms of server time on one thread), no for the photos' (some 2 s, against 0.2 s for the
    heads alone: benchmarks/heads_cost.py), whose page asks for it on a button that says what it costs."""
    return config.dim * config.num_tokens <= RESIDUAL_AT_ONCE_WIDTH


def knockout_answer(model: str, image: np.ndarray, request: dict) -> dict:
    """The board's answer (``page_numbers.knockout_answer``) for the image with the heads the request switches off."""
    return page_numbers.knockout_answer(knockout(model, image, heads_off(model, request, required=True))).to_json()


@model_work
def lens_run(model: str, image: np.ndarray, off: HeadsOff | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The logit lens on one image (``off``: with those heads switched off): what [CLS] would answer after each layer
    (L, classes) as calibrated probabilities, and per patch the probability of the model's answer after each layer
    (L, g, g)."""
    clf = classifier(model)
    batch = clf.batch([image])
    with switched_off(model, off):
        cls = probabilities(heads.logit_lens(clf.model, batch)[0], clf.temperature)  # (L, classes)
        return cls.cpu().numpy(), heads.lens_maps(clf.model, batch)[0].numpy()


def lens_answer(model: str, image: np.ndarray, request: dict) -> dict:
    """The lens strip's answer (``page_numbers.lens_answer``), with the heads the request switches off
    (``service.heads_off``)."""
    cls, maps = lens_run(model, image, heads_off(model, request))
    return page_numbers.lens_answer(classifier(model).classes, cls, maps).to_json()


@model_work
def patching_run(model: str, clean: np.ndarray, corrupt: np.ndarray, residual: bool) -> dict:
    clf = classifier(model)
    return heads.patching_grid(clf.model, clf.batch([clean]), clf.batch([corrupt]), residual=residual)


@dataclasses.dataclass(frozen=True)
class PatchingAnswer(page_numbers.Part):
    """The patching view's numbers for two images the page kept (``heads.patching_grid``, rounded to 3 decimals)."""

    clean: str  # the images' keys (page_numbers.image_key)
    corrupt: str
    residual: bool  # whether the residual stream was patched too
    classes: list[str]  # the clean image's class, then the corrupt one's
    logit_diff: dict[str, float]  # each run ("clean", "corrupt"): its class's logit minus the other's
    clean_into_corrupt: dict[str, list]  # "heads" (L, H), with residual "residual" (L + 1, T): the share restored
    corrupt_into_clean: dict[str, list]
    ms: float  # how long it took


def patching_answer(model: str, clean: np.ndarray, corrupt: np.ndarray, residual: bool) -> dict:
    """How much of the logit difference (clean class against corrupt class) each head, and with ``residual`` each
    position of the residual stream after each layer, restores when copied from one run into the other, both
    directions; 0 is the corrupt run, 1 the clean one (``PatchingAnswer``, as JSON)."""
    started = time.perf_counter()
    grid = patching_run(model, clean, corrupt, residual)
    names = classifier(model).classes

    def rounded(direction: str) -> dict[str, list]:
        return {kind: np.round(values.numpy().astype(float), 3).tolist() for kind, values in grid[direction].items()}

    return PatchingAnswer(
        clean=page_numbers.image_key(clean), corrupt=page_numbers.image_key(corrupt), residual=residual,
        classes=[names[c] for c in grid["classes"]],
        logit_diff={kind: round(value, 4) for kind, value in grid["logit_diff"].items()},
        clean_into_corrupt=rounded("clean_into_corrupt"), corrupt_into_clean=rounded("corrupt_into_clean"),
        ms=round(1000 * (time.perf_counter() - started), 1)).to_json()


def ask_knockout(model: str) -> Callable[[dict], dict]:
    """The board's server function: ``{"image", "off": [[layer, head], ...], "mode": "mean" | "zero"}``."""
    return live_asker("knockout", model, lambda image, request: knockout_answer(model, image, request))


def ask_lens(model: str) -> Callable[[dict], dict]:
    """The lens strip's server function: ``{"image"}``."""
    return live_asker("lens", model, lambda image, request: lens_answer(model, image, request))


def ask_patching(model: str) -> Callable[[dict], dict]:
    """The patching view's server function: ``{"clean": pixels, "corrupt": pixels, "residual": bool}`` (the pixels
    as the page keeps an image, ``page_numbers.image_text``) -> ``patching_answer``; a request that can't be answered
    gets ``{"error": why}``. One grid is computed at a time; a request that waits too long is told to retry."""
    shape = input_shape(model)

    def patching(request: dict) -> dict:
        try:
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
            clean, corrupt = (page_numbers.read_image(request.get(name), shape) for name in ("clean", "corrupt"))
            residual = request.get("residual", True)
            if not isinstance(residual, bool):
                raise ValueError("'residual' is true or false")
            if not PATCHING.acquire(timeout=PATCHING_WAIT_S):
                raise ValueError("the server is busy with another patching grid: try again in a moment")
            try:
                with SERVER_FUNCTION_SLOTS:
                    return patching_answer(model, clean, corrupt, residual)
            finally:
                PATCHING.release()
        except (ValueError, TypeError, WeightsError) as exc:
            return {"error": str(exc)}

    return patching


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


def heads_html(prefix: str, view: str, template: str, ask: list[Callable[[dict], dict]], elem_id: str) -> gr.HTML:
    """One of the section's views: ``template``'s HTML, drawn by the live view ``view`` (``assets/page/views/``),
    with its server functions ``ask``."""
    return gr.HTML("", html_template=template, server_functions=ask, js_on_load=live_script(prefix, view),
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
                       [ask_knockout(model)], f"{prefix}-board")
            gr.Markdown(KNOCKOUT_NOTE, elem_classes="vd-note")
        with gr.Column(scale=1, min_width=300):
            gr.Markdown(LENS_TITLE)
            heads_html(prefix, "lens", lens_template(config), [ask_lens(model)], f"{prefix}-lens")
            gr.Markdown(LENS_NOTE, elem_classes="vd-note")
    gr.Markdown(PATCHING_TITLE)
    heads_html(prefix, "patching", patching_template(config), [ask_patching(model)], f"{prefix}-patching")


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
        f'<div class="vd-note vd-patching-how">{page_numbers.caption_html(PATCHING_HOW)}</div>'
        '<div class="vd-patching-grids"></div>'
        f'{diverging_scale()}</div>')


def ablation_means_or_none(model: str) -> torch.Tensor | None:
    """``ablation_means``, or None where the model can't be loaded (the tab says why elsewhere)."""
    try:
        return ablation_means(model)
    except WeightsError:
        return None
