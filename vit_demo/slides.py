"""Pictures for slides, made from one image's attention: any view as a PNG at least 1600 pixels wide, and an
animated GIF that steps through the layers. Numpy and PIL only; the app and the CLI call these."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from vit_demo import explain, render

SLIDE_WIDTH = 1600  # pixels: a full-width picture on a 1080p slide, with room to crop
GIF_SIZE = 720  # pixels a side of the GIF's picture; a caption band goes above it
GIF_FRAME_MS = 900  # each layer's time on screen
CAPTION_HEIGHT = 64


def png_bytes(picture: Image.Image) -> bytes:
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=False)
    return out.getvalue()


def cls_grid_slide(image: np.ndarray, attention: np.ndarray, width: int = SLIDE_WIDTH) -> Image.Image:
    """Where [CLS] looks in every layer and head, and each layer's mean, at least ``width`` pixels wide.

    ``image``: the model's input in [0, 1]; ``attention``: (L, H, T, T).
    """
    maps = explain.token_attention_maps(attention)  # (L, H, g, g)
    return render.attention_grid(image, maps, thumb=render.attention_grid_thumb(maps.shape[1], width))


def _captioned(picture: Image.Image, caption: str) -> Image.Image:
    """``picture`` under a white band holding ``caption``."""
    framed = Image.new("RGB", (picture.width, picture.height + CAPTION_HEIGHT), render.BACKGROUND)
    framed.paste(picture, (0, CAPTION_HEIGHT))
    ImageDraw.Draw(framed).text((picture.width // 2, CAPTION_HEIGHT // 2), caption, fill=render.TEXT,
                                font=render.font(CAPTION_HEIGHT // 2), anchor="mm")
    return framed


def layers_gif(image: np.ndarray, attention: np.ndarray, head: int | None = None, size: int = GIF_SIZE) -> bytes:
    """An animated GIF, one frame a layer, of where [CLS] looks in ``head`` (0-based; None: the mean over heads),
    each frame captioned with its layer; it loops forever."""
    maps = explain.token_attention_maps(attention)  # (L, H, g, g)
    layers, heads = maps.shape[:2]
    chosen = maps.mean(axis=1) if head is None else maps[:, head]  # (L, g, g)
    which = f"mean of {heads} heads" if head is None else f"head {head + 1} of {heads}"
    frames = [_captioned(picture, f"[CLS] attention · layer {layer + 1} of {layers} · {which}")
              for layer, picture in enumerate(render.overlays(image, chosen, size))]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=GIF_FRAME_MS, loop=0)
    return out.getvalue()
