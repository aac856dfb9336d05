"""Pictures from explanation maps, with numpy and PIL (no matplotlib figure per request).

Every function takes the model's input image (values in [0, 1]; (H, W) grey or (H, W, 3) RGB) and
returns a PIL image ready for the UI.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageFont

BACKGROUND = (255, 255, 255)
TEXT = (20, 20, 20)
GRID_LINE = (0, 170, 255)


@functools.cache
def colormap(name: str = "inferno") -> np.ndarray:
    """A matplotlib colormap as a (256, 3) uint8 lookup table."""
    import matplotlib

    return (matplotlib.colormaps[name](np.linspace(0, 1, 256))[:, :3] * 255).round().astype(np.uint8)


@functools.cache
def font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


@functools.cache
def _resize_matrix(n: int, size: int, smooth: bool) -> np.ndarray:
    """(size, n) float32: resizing n samples to size along one axis, bicubic when smooth, else nearest.

    Both are separable, so a whole image resizes as ``rows @ image @ cols.T``. The matrix is torch's
    ``F.interpolate`` applied to one-hot inputs, so the results are its own, from two small matrix
    products instead of a per-pixel kernel.
    """
    one_hot = torch.eye(n).reshape(n, 1, n, 1)  # n inputs of n x 1 pixels, each with a single 1
    options = {"mode": "bicubic", "align_corners": False} if smooth else {"mode": "nearest"}
    return F.interpolate(one_hot, size=(size, 1), **options)[:, 0, :, 0].T.numpy().copy()


def _upsample(images: np.ndarray, size: int, smooth: bool) -> np.ndarray:
    """(N, h, w) -> (N, size, size) float32, bicubic when smooth, else nearest (crisp pixels)."""
    rows = _resize_matrix(images.shape[1], size, smooth)  # (size, h)
    cols = _resize_matrix(images.shape[2], size, smooth)  # (size, w)
    return rows @ images.astype(np.float32, copy=False) @ cols.T


def base_picture(image: np.ndarray, size: int) -> Image.Image:
    """The input image as a size x size RGB picture; digits stay crisp, photos are smoothed. Don't draw on it."""
    return _base_picture(image.tobytes(), image.shape, str(image.dtype), size)


@functools.lru_cache(maxsize=16)
def _base_picture(data: bytes, shape: tuple[int, ...], dtype: str, size: int) -> Image.Image:
    """base_picture, cached: one prediction's views use the same upsampled image some forty times."""
    image = np.frombuffer(data, dtype=dtype).reshape(shape)  # (H, W) or (H, W, 3), in [0, 1]
    channels = image[None] if image.ndim == 2 else image.transpose(2, 0, 1)  # (C, H, W)
    up = _upsample(channels * 255, size, smooth=image.ndim == 3)  # (C, size, size)
    rgb = np.broadcast_to(up.transpose(1, 2, 0), (size, size, 3))
    return Image.fromarray(rgb.clip(0, 255).round().astype(np.uint8))


HEAT_ALPHA = 0.6  # the heatmap's share of an overlay pixel; the image shows through the rest


@functools.cache
def _palette(name: str) -> list[int]:
    """A colormap as a PIL palette: 256 RGB triples, flattened."""
    return colormap(name).flatten().tolist()


def overlays(image: np.ndarray, maps: np.ndarray, size: int, cmap: str = "inferno") -> list[Image.Image]:
    """Heatmaps over the image: (N, g, g) maps -> N pictures of size x size.

    Each map is scaled to its own maximum and upsampled smoothly; the image shows through underneath.
    This is the app's hottest loop (some 75 pictures per photo): the upsampling is two matrix
    products, the colouring and blending are PIL's C loops on one small picture at a time.
    """
    peaks = np.maximum(maps.reshape(len(maps), -1).max(axis=1), 1e-12)  # (N,)
    base = base_picture(image, size)
    pictures = []
    for scaled in maps * (255 / peaks)[:, None, None]:  # (g, g) in [0, 255], one at a time: small buffers only
        levels = _upsample(scaled[None], size, smooth=True)[0].clip(0, 255).astype(np.uint8)  # (size, size)
        heat = Image.fromarray(levels)  # mode "L"
        heat.putpalette(_palette(cmap))  # now mode "P": the levels index the colormap
        pictures.append(Image.blend(base, heat.convert("RGB"), HEAT_ALPHA))
    return pictures


def overlay(image: np.ndarray, heatmap: np.ndarray, size: int = 336, cmap: str = "inferno") -> Image.Image:
    """One heatmap (g, g) over the image, as a size x size picture."""
    return overlays(image, heatmap[None], size, cmap)[0]


def mark_patch(picture: Image.Image, patch: int, grid: int, colour=(0, 255, 120)) -> Image.Image:
    """Outline patch ``patch`` (row-major on a grid x grid) on a picture of the whole image."""
    step = picture.width / grid
    row, col = divmod(patch, grid)
    ImageDraw.Draw(picture).rectangle(
        (col * step, row * step, (col + 1) * step - 1, (row + 1) * step - 1), outline=colour, width=3)
    return picture


@functools.cache
def _patch_grid_layer(grid: int, size: int) -> Image.Image:
    """Transparent RGBA layer with the patch borders and numbers, drawn once per grid and size."""
    layer = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    step = size / grid
    for i in range(1, grid):
        draw.line((0, i * step, size, i * step), fill=GRID_LINE, width=1)
        draw.line((i * step, 0, i * step, size), fill=GRID_LINE, width=1)
    label_font = font(max(9, int(step / 3.5)))
    for index in range(grid * grid):
        row, col = divmod(index, grid)
        draw.text((col * step + 3, row * step + 1), str(index), fill=GRID_LINE, font=label_font)
    return layer


def patch_grid(image: np.ndarray, grid: int, size: int = 336, selected: int | None = None) -> Image.Image:
    """The input as the model sees it: cut into grid x grid patches, each numbered in reading order."""
    picture = base_picture(image, size).convert("RGBA")
    picture = Image.alpha_composite(picture, _patch_grid_layer(grid, size)).convert("RGB")
    if selected is not None:
        mark_patch(picture, selected, grid)
    return picture


_GAP, _LEFT, _TOP = 4, 64, 24  # attention_grid's spacing, label column and header row, in pixels


def _tile_origin(layer: int, head: int, heads: int, thumb: int) -> tuple[int, int]:
    """Top-left corner of a tile; the mean column (head == heads) stands a little apart."""
    x = _LEFT + head * (thumb + _GAP) + (_GAP if head == heads else 0)
    return x, _TOP + layer * (thumb + _GAP)


@functools.cache
def _grid_frame(layers: int, heads: int, thumb: int) -> Image.Image:
    """The white frame of attention_grid with its row and column labels, drawn once per shape. Don't draw on it."""
    width = _LEFT + (heads + 1) * (thumb + _GAP) + _GAP
    height = _TOP + layers * (thumb + _GAP)
    frame = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(frame)
    label_font = font(15)
    for head in range(heads + 1):
        x, _ = _tile_origin(0, head, heads, thumb)
        draw.text((x + thumb // 2, _TOP // 2), "mean" if head == heads else f"head {head + 1}", fill=TEXT,
                  font=label_font, anchor="mm")
    for layer in range(layers):
        _, y = _tile_origin(layer, 0, heads, thumb)
        draw.text((_LEFT // 2 - 2, y + thumb // 2), f"layer {layer + 1}", fill=TEXT, font=label_font, anchor="mm")
    return frame


def attention_grid(image: np.ndarray, maps: np.ndarray, thumb: int = 96, cmap: str = "inferno") -> Image.Image:
    """One thumbnail per layer (rows) and head (columns), plus each layer's mean over heads (last column).

    ``maps``: (L, H, g, g), e.g. where [CLS] attends in every layer and head.
    """
    L, H = maps.shape[:2]
    with_mean = np.concatenate([maps, maps.mean(axis=1, keepdims=True)], axis=1)  # (L, H + 1, g, g)
    tiles = overlays(image, with_mean.reshape(L * (H + 1), *maps.shape[2:]), thumb, cmap)  # layer by layer
    canvas = _grid_frame(L, H, thumb).copy()
    for index, tile in enumerate(tiles):
        canvas.paste(tile, _tile_origin(*divmod(index, H + 1), H, thumb))
    return canvas
