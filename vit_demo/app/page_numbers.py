"""Views the browser draws itself: the numbers of one image's maps, compact, for ``assets/page/live.js``.

A pen stroke's answer carries, once per image, the input (its 8-bit pixels: exactly what the model read), each
layer's [CLS] map for every head and the heads' mean, quantised to uint8 (each map scaled to its own maximum, as
``render.overlays`` scales it), the colour map and the overlay's rule (``payload``, the large view's value), and
a few single maps: rollout, the relevance of the class shown, where the first query patch looks (``map_payload``,
``grid_payload``, some 100 bytes to 2 KB each). The page draws every view from them: changing the layer, the head,
the class shown, the query patch or the training slider costs no request when the page has its numbers. What it
lacks (another patch, another class, a training snapshot) it asks for once, sending the image's pixels to one of
the tab's server functions (``ask``), which computes the maps from them, and keeps the answer with the image's
``key``: an answer that comes late for an earlier image is never drawn over a later one.

``render.overlay`` stays the server's picture of the same view (export, CLI, the API), and the JS follows it step
for step: the input upsampled (nearest for digits, bicubic for photos), the map upsampled bicubic (torch's
``F.interpolate``, ``align_corners=False``), coloured through the same 256-entry lookup table, and blended with
``render.HEAT_ALPHA``'s shares. A browser test compares the two.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re

import numpy as np

from vit_demo.interpret import explain
from vit_demo.pictures import render
def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.uint8).tobytes()).decode()


def pixels(image: np.ndarray) -> np.ndarray:
    """An input in [0, 1] (on 256 levels, as preprocessing leaves it) as its 8-bit pixels: same shape, uint8."""
    return np.round(np.asarray(image) * 255).astype(np.uint8)


def image_text(image: np.ndarray) -> str:
    """An input as the page keeps it (``payload``'s "image") and sends it back to ask for more: its pixels, base64."""
    return _b64(pixels(image))


def image_key(image: np.ndarray) -> str:
    """A short name for an input, from its pixels: what the page keeps the numbers of each image under."""
    return hashlib.sha1(pixels(image).tobytes()).hexdigest()[:16]


def read_image(text: object, shape: tuple[int, ...]) -> np.ndarray:
    """The page's copy of an input (``image_text``) back as the model's input: ``shape``, float32
    in [0, 1]. Raises ValueError for anything else."""
    try:
        data = base64.b64decode(str(text), validate=True)
    except ValueError:
        raise ValueError("the image is not base64") from None
    if len(data) != int(np.prod(shape)):
        raise ValueError(f"the image has {len(data)} bytes where this model reads {int(np.prod(shape))}")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape).astype(np.float32) / 255


def caption_html(markdown: str) -> str:
    """A view's note in the app's markdown (a ``###`` title, ``**bold**``, ``*italic*``) as HTML for its caption in
    the page: the title in bold, `code` as code, then the text."""
    text = html.escape(markdown, quote=False)
    text = re.sub(r"^#+ (.*)$", r"<b>\1</b>", text, flags=re.MULTILINE)
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text).replace("\n", " ")


def grid_maps(attention: np.ndarray, token: int = 0) -> np.ndarray:
    """Where a token attends (0: [CLS], 1 + i: patch i), per layer: every head, then the heads' mean, as
    ``render.attention_grid`` shows it: (L, H, T, T) -> (L, H + 1, g, g)."""
    maps = explain.token_attention_maps(attention, token)  # (L, H, g, g)
    return np.concatenate([maps, maps.mean(axis=1, keepdims=True)], axis=1)


def quantise(maps: np.ndarray) -> np.ndarray:
    """Each (g, g) map scaled to its own maximum and rounded to 0..255: (..., g, g) float -> uint8."""
    peaks = np.maximum(maps.max(axis=(-2, -1), keepdims=True), 1e-12)
    return np.round(maps * (255 / peaks)).astype(np.uint8)


def grid_payload(attention: np.ndarray, token: int = 0, **about: object) -> dict:
    """Every layer's maps of one token for a grid view drawn over the tab's image: where a patch looks (``token``
    1 + i), or where [CLS] looked in another model than the tab's (a training snapshot); ``about``: what they are
    (the image's key, the patch, a caption...)."""
    return {**about, "maps": _b64(quantise(grid_maps(attention, token)))}


def map_payload(heatmap: np.ndarray, **about: object) -> dict:
    """One (g, g) map for a view drawn over the tab's image (rollout, relevance), with what it is (``about``)."""
    return {**about, "grid": heatmap.shape[-1], "map": _b64(quantise(heatmap))}


def payload(image: np.ndarray, attention: np.ndarray, size: int, label: str, patch: int, answers: dict,
            **prediction: object) -> dict:
    """The numbers the page's views draw from (some 7 KB as JSON for a digit, 14 KB for a photo): the image's, its
    predicted ``label`` and first query ``patch``, ``answers``: kind ("rollout", "query", "relevance") -> which (the
    map, the patch, the class) -> its numbers (``map_payload``, ``grid_payload``), and ``prediction``: what the
    prediction view shows (the probabilities, the info line, the notice).

    image: (H, W) or (H, W, 3) in [0, 1]; attention: (L, H, T, T).
    """
    maps = quantise(grid_maps(attention))  # (L, H + 1, g, g)
    return {
        "key": image_key(image), "label": label, "patch": patch, "answers": answers, **prediction,
        "size": size, "layers": maps.shape[0], "heads": maps.shape[1] - 1, "grid": maps.shape[-1],
        "height": image.shape[0], "width": image.shape[1], "channels": 1 if image.ndim == 2 else 3,
        "smooth": image.ndim == 3, "alpha": render.HEAT_ALPHA,
        "image": image_text(image), "maps": _b64(maps), "colormap": _b64(render.colormap(render.HEAT)),
    }
