"""Views the browser draws itself: the numbers of one image's maps, compact, for ``assets/live_view.js``.

The server sends, once per image, each layer's [CLS] map for every head and the heads' mean, quantised to
uint8 (each map scaled to its own maximum, as ``render.overlays`` scales it), with the input image, the colour
map and the overlay's rule (``payload``, the large view's value); the page draws the chosen layer and head from
them, so changing either costs no request. A single map over the same image (rollout, relevance) is its own
view's value (``map_payload``, some 100 bytes). ``render.overlay`` stays the server's picture of the same view
(export, CLI, the API), and the JS follows it step for step: the input upsampled (nearest for digits, bicubic
for photos), the map upsampled bicubic (torch's ``F.interpolate``, ``align_corners=False``), coloured through
the same 256-entry lookup table, and blended at ``render.HEAT_ALPHA``. A browser test compares the two.
"""

from __future__ import annotations

import base64
import json

import numpy as np

from vit_demo import explain, render


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.uint8).tobytes()).decode()


def grid_maps(attention: np.ndarray, token: int = 0) -> np.ndarray:
    """Where a token attends (0: [CLS], 1 + i: patch i), per layer: every head, then the heads' mean, as
    ``render.attention_grid`` shows it: (L, H, T, T) -> (L, H + 1, g, g)."""
    maps = explain.token_attention_maps(attention, token)  # (L, H, g, g)
    return np.concatenate([maps, maps.mean(axis=1, keepdims=True)], axis=1)


def quantise(maps: np.ndarray) -> np.ndarray:
    """Each (g, g) map scaled to its own maximum and rounded to 0..255: (..., g, g) float -> uint8."""
    peaks = np.maximum(maps.max(axis=(-2, -1), keepdims=True), 1e-12)
    return np.round(maps * (255 / peaks)).astype(np.uint8)


def grid_payload(attention: np.ndarray, token: int = 0) -> str:
    """Every layer's maps of one token for a grid view drawn over the tab's image, as a JSON string: where a patch
    looks (``token`` 1 + i), or where [CLS] looked in another model than the tab's (a training snapshot)."""
    return json.dumps({"maps": _b64(quantise(grid_maps(attention, token)))})


def map_payload(heatmap: np.ndarray) -> str:
    """One (g, g) map for a view drawn over the tab's image (rollout, relevance), as a JSON string."""
    return json.dumps({"grid": heatmap.shape[-1], "map": _b64(quantise(heatmap))})


def payload(image: np.ndarray, attention: np.ndarray, size: int) -> str:
    """The numbers the page's live view draws from, as one JSON string (about 4 KB for a digit).

    image: (H, W) or (H, W, 3) in [0, 1]; attention: (L, H, T, T).
    """
    maps = quantise(grid_maps(attention))  # (L, H + 1, g, g)
    pixels = np.round(np.asarray(image) * 255)  # (H, W) or (H, W, 3)
    return json.dumps({
        "size": size, "layers": maps.shape[0], "heads": maps.shape[1] - 1, "grid": maps.shape[-1],
        "height": image.shape[0], "width": image.shape[1], "channels": 1 if image.ndim == 2 else 3,
        "smooth": image.ndim == 3, "alpha": render.HEAT_ALPHA,
        "image": _b64(pixels), "maps": _b64(maps), "colormap": _b64(render.colormap("inferno")),
    })

