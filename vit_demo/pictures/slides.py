"""Pictures for slides, made from one image's attention: any view as a PNG at least 1600 pixels wide, and an
animated GIF that steps through the layers. Numpy and PIL only; the app's export and ``python -m vit_demo export``
call these."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from vit_demo.interpret import explain
from vit_demo.pictures import render
SLIDE_WIDTH = 1600  # pixels: a full-width picture on a 1080p slide, with room to crop
MAX_SLIDE_WIDTH = 3840  # pixels: a 4K screen's width; wider pictures only fill memory
GIF_SIZE = 720  # pixels a side of the GIF's picture; a caption band goes above it
GIF_FRAME_MS = 900  # each layer's time on screen
CAPTION_HEIGHT = 64

# The views a slide can show (``view_slide``), and the GIF (``layers_gif``).
CLS_GRID, LAYER, ROLLOUT, RELEVANCE, PATCHES, QUERY = "grid", "layer", "rollout", "relevance", "patches", "query"
LAYERS_GIF = "gif"
PNG_VIEWS = (CLS_GRID, LAYER, ROLLOUT, RELEVANCE, PATCHES, QUERY)


def head_name(head: int | None) -> str:
    return "mean" if head is None else f"head{head + 1}"


def slide_name(model: str, label: str, view: str, layer: int = 0, head: int | None = None,
               explained: str | None = None, patch: int = 0) -> str:
    """The file name of a slide: what it shows, e.g. ``mnist-7-layer3-head2.png`` (``layer`` 0-based)."""
    what = {CLS_GRID: "cls-grid", LAYER: f"layer{layer + 1}-{head_name(head)}", ROLLOUT: "rollout",
            RELEVANCE: f"relevance-{explained}", PATCHES: "patches", QUERY: f"patch{patch}-grid",
            LAYERS_GIF: f"layers-{head_name(head)}"}[view]
    return f"{model}-{label}-{what}.{'gif' if view == LAYERS_GIF else 'png'}"


def view_slide(view: str, image: np.ndarray, attention: np.ndarray, layer: int = -1, head: int | None = None,
               relevance: np.ndarray | None = None, patch: int = 0, width: int = SLIDE_WIDTH,
               prefix_tokens: int = 1) -> Image.Image:
    """One view of an image for a slide, at least ``width`` pixels wide.

    ``image``: the model's input in [0, 1]; ``attention``: (L, H, T, T), the patches after ``prefix_tokens`` tokens
    (the model's ``config.prefix_tokens``); ``layer`` (0-based, -1 the last) and ``head`` (0-based; None: the mean)
    for LAYER; ``relevance``: the (g, g) map for RELEVANCE; ``patch`` (0-based, reading order) for QUERY: where that
    patch looks in every layer and head.
    """
    if view in (CLS_GRID, QUERY):
        token = 0 if view == CLS_GRID else prefix_tokens + patch
        maps = explain.token_attention_maps(attention, token, prefix_tokens)  # (L, H, g, g)
        return render.attention_grid(image, maps, thumb=render.attention_grid_thumb(maps.shape[1], width))
    if view == LAYER:
        return render.overlay(image, explain.cls_attention_map(attention, layer % len(attention), head, prefix_tokens),
                              width)
    if view == ROLLOUT:
        return render.overlay(image, explain.attention_rollout(attention, prefix_tokens), width)
    if view == RELEVANCE:
        if relevance is None:
            raise ValueError("a relevance slide needs the relevance map")
        return render.overlay(image, relevance, width)
    if view == PATCHES:
        return render.patch_grid(image, explain.grid_size(attention, prefix_tokens), width)
    raise ValueError(f"unknown view {view!r}: one of {', '.join(PNG_VIEWS)}")


def png_bytes(picture: Image.Image) -> bytes:
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


def _captioned(picture: Image.Image, caption: str) -> Image.Image:
    """``picture`` under a white band holding ``caption``."""
    framed = Image.new("RGB", (picture.width, picture.height + CAPTION_HEIGHT), render.BACKGROUND)
    framed.paste(picture, (0, CAPTION_HEIGHT))
    ImageDraw.Draw(framed).text((picture.width // 2, CAPTION_HEIGHT // 2), caption, fill=render.TEXT,
                                font=render.font(CAPTION_HEIGHT // 2), anchor="mm")
    return framed


def layers_gif(image: np.ndarray, attention: np.ndarray, head: int | None = None, size: int = GIF_SIZE,
               prefix_tokens: int = 1) -> bytes:
    """An animated GIF, one frame a layer, of where [CLS] looks in ``head`` (0-based; None: the mean over heads),
    each frame captioned with its layer; it loops forever. ``attention`` (L, H, T, T): as ``view_slide``'s."""
    layers, heads = attention.shape[:2]
    chosen = np.stack([explain.cls_attention_map(attention, layer, head, prefix_tokens)
                       for layer in range(layers)])  # (L, g, g)
    which = f"mean of {heads} heads" if head is None else f"head {head + 1} of {heads}"
    frames = [_captioned(picture, f"[CLS] attention · layer {layer + 1} of {layers} · {which}")
              for layer, picture in enumerate(render.overlays(image, chosen, size))]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=GIF_FRAME_MS, loop=0)
    return out.getvalue()


def export_slide(classifier, image: np.ndarray, view: str, layer: int | None = None, head: str = "mean",
                 label: str | None = None, patch: int | None = None, width: int = SLIDE_WIDTH):
    """One view of a preprocessed ``image`` through ``classifier`` (vit_demo.classifier.Classifier) for a slide:
    ``(file name, bytes, prediction)``; ``layer`` 1-based (None: the last), ``head`` "mean" or 1-based, ``label`` the
    class the relevance explains (None: the predicted one), ``patch`` the query's (None: the one [CLS] draws on
    most). Raises ValueError, naming the range, for a layer, head, patch, class or view the model has no such of.
    ``python -m vit_demo export`` and the app's ``/export`` call it."""
    if view not in (*PNG_VIEWS, LAYERS_GIF):
        raise ValueError(f"there is no view {view!r}: one of {', '.join((*PNG_VIEWS, LAYERS_GIF))}")
    layers, heads = classifier.model.config.depth, classifier.model.config.heads
    layer = layers if layer is None else layer
    if not 1 <= layer <= layers:
        raise ValueError(f"the layer must be 1 to {layers}")
    if str(head) != "mean" and not (str(head).isdigit() and 1 <= int(head) <= heads):
        raise ValueError(f"the head must be 1 to {heads}, or mean")
    head_index = None if str(head) == "mean" else int(head) - 1
    if label is not None and label not in classifier.classes:
        raise ValueError(f"there is no class {label!r}: one of {', '.join(classifier.classes)}")
    prediction = classifier.predict_preprocessed([image], relevance_for=[label])[0]
    prefix, patches = classifier.model.config.prefix_tokens, classifier.model.config.grid_size**2
    if patch is None:
        patch = explain.first_query_patch(explain.attention_rollout(prediction.attention, prefix))
    if not 0 <= patch < patches:
        raise ValueError(f"the patch must be 0 to {patches - 1}")
    name = slide_name(classifier.info.name, prediction.label, view, layer - 1, head_index,
                      prediction.relevance_label, patch)
    if view == LAYERS_GIF:
        return name, layers_gif(prediction.input, prediction.attention, head_index, prefix_tokens=prefix), prediction
    picture = view_slide(view, prediction.input, prediction.attention, layer - 1, head_index, prediction.relevance,
                         patch, width, prefix)
    return name, png_bytes(picture), prediction
