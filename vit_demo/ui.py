"""The Gradio app: draw a digit or upload a photo, and see what every layer and head of the ViT looks at.

The UI only wires components to functions; the work is done by the classifier (model), ``explain``
(maps) and ``render`` (pictures), the same functions the CLI and the tests use.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # a talk must work offline: no calls home

import ctypes
import dataclasses
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
import numpy as np
import torch
from gradio import processing_utils
from gradio.data_classes import ImageData
from PIL import Image

from vit_demo import explain, render
from vit_demo.atomic import atomic_write
from vit_demo.canvas import decode_drawing, drawing_canvas
from vit_demo.classifier import Classifier, load_model
from vit_demo.model import ViTConfig
from vit_demo.preprocess import MAX_FILE_BYTES, InputError, NothingDrawn
from vit_demo.training import RECIPES
from vit_demo.weights import WeightsError

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
MEAN = "mean"
LARGE = 336  # pixels a side of the large views
VIEW_BUTTONS = ["fullscreen", "download"]  # no "share": nothing leaves the server
DRAW_PROMPT = "Draw a digit (0-9) on the canvas: the prediction follows your pen."
UPLOAD_PROMPT = "Upload a photo, or pick an example below."
VIEW_FORMAT = "jpeg"  # encodes in ~1 ms where WebP (Gradio's default) took ~30 ms for the layer x head grid
# Serving a room on 2 vCPUs (measured with benchmarks/serve_load.py; see README):
WORKERS = 2  # handlers running at once, all events together: one per core
QUEUE_SIZE = 100  # requests waiting at once, all users together; one more is answered "busy, try again"
TORCH_THREADS = 1  # a 1 ms forward gains nothing from 2 threads, and they stall when the other core is busy
CACHE_SWEEP = (600, 600)  # every 10 min, delete the pictures and uploads Gradio cached more than 10 min ago
SHARED_WORKERS = {"concurrency_id": "views", "concurrency_limit": WORKERS}  # for every event listener
DIGIT_BATCH = 8  # /predict_digit serves up to this many waiting requests with one forward pass

CSS = """
#digit-label .output-class, #photo-label .output-class { font-size: 3rem !important; }
.vd-note { font-size: 0.95rem; opacity: 0.85; }
#photo-input img { object-fit: contain !important; }  /* a 32x32 photo fills the box, as large ones do */
"""


@functools.cache
def classifier(name: str) -> Classifier:
    """A shipped model, loaded once per process on ``VIT_DEMO_DEVICE`` (default: auto)."""
    return load_model(name, device=os.environ.get("VIT_DEMO_DEVICE", "auto"))


def model_config(name: str) -> ViTConfig:
    """The model's architecture; until its weights exist, the one train.py will give them."""
    return RECIPES[name].vit if model_problem(name) else classifier(name).info.config


def model_problem(name: str) -> str | None:
    """Why a shipped model can't be used (missing or corrupt weights), or None when it can."""
    try:
        classifier(name)
    except WeightsError as exc:
        return str(exc)
    return None


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One image through the model: what it saw, what it said, and its attention."""

    input: np.ndarray  # (28, 28) or (32, 32, 3), in [0, 1]
    attention: np.ndarray  # (layers, heads, tokens, tokens)
    probs: dict[str, float]
    model_ms: float
    device: str

    @property
    def grid(self) -> int:
        return explain.grid_size(self.attention)

    @functools.cached_property
    def rollout(self) -> np.ndarray:  # (g, g)
        return explain.attention_rollout(self.attention)


def analyse_batch(model: str, images: list[Any]) -> list[Analysis | InputError]:
    """Preprocess ``images`` for ``model`` and run them in one forward pass, timing the model alone.

    An image that can't be read (or is blank) gets its ``InputError`` (``NothingDrawn``) in its place.
    """
    clf = classifier(model)
    inputs: dict[int, np.ndarray] = {}
    results: list[Analysis | InputError | None] = [None] * len(images)
    for i, image in enumerate(images):
        try:
            inputs[i] = clf.preprocess(image)
        except InputError as exc:
            results[i] = exc
    if inputs:
        if clf.device.type == "cuda":
            torch.cuda.synchronize(clf.device)
        started = time.perf_counter()
        predictions = clf.predict_preprocessed(list(inputs.values()))
        model_ms = (time.perf_counter() - started) * 1000
        for i, prediction in zip(inputs, predictions):
            results[i] = Analysis(input=prediction.input, attention=prediction.attention, probs=prediction.probs,
                                  model_ms=model_ms, device=str(clf.device))
    return results


def analyse(model: str, image: Any) -> Analysis:
    """Preprocess ``image`` for ``model`` and run it, timing the model alone."""
    result = analyse_batch(model, [image])[0]
    if isinstance(result, InputError):
        raise result
    return result


# ---- Views ---------------------------------------------------------------------------------------


def head_index(head: str | int, heads: int) -> int | None:
    """The radio's choice ("head 3" or "mean") -> a 0-based head index, or None for the mean."""
    if head in (MEAN, None):
        return None
    index = int(str(head).split()[-1]) - 1
    return index if 0 <= index < heads else None


def selected_view(analysis: Analysis, layer: int, head: str) -> Image.Image:
    """Where [CLS] attends in one layer and head (or the layer's mean over heads), shown large."""
    maps = explain.token_attention_maps(analysis.attention)  # (L, H, g, g)
    layer_index = min(max(int(layer), 1), len(maps)) - 1
    h = head_index(head, maps.shape[1])
    chosen = maps[layer_index].mean(axis=0) if h is None else maps[layer_index, h]
    return render.overlay(analysis.input, chosen, LARGE)


def query_views(analysis: Analysis, patch: int) -> tuple[Image.Image, Image.Image]:
    """The patch grid with ``patch`` outlined, and where that patch attends in every layer and head."""
    grid = render.patch_grid(analysis.input, analysis.grid, LARGE, selected=patch)
    where = render.attention_grid(analysis.input, explain.token_attention_maps(analysis.attention, 1 + patch))
    return grid, where


def query_title(patch: int | None) -> str:
    if patch is None:
        return "### Where a patch looks"
    return (f"### Where patch {patch} looks\nIn every layer and head; click a patch in "
            "*What the model sees* to choose another.")


def info_text(analysis: Analysis) -> str:
    top, p = max(analysis.probs.items(), key=lambda item: item[1])
    return f"**{top}** ({100 * p:.1f}%) · model {analysis.model_ms:.1f} ms on `{analysis.device}`"


def all_views(analysis: Analysis, layer: int, head: str) -> tuple:
    """Every output of a prediction, in the order of ``Panel.outputs``."""
    patch = int(analysis.rollout.argmax())  # start the query-patch view where [CLS] draws most
    grid, where = query_views(analysis, patch)
    return (
        analysis.probs,
        info_text(analysis),
        grid,
        render.attention_grid(analysis.input, explain.token_attention_maps(analysis.attention)),
        selected_view(analysis, layer, head),
        render.overlay(analysis.input, analysis.rollout, LARGE),
        where,
        query_title(patch),
        analysis,
    )


def empty_views(message: str) -> tuple:
    return (None, message, None, None, None, None, None, query_title(None), None)


# ---- Handlers (browser and API) ------------------------------------------------------------------


def result_views(result: Analysis | InputError, layer: int, head: str, blank_message: str) -> tuple:
    """An image's outputs: its views, ``blank_message`` when it is blank, or why it can't be read.

    An image that can't be read is answered, not raised: the page shows why in place of the
    prediction, rather than a red "Error" over every output, and in a batch it fails no one else's
    request.
    """
    if isinstance(result, NothingDrawn):
        return empty_views(blank_message)
    if isinstance(result, InputError):
        return empty_views(f"Can't read this image: {result}")
    return all_views(result, layer, head)


def views_for(model: str, image: Any, layer: int, head: str, blank_message: str) -> tuple:
    problem = model_problem(model)
    if problem:  # say so plainly, in the page and to API clients, rather than fail
        return empty_views(problem)
    return result_views(analyse_batch(model, [image])[0], layer, head, blank_message)


def on_drawing(value: str, layer: int, head: str) -> tuple:
    """Browser: the canvas sent a (partial) drawing."""
    try:
        drawing = decode_drawing(value)
    except InputError as exc:
        raise gr.Error(f"Can't read this drawing: {exc}") from None
    if drawing is None:
        return empty_views(DRAW_PROMPT)
    return views_for("mnist", drawing, layer, head, DRAW_PROMPT)


def predict_digits(paths: list[str | None]) -> list[list]:
    """API, batched (``batch=True``): the drawings of the requests waiting together, in one forward pass.

    Gradio gives a list per input and wants a list per output. There is no State output: a batch's
    states would all land in its first request's session.
    """
    problem = model_problem("mnist")
    if problem:
        rows = [empty_views(problem)] * len(paths)
    else:
        drawn = iter(analyse_batch("mnist", [path for path in paths if path is not None]))
        depth = model_config("mnist").depth
        rows = [empty_views(DRAW_PROMPT) if path is None else result_views(next(drawn), depth, MEAN, DRAW_PROMPT)
                for path in paths]
    rows = [row[:-1] for row in rows]  # every output but the State
    return [list(column) for column in zip(*rows)]


def predict_image(path: str | None, layer: int | None = None, head: str = MEAN) -> tuple:
    """Browser and API: classify an uploaded photo."""
    if path is None:
        return empty_views(UPLOAD_PROMPT)
    if layer is None:
        layer = model_config("cifar10").depth
    return views_for("cifar10", path, layer, head, "This image is blank: there is nothing to classify.")


def on_layer_or_head(analysis: Analysis | None, layer: int, head: str) -> Image.Image | None:
    return None if analysis is None else selected_view(analysis, layer, head)


def on_patch_click(analysis: Analysis | None, event: gr.SelectData) -> tuple:
    if analysis is None:
        return None, None, query_title(None)
    x, y = event.index
    step = LARGE / analysis.grid
    patch = int(min(y // step, analysis.grid - 1) * analysis.grid + min(x // step, analysis.grid - 1))
    grid, where = query_views(analysis, patch)
    return grid, where, query_title(patch)


# ---- Layout --------------------------------------------------------------------------------------


class UndecodedImage(gr.Image):
    """An image input whose upload reaches Python as a file path, undecoded.

    Gradio's own preprocessing opens images with PIL before our code runs, so a bad file would fail
    there with a generic error; this way only our decoder, with its size limits, reads uploads.
    """

    is_template = True  # use gr.Image's frontend

    def preprocess(self, payload):
        return None if payload is None else payload.path


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
        data = processing_utils.encode_pil_to_bytes(value, self.format)
        path = Path(self.GRADIO_CACHE) / processing_utils.hash_bytes(data) / f"image.{self.format}"
        try:
            os.utime(path)  # Blocks(delete_cache=...) ages files by ctime: a picture handed out again is fresh
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda f: f.write(data))
        return ImageData(path=str(path), orig_name=path.name)


def view_image(elem_id: str, **layout: Any) -> CachedImage:
    """One of a panel's pictures: made by the server, never edited by the user."""
    return CachedImage(show_label=False, type="pil", format=VIEW_FORMAT, interactive=False, elem_id=elem_id, **layout)


class UndecodedSketch(gr.ImageEditor):
    """A sketch input (an ImageEditor value) whose composite reaches Python as a file path, undecoded."""

    is_template = True  # use gr.ImageEditor's frontend

    def preprocess(self, payload):
        if payload is None:
            return None
        image = payload.composite or payload.background
        return None if image is None else image.path


@dataclasses.dataclass
class Panel:
    """The outputs shared by the digit and photo tabs."""

    label: gr.Label
    info: gr.Markdown
    patches: gr.Image
    cls_grid: gr.Image
    layer: gr.Slider
    head: gr.Radio
    selected: gr.Image
    rollout: gr.Image
    query: gr.Image
    query_note: gr.Markdown
    state: gr.State

    @property
    def outputs(self) -> list:
        return [self.label, self.info, self.patches, self.cls_grid, self.selected, self.rollout, self.query,
                self.query_note, self.state]


def build_panel(prefix: str, model: str, prompt: str, build_input: Callable[[], Any]) -> tuple[Panel, Any]:
    """One tab: the input (made by ``build_input``) beside the prediction, then every view below."""
    problem = model_problem(model)
    config = model_config(model)
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            source = build_input()
        with gr.Column(scale=1, min_width=260):
            label = gr.Label(num_top_classes=3, label="Prediction", elem_id=f"{prefix}-label")
            info = gr.Markdown(problem or prompt, elem_id=f"{prefix}-info")
        with gr.Column(scale=1, min_width=300):
            gr.Markdown("### What the model sees\nClick a patch to see where it looks.")
            patches = view_image(f"{prefix}-patches", height=LARGE, buttons=[])
            gr.Markdown(
                f"The {config.image_size}x{config.image_size} input is cut into {config.grid_size}x{config.grid_size} "
                f"patches of {config.patch_size}x{config.patch_size} pixels, numbered in reading order; each becomes "
                f"a token, and a learned **[CLS]** token is added in front ({config.num_tokens} tokens). "
                "The prediction is read from [CLS].",
                elem_classes="vd-note")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            gr.Markdown("### Where [CLS] looks\nEvery layer (rows) and head (columns), and each layer's mean.")
            cls_grid = view_image(f"{prefix}-cls-grid", buttons=VIEW_BUTTONS)
        with gr.Column(scale=2):
            gr.Markdown("### One layer and head, large")
            layer = gr.Slider(1, config.depth, value=config.depth, step=1, label="Layer", elem_id=f"{prefix}-layer")
            head = gr.Radio([MEAN] + [f"head {h + 1}" for h in range(config.heads)], value=MEAN, label="Head",
                            elem_id=f"{prefix}-head")
            selected = view_image(f"{prefix}-selected", height=LARGE, buttons=VIEW_BUTTONS)
    with gr.Row(equal_height=False):
        with gr.Column(scale=2):
            gr.Markdown("### Attention rollout\n[CLS] through all layers, residuals included "
                        "(Abnar & Zuidema, 2020).")
            rollout = view_image(f"{prefix}-rollout", height=LARGE, buttons=VIEW_BUTTONS)
        with gr.Column(scale=3):
            query_note = gr.Markdown("### Where a patch looks", elem_id=f"{prefix}-query-note")
            query = view_image(f"{prefix}-query", buttons=VIEW_BUTTONS)
    panel = Panel(label, info, patches, cls_grid, layer, head, selected, rollout, query, query_note, gr.State())
    return panel, source


def wire_view_controls(panel: Panel) -> None:
    for control in (panel.layer, panel.head):
        control.change(on_layer_or_head, [panel.state, panel.layer, panel.head], panel.selected,
                       api_visibility="private", show_progress="hidden", **SHARED_WORKERS)
    panel.patches.select(on_patch_click, panel.state, [panel.patches, panel.query, panel.query_note],
                         api_visibility="private", show_progress="hidden", **SHARED_WORKERS)


def photo_input() -> gr.Image:
    photo = UndecodedImage(type="filepath", label="Photo", sources=["upload", "clipboard"], elem_id="photo-input",
                     height=LARGE)
    gr.Examples(sorted(str(p) for p in (EXAMPLES / "photos").glob("*.png")), photo,
                label="Examples (CIFAR-10 test set)")
    return photo


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="ViT demo: what a Vision Transformer looks at", delete_cache=CACHE_SWEEP) as demo:
        gr.Markdown("# What does a Vision Transformer look at?\n"
                    "A ViT written from scratch in PyTorch. Draw a digit or upload a photo: see its prediction, "
                    "the patches it reads, and where every layer and attention head looks.")
        with gr.Tabs():
            with gr.Tab("Draw a digit (MNIST)", id="digit"):
                digit, canvas = build_panel("digit", "mnist", DRAW_PROMPT,
                                            lambda: drawing_canvas(sorted((EXAMPLES / "digits").glob("*.png"))))
                canvas.change(on_drawing, [canvas, digit.layer, digit.head], digit.outputs, api_visibility="private",
                              show_progress="hidden", trigger_mode="always_last", **SHARED_WORKERS)
                wire_view_controls(digit)
                # API only: a sketch value (or an image as its composite) for scripts.
                sketch = UndecodedSketch(visible=False)
                sketch.change(predict_digits, sketch, digit.outputs[:-1], api_name="predict_digit", batch=True,
                              max_batch_size=DIGIT_BATCH, **SHARED_WORKERS)
            with gr.Tab("Upload a photo (CIFAR-10)", id="photo"):
                photos, photo = build_panel("photo", "cifar10", UPLOAD_PROMPT, photo_input)
                photo.change(predict_image, [photo, photos.layer, photos.head], photos.outputs,
                             api_name="predict_image", show_progress="minimal", **SHARED_WORKERS)
                wire_view_controls(photos)
    return demo


def warm_up() -> None:
    """Run one example through each available model and every view, so the first user waits for nothing."""
    for model, example in (("mnist", EXAMPLES / "digits" / "7.png"), ("cifar10", EXAMPLES / "photos" / "ship.png")):
        if not model_problem(model):
            config = model_config(model)
            all_views(analyse(model, example), config.depth, MEAN)


GLIBC_M_MMAP_THRESHOLD = -3  # mallopt()'s parameter number, from glibc's malloc.h
LARGE_BUFFER_BYTES = 128 * 1024  # glibc's own starting threshold, kept fixed


def return_large_buffers_to_the_os() -> None:
    """Have glibc map every buffer of 128 KiB or more on its own, so that freeing it gives it back to the OS.

    By default glibc raises this threshold whenever such a buffer is freed, after which the views'
    large arrays come from the heap, which fragments with two workers: the server's RSS grew 37-52%
    over 500-1,000 requests of benchmarks/serve_load.py, against 2-5% with the threshold fixed. The
    cost is about 3 ms of server time per drawing (fresh pages for each large buffer). Other C
    libraries (macOS, musl) are left as they are.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(GLIBC_M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES)


def launch(queue_size: int = QUEUE_SIZE, **launch_args: Any) -> gr.Blocks:
    """Build, warm up and serve the app (``launch_args`` go to ``Blocks.launch``)."""
    return_large_buffers_to_the_os()
    torch.set_num_threads(TORCH_THREADS)
    demo = build_demo()
    warm_up()
    # A full queue answers at once: the page shows "This application is currently busy. Please try
    # again.", gradio_client raises QueueError("Queue is full! Please try again.").
    demo.queue(max_size=queue_size)
    # Uploads larger than our decoder accepts are refused while they stream in, before they reach the disk.
    demo.launch(css=CSS, theme=gr.themes.Default(), max_file_size=MAX_FILE_BYTES, **launch_args)
    return demo
