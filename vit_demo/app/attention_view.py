"""Where attention goes: the patch grid, [CLS] in every layer and head, one layer and head large, rollout, and
where any one patch looks."""

from __future__ import annotations

import dataclasses

import gradio as gr
import numpy as np
from PIL import Image

from vit_demo.app.captions import query_title
from vit_demo.app.components import LARGE, live_canvas, live_grid, live_patches
from vit_demo.app.service import Analysis
from vit_demo.interpret import explain
from vit_demo.model import ViTConfig
from vit_demo.pictures import render

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


def query_picture(analysis: Analysis, patch: int) -> Image.Image:
    """Where ``patch`` attends in every layer and head, as a picture (for the API)."""
    return render.attention_grid(analysis.input, explain.token_attention_maps(analysis.attention, 1 + patch))


def checked_patch(patch: object, patches: int) -> int:
    """A patch number asked for (by the page, or typed in export's box): the patch, or a ValueError that names the
    range where the image has no such patch."""
    whole = isinstance(patch, (int, float)) and not isinstance(patch, bool) and patch == int(patch)
    if not whole or not 0 <= patch < patches:
        shown = f"{patch:g}" if isinstance(patch, (int, float)) else repr(patch)
        raise ValueError(f"There is no patch {shown}: this image has {patches} patches, numbered 0 to {patches - 1} "
                         "in reading order.")
    return int(patch)


def first_query_patch(analysis: Analysis) -> int:
    """The patch a new image's query view starts at."""
    return explain.first_query_patch(analysis.rollout)


@dataclasses.dataclass
class AttentionView:
    layer: gr.Slider
    head: gr.Radio
    selected: gr.HTML  # its value: the tab's numbers (source.js), which all the page's views draw from
    api_patches: gr.Image  # hidden: the views as pictures, in the API's answer
    api_cls_grid: gr.Image
    api_selected: gr.Image
    api_rollout: gr.Image
    api_query: gr.Image
    api_query_note: gr.Markdown

    @property
    def api_outputs(self) -> list:
        """The views as pictures: what the API answers (``pictures``)."""
        return [self.api_patches, self.api_cls_grid, self.api_selected, self.api_rollout, self.api_query,
                self.api_query_note]

    @staticmethod
    def pictures(analysis: Analysis | None, layer: int, head: str) -> tuple:
        """An image's views as the server's pictures (None: none), in the order of ``api_outputs``."""
        if analysis is None:
            return None, None, None, None, None, query_title(None)
        patch = first_query_patch(analysis)
        return (render.patch_grid(analysis.input, analysis.grid, LARGE, selected=patch),
                cls_grid(analysis.input, analysis.attention), selected_view(analysis, layer, head),
                render.overlay(analysis.input, analysis.rollout, LARGE), query_picture(analysis, patch),
                query_title(patch))

    def wire(self, prefix: str) -> None:
        for control in (self.layer, self.head):
            control.change(None, [self.layer, self.head], None, js=REDRAW_JS.format(prefix=prefix))


# The views' titles, in the app's markdown (the static page writes the same: vit_demo/deploy/static_space.py). The first
# screen tells a story a step a column (class vd-step, which the CSS numbers): draw -> the patches it reads (here) ->
# where it looks (here) -> the answer (panel.ANSWER_TITLE), each a title and one plain sentence.
def patches_title(config: ViTConfig) -> str:
    return (f"### The patches it reads\nThe image is cut into {config.grid_size} x {config.grid_size} patches, one "
            "token each. Click a patch to see where it looks.")


LARGE_TITLE = ("### Where it looks\nIn each layer every token takes in the others. Bright: where [CLS], the "
               "answer's token, looked.")
CLS_GRID_TITLE = ("### Every layer and head\nWhere [CLS] looked in each layer (rows) and head (columns), and each "
                  "layer's mean.")
ROLLOUT_TITLE = ("### All layers together\nWhere [CLS] looks once every layer is followed back to the patches, the "
                 "shortcut around each layer included (*attention rollout*, Abnar & Zuidema, 2020).")


# The views the page draws itself (``live_canvas``), one maker each, for the app and the static page.
def patches_view(prefix: str, config: ViTConfig) -> gr.HTML:
    return live_patches(f"{prefix}-patches", prefix, config.grid_size,
                        "the input cut into numbered patches; click one to see where it looks")


def large_view(prefix: str) -> gr.HTML:
    """Its value is the tab's numbers, which every view draws from (JSON, set by the page; "" for none)."""
    return live_canvas(f"{prefix}-selected", prefix, "selected", "where [CLS] attends in the chosen layer and head")


def cls_grid_view(prefix: str, config: ViTConfig) -> gr.HTML:
    return live_grid(f"{prefix}-cls-grid", prefix, "cls", config.depth, config.heads,
                     "where [CLS] looks in every layer and head")


def rollout_view(prefix: str) -> gr.HTML:
    return live_canvas(f"{prefix}-rollout", prefix, "rollout", "attention rollout")


def query_view(prefix: str, config: ViTConfig) -> gr.HTML:
    return live_grid(f"{prefix}-query", prefix, "query", config.depth, config.heads,
                     "where the chosen patch looks in every layer and head")


def patches_note(config: ViTConfig) -> str:
    return (f"{config.grid_size * config.grid_size} patches of {config.patch_size} x {config.patch_size} pixels, "
            f"numbered in reading order, and one more token in front, **[CLS]**, which the answer is read from "
            f"({config.num_tokens} tokens).")


def build_patches(prefix: str, config: ViTConfig) -> None:
    """The first screen's second step: the input cut into numbered patches, drawn in the page."""
    gr.Markdown(patches_title(config), elem_classes="vd-step")
    patches_view(prefix, config)
    gr.Markdown(patches_note(config), elem_classes="vd-note")


def build_selected(prefix: str, config: ViTConfig) -> tuple[gr.Slider, gr.Radio, gr.HTML]:
    """A column: one layer and head (or the layer's mean) large, with its controls; talk mode's one view. The page
    draws it (``assets/page/views/selected.js``), so its controls cost no request. Its value is the tab's numbers,
    which every view draws from."""
    gr.Markdown(LARGE_TITLE, elem_classes="vd-step")
    layer = gr.Slider(1, config.depth, value=config.depth, step=1, label="Layer", elem_id=f"{prefix}-layer",
                      elem_classes="vd-layer")
    head = gr.Radio([MEAN] + [f"head {h + 1}" for h in range(config.heads)], value=MEAN, label="Head",
                    elem_id=f"{prefix}-head", elem_classes="vd-head")
    return layer, head, large_view(prefix)


def build_cls_grid(prefix: str, config: ViTConfig) -> None:
    """A column: where [CLS] looks in every layer and head, drawn in the page."""
    gr.Markdown(CLS_GRID_TITLE)
    cls_grid_view(prefix, config)


def build_rollout(prefix: str) -> None:
    """A column: attention rollout, drawn in the page."""
    gr.Markdown(ROLLOUT_TITLE)
    rollout_view(prefix)


def build_query(prefix: str, config: ViTConfig) -> None:
    """A column: where the chosen patch looks, in every layer and head, drawn in the page."""
    gr.Markdown(query_title(None))
    query_view(prefix, config)
