"""Where attention goes: the patch grid, [CLS] in every layer and head, one layer and head large, rollout, and
where any one patch looks."""

from __future__ import annotations

import dataclasses

import gradio as gr
import numpy as np
from PIL import Image

from vit_demo import explain, live_view, render
from vit_demo.model import ViTConfig
from vit_demo.ui.components import LARGE, VIEW_BUTTONS, live_canvas, live_grid, view_image
from vit_demo.ui.models import Analysis
from vit_demo.ui.serving import PRIVATE

MEAN = "mean"  # the head radio's choice for the mean over heads
# A layer or head change redraws the live view in the page: no request.
REDRAW_JS = "(layer, head) => {{ window.vdLive?.[{prefix!r}]?.draw(layer, head); }}"


def head_index(head: str | int, heads: int) -> int | None:
    """The radio's choice ("head 3" or "mean") -> a 0-based head index, or None for the mean."""
    if head in (MEAN, None):
        return None
    index = int(str(head).split()[-1]) - 1
    return index if 0 <= index < heads else None


def selected_view(analysis: Analysis, layer: int, head: str, size: int = LARGE) -> Image.Image:
    """Where [CLS] attends in one layer and head (or the layer's mean over heads), ``size`` pixels a side."""
    layers, heads = analysis.attention.shape[:2]
    layer_index = min(max(int(layer), 1), layers) - 1
    chosen = explain.cls_attention_map(analysis.attention, layer_index, head_index(head, heads))
    return render.overlay(analysis.input, chosen, size)


def cls_grid(image: np.ndarray, attention: np.ndarray) -> Image.Image:
    """Where [CLS] looks in every layer and head, and each layer's mean: attention (L, H, T, T) over ``image``."""
    return render.attention_grid(image, explain.token_attention_maps(attention))


def query_views(analysis: Analysis, patch: int, live: bool = True) -> tuple[Image.Image, str | Image.Image]:
    """The patch grid with ``patch`` outlined, and where that patch attends in every layer and head: as the numbers
    the page draws it from (``live``) or as a picture (for the API)."""
    grid = render.patch_grid(analysis.input, analysis.grid, LARGE, selected=patch)
    if live:
        return grid, live_view.grid_payload(analysis.attention, 1 + patch)
    return grid, render.attention_grid(analysis.input, explain.token_attention_maps(analysis.attention, 1 + patch))


def query_title(patch: int | None) -> str:
    if patch is None:
        return "### Where a patch looks"
    return (f"### Where patch {patch} looks\nIn every layer and head; click a patch in "
            "*What the model sees* to choose another.")


def first_query_patch(analysis: Analysis) -> int:
    """The patch a new image's query view starts at."""
    return explain.first_query_patch(analysis.rollout)


def patch_at(analysis: Analysis, x: float, y: float) -> int:
    """The patch under pixel (x, y) of the LARGE patch grid."""
    step = LARGE / analysis.grid
    return int(min(y // step, analysis.grid - 1) * analysis.grid + min(x // step, analysis.grid - 1))


@dataclasses.dataclass
class AttentionView:
    patches: gr.Image
    cls_grid: gr.HTML  # drawn in the page from the large view's numbers
    layer: gr.Slider
    head: gr.Radio
    selected: gr.HTML  # drawn in the page from live_view's numbers
    rollout: gr.HTML  # likewise
    query: gr.HTML  # drawn in the page from the patch's maps
    query_note: gr.Markdown
    api_selected: gr.Image  # hidden: the large view as a picture, in the API's answer
    api_rollout: gr.Image  # hidden: rollout as a picture, likewise
    api_cls_grid: gr.Image  # hidden: the layer x head grid as a picture, likewise
    api_query: gr.Image  # hidden: where a patch looks, as a picture, likewise

    @property
    def outputs(self) -> list:
        """The outputs a new image updates, in the order of ``views``."""
        return [self.patches, self.cls_grid, self.selected, self.rollout, self.query, self.query_note]

    @property
    def api_outputs(self) -> list:
        """The same, with the large view as a picture: what the API answers (``views`` with ``live=False``)."""
        return [self.patches, self.api_cls_grid, self.api_selected, self.api_rollout, self.api_query, self.query_note]

    @staticmethod
    def views(analysis: Analysis | None, layer: int, head: str, live: bool = True) -> tuple:
        """The pictures of an image (None: none), in the order of ``outputs``: the layer x head grid, the large view
        and rollout as the numbers the page draws them from (``live``; the grid draws from the large view's), or as
        the server's pictures (for the API)."""
        empty = "" if live else None
        if analysis is None:
            return None, empty, empty, empty, empty, query_title(None)
        patch = first_query_patch(analysis)
        grid, where = query_views(analysis, patch, live)
        if live:
            return (grid, "", live_view.payload(analysis.input, analysis.attention, LARGE),
                    live_view.map_payload(analysis.rollout), where, query_title(patch))
        return (grid, cls_grid(analysis.input, analysis.attention), selected_view(analysis, layer, head),
                render.overlay(analysis.input, analysis.rollout, LARGE), where, query_title(patch))

    def wire(self, state: gr.State, prefix: str) -> None:
        for control in (self.layer, self.head):
            control.change(None, [self.layer, self.head], None, js=REDRAW_JS.format(prefix=prefix))
        self.patches.select(on_patch_click, state, [self.patches, self.query, self.query_note], **PRIVATE)


def on_patch_click(analysis: Analysis | None, event: gr.SelectData) -> tuple:
    if analysis is None:
        return None, "", query_title(None)
    patch = patch_at(analysis, *event.index)
    return *query_views(analysis, patch), query_title(patch)


def build_patches(prefix: str, config: ViTConfig) -> gr.Image:
    """What the model sees: the input cut into numbered patches (a column of the panel's first row)."""
    gr.Markdown("### What the model sees\nClick a patch to see where it looks.")
    patches = view_image(f"{prefix}-patches", height=LARGE, buttons=[])
    gr.Markdown(
        f"The {config.image_size}x{config.image_size} input is cut into {config.grid_size}x{config.grid_size} "
        f"patches of {config.patch_size}x{config.patch_size} pixels, numbered in reading order; each becomes "
        f"a token, and a learned **[CLS]** token is added in front ({config.num_tokens} tokens). "
        "The prediction is read from [CLS].",
        elem_classes="vd-note")
    return patches


def build_selected(prefix: str, config: ViTConfig) -> tuple[gr.Slider, gr.Radio, gr.HTML]:
    """A column: one layer and head (or the layer's mean) large, with its controls; talk mode's one view. The page
    draws it (``assets/live_view.js``), so its controls cost no request."""
    gr.Markdown("### One layer and head, large", elem_classes="vd-detail")
    layer = gr.Slider(1, config.depth, value=config.depth, step=1, label="Layer", elem_id=f"{prefix}-layer",
                      elem_classes="vd-layer")
    head = gr.Radio([MEAN] + [f"head {h + 1}" for h in range(config.heads)], value=MEAN, label="Head",
                    elem_id=f"{prefix}-head", elem_classes="vd-head")
    selected = live_canvas(f"{prefix}-selected", prefix, "selected", "where [CLS] attends in the chosen layer and head")
    return layer, head, selected


def build_cls_grid(prefix: str, config: ViTConfig) -> gr.HTML:
    """A column: where [CLS] looks in every layer and head, drawn in the page."""
    gr.Markdown("### Where [CLS] looks\nEvery layer (rows) and head (columns), and each layer's mean.")
    return live_grid(f"{prefix}-cls-grid", prefix, config.depth, config.heads, "where [CLS] looks in every layer and head")


def build_rollout(prefix: str) -> gr.HTML:
    """A column: attention rollout, drawn in the page."""
    gr.Markdown("### Attention rollout\n[CLS] through all layers, residuals included (Abnar & Zuidema, 2020).")
    return live_canvas(f"{prefix}-rollout", prefix, "map", "attention rollout")


def build_query(prefix: str, config: ViTConfig) -> tuple[gr.HTML, gr.Markdown]:
    """A column: where the chosen patch looks, in every layer and head, drawn in the page."""
    query_note = gr.Markdown(query_title(None), elem_id=f"{prefix}-query-note")
    return live_grid(f"{prefix}-query", prefix, config.depth, config.heads,
                     "where the chosen patch looks in every layer and head"), query_note
