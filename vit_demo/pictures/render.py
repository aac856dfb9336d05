"""Pictures from explanation maps and from the model's weights, with numpy and PIL (no matplotlib figure
per request).

The explanation pictures take the model's input image (values in [0, 1]; (H, W) grey or (H, W, 3) RGB);
the pictures of the weights take what ``inside`` computes. All return a PIL image ready for the UI.
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


# The house's two colour scales, each one matplotlib table here, sent to the page as it is (page_numbers, page_model,
# the patching view's data-colours): how much (attention, relevance: none to the most) and which way (patching,
# filter weights: -1 blue, 0 white, 1 red).
HEAT = "inferno"
DIVERGING = "RdBu_r"


@functools.cache
def colormap(name: str = HEAT) -> np.ndarray:
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


# The heatmap's share of an overlay pixel rises with the map's level, from HEAT_ALPHA[0] where the map is 0 (the
# image shows through) to HEAT_ALPHA[1] at its maximum, where the colour is the key's own (at one share for every
# level, the hottest colour blended over black ink to olive). The page blends with the same numbers (picture.js).
HEAT_ALPHA = (0.35, 1.0)


@functools.cache
def _blend_tables(name: str) -> np.ndarray:
    """(3 channels, 256 levels, 256 values below) -> the blended byte: the value below plus the level's share of the
    way to the level's colour, truncated, in float64 as the page computes it (picture.js)."""
    levels, below = np.arange(256.0), np.arange(256.0)
    share = HEAT_ALPHA[0] + (HEAT_ALPHA[1] - HEAT_ALPHA[0]) * levels / 255  # (256,)
    colours = colormap(name).astype(np.float64).T  # (3, 256)
    blended = below[None, None, :] + share[None, :, None] * (colours[:, :, None] - below[None, None, :])
    return np.trunc(blended).astype(np.uint8)  # (3, 256, 256)


def overlays(image: np.ndarray, maps: np.ndarray, size: int, cmap: str = HEAT) -> list[Image.Image]:
    """Heatmaps over the image: (N, g, g) maps -> N pictures of size x size.

    Each map is scaled to its own maximum and upsampled smoothly; the image shows through underneath, the more the
    colder the map (HEAT_ALPHA). This is the app's hottest loop (some 75 pictures per photo): the upsampling is two
    matrix products, the colouring and blending one lookup per channel in that channel's table, flattened (the level
    in the high byte of the index, the value below in the low byte), one small picture at a time.
    """
    peaks = np.maximum(maps.reshape(len(maps), -1).max(axis=1), 1e-12)  # (N,)
    base = np.asarray(base_picture(image, size))  # (size, size, 3) uint8
    tables = _blend_tables(cmap).reshape(3, -1)  # (3 channels, 256 levels x 256 values below)
    below = [base[..., c].astype(np.uint16) for c in range(3)]  # 3 x (size, size)
    pictures = []
    for scaled in maps * (255 / peaks)[:, None, None]:  # (g, g) in [0, 255], one at a time: small buffers only
        levels = _upsample(scaled[None], size, smooth=True)[0].clip(0, 255).astype(np.uint16) << 8  # (size, size)
        pictures.append(Image.merge("RGB", [Image.fromarray(tables[c].take(levels | below[c])) for c in range(3)]))
    return pictures


def overlay(image: np.ndarray, heatmap: np.ndarray, size: int = 336, cmap: str = HEAT) -> Image.Image:
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
def patch_grid_layer(grid: int, size: int) -> Image.Image:
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
        # White with a dark outline: readable on sky, grey and white ink as on black.
        draw.text((col * step + 3, row * step + 1), str(index), fill=BACKGROUND, font=label_font, stroke_width=2,
                  stroke_fill=TEXT)
    return layer


def patch_grid(image: np.ndarray, grid: int, size: int = 336, selected: int | None = None) -> Image.Image:
    """The input as the model sees it: cut into grid x grid patches, each numbered in reading order."""
    picture = base_picture(image, size).convert("RGBA")
    picture = Image.alpha_composite(picture, patch_grid_layer(grid, size)).convert("RGB")
    if selected is not None:
        mark_patch(picture, selected, grid)
    return picture


def _grid_spacing(thumb: int) -> tuple[int, int, int, int]:
    """attention_grid's gap, label column, header row and label font size, in pixels: 4, 64, 24 and 15 for
    96-pixel thumbnails, in proportion for others (a grid for slides keeps its labels legible)."""
    scale = max(thumb / 96, 1.0)
    return round(4 * scale), round(64 * scale), round(24 * scale), round(15 * scale)


def _tile_origin(layer: int, head: int, heads: int, thumb: int) -> tuple[int, int]:
    """Top-left corner of a tile; the mean column (head == heads) stands a little apart."""
    gap, left, top, _ = _grid_spacing(thumb)
    x = left + head * (thumb + gap) + (gap if head == heads else 0)
    return x, top + layer * (thumb + gap)


def attention_grid_geometry(layers: int, heads: int, thumb: int = 96) -> dict:
    """Where attention_grid puts everything, for a page that draws the grid itself: the picture's size, the
    thumbnail's, each tile's top-left corner (layer by layer, and within a layer head by head then the mean), the
    labels' font size, and the centre of each column's label (the heads, then "mean") and each row's ("layer N")."""
    gap, left, top, text_size = _grid_spacing(thumb)
    return {"size": [left + (heads + 1) * (thumb + gap) + gap, top + layers * (thumb + gap)], "thumb": thumb,
            "origins": [_tile_origin(layer, head, heads, thumb)
                        for layer in range(layers) for head in range(heads + 1)],
            "font": text_size,
            "columns": [(_tile_origin(0, head, heads, thumb)[0] + thumb // 2, top // 2) for head in range(heads + 1)],
            "rows": [(left // 2 - 2, _tile_origin(layer, 0, heads, thumb)[1] + thumb // 2) for layer in range(layers)]}


@functools.cache
def _grid_frame(layers: int, heads: int, thumb: int) -> Image.Image:
    """The white frame of attention_grid with its row and column labels, drawn once per shape. Don't draw on it."""
    geometry = attention_grid_geometry(layers, heads, thumb)
    frame = Image.new("RGB", tuple(geometry["size"]), BACKGROUND)
    draw = ImageDraw.Draw(frame)
    label_font = font(geometry["font"])
    for head, centre in enumerate(geometry["columns"]):
        draw.text(centre, "mean" if head == heads else f"head {head + 1}", fill=TEXT, font=label_font, anchor="mm")
    for layer, centre in enumerate(geometry["rows"]):
        draw.text(centre, f"layer {layer + 1}", fill=TEXT, font=label_font, anchor="mm")
    return frame


def attention_grid_layout(layers: int, heads: int, thumb: int = 96) -> tuple[Image.Image, list[tuple[int, int]]]:
    """attention_grid's white frame with its labels, and each tile's top-left corner, layer by layer and within a
    layer head by head then the mean: what a page needs to draw the same grid from the maps."""
    return _grid_frame(layers, heads, thumb), attention_grid_geometry(layers, heads, thumb)["origins"]


def attention_grid_thumb(heads: int, width: int) -> int:
    """The thumbnail size that makes attention_grid (``heads`` and the mean) at least ``width`` pixels wide."""
    thumb = 96
    while _tile_origin(0, heads, heads, thumb)[0] + thumb + _grid_spacing(thumb)[0] < width:
        thumb += 1
    return thumb


def attention_grid(image: np.ndarray, maps: np.ndarray, thumb: int = 96, cmap: str = HEAT) -> Image.Image:
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


def _crisp_levels(maps: np.ndarray, low: float, high: float, size: int) -> np.ndarray:
    """(N, h, w) values from low to high -> (N, size, size) uint8 levels 0..255, upsampled nearest (crisp)."""
    scaled = (maps - low) * (255 / (high - low))
    return _upsample(scaled, size, smooth=False).round().clip(0, 255).astype(np.uint8)


_FILTER_COLUMNS, _FILTER_GAP, _FILTER_LABEL = 7, 10, 18  # filter_components: tiles per row, spacing, label row


def _filter_origin(index: int, tile: int) -> tuple[int, int]:
    """Top-left corner of component ``index``'s tile; its label goes underneath."""
    row, col = divmod(index, _FILTER_COLUMNS)
    return _FILTER_GAP + col * (tile + _FILTER_GAP), _FILTER_GAP + row * (tile + _FILTER_LABEL + _FILTER_GAP)


def filter_components(components: np.ndarray, share: np.ndarray, tile: int = 56) -> Image.Image:
    """The patch-embedding filters' principal components as a grid of tiles, each labelled with its rank and
    share of the filters' variance (the ViT paper's Fig. 7, left).

    ``components``: (K, C, p, p) unit vectors, signed; ``share``: (K,). Each tile is scaled to its own largest
    magnitude, symmetric around zero: RGB components have mid-grey as zero, grey ones a diverging colormap; the
    colour key under the tiles says which.
    """
    K, C, p, _ = components.shape
    peaks = np.abs(components).max(axis=(1, 2, 3), keepdims=True).clip(1e-12)  # (K, 1, 1, 1)
    levels = _crisp_levels((components / peaks).reshape(K * C, p, p), -1, 1, tile)  # (K*C, tile, tile); 128 = 0
    if C == 1:
        rgb = colormap(DIVERGING)[levels]  # (K, tile, tile, 3)
    else:
        rgb = levels.reshape(K, C, tile, tile).transpose(0, 2, 3, 1)  # (K, tile, tile, 3)
    rows = (K + _FILTER_COLUMNS - 1) // _FILTER_COLUMNS
    width = _FILTER_GAP + min(K, _FILTER_COLUMNS) * (tile + _FILTER_GAP)
    height = _filter_origin(rows * _FILTER_COLUMNS, tile)[1]  # where a next row of tiles would start
    canvas = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    for index, (picture, part) in enumerate(zip(rgb, share)):
        x, y = _filter_origin(index, tile)
        canvas.paste(Image.fromarray(picture), (x, y))
        percent = f"{100 * part:.0f}%" if part >= 0.01 else f"{100 * part:.1f}%"
        draw.text((x + tile // 2, y + tile + _FILTER_LABEL // 2), f"{index + 1} · {percent}", fill=TEXT,
                  font=font(13), anchor="mm")
    if C == 1:
        return with_colour_key(canvas, colormap(DIVERGING), ("negative weight", "0", "positive weight"))
    return with_colour_key(canvas, grey_ramp(), ("negative", "0", "positive, per colour"))


_KEY_BAR, KEY_HEIGHT, _KEY_WIDTH = 12, 44, 280  # with_colour_key: the bar's height, the strip's, the bar's most


def with_colour_key(picture: Image.Image, table: np.ndarray, labels: tuple[str, str, str]) -> Image.Image:
    """``picture`` with its colour key below it: the lookup table ``table`` (256, 3) as a bar, ``labels`` under its
    left end, middle and right end."""
    width = min(_KEY_WIDTH, picture.width - 20)
    keyed = Image.new("RGB", (picture.width, picture.height + KEY_HEIGHT), BACKGROUND)
    keyed.paste(picture, (0, 0))
    steps = np.linspace(0, 255, width).round().astype(int)  # (width,)
    bar = np.broadcast_to(table[steps][None], (_KEY_BAR, width, 3))  # (bar, width, 3)
    left, top = (picture.width - width) // 2, picture.height + 6
    keyed.paste(Image.fromarray(np.ascontiguousarray(bar)), (left, top))
    draw = ImageDraw.Draw(keyed)
    for x, label, anchor in zip((left, left + width // 2, left + width), labels, ("la", "ma", "ra")):
        draw.text((x, top + _KEY_BAR + 4), label, fill=TEXT, font=font(13), anchor=anchor)
    return keyed


def grey_ramp() -> np.ndarray:
    """Black to white as a (256, 3) uint8 lookup table: an RGB filter's key, mid-grey its zero."""
    return np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)


_SIMILARITY_RANGE = (-1, 1)  # cosine similarity: a fixed range, so that the maps compare
SIMILARITY_KEY = ("-1", "0", "1: the same position")  # under the similarity maps' colour bar
SIMILARITY_MARK = (255, 40, 40)  # the outline of the chosen patch: red stands out on viridis
_POS_GAP, _POS_LEFT, _POS_TOP = 2, 36, 40  # position_similarity_grid: spacing, row-label column, header rows


def _similarity_pictures(maps: np.ndarray, size: int) -> np.ndarray:
    """(N, g, g) cosine similarities -> (N, size, size, 3) uint8, viridis over -1..1, crisp patches."""
    return colormap("viridis")[_crisp_levels(maps, *_SIMILARITY_RANGE, size)]


def _position_origin(index: int, grid: int, cell: int) -> tuple[int, int]:
    """Top-left corner of cell ``index`` (row-major) of position_similarity_grid."""
    row, col = divmod(index, grid)
    return _POS_LEFT + col * (cell + _POS_GAP), _POS_TOP + row * (cell + _POS_GAP)


def position_cell_box(index: int, grid: int, cell: int) -> tuple[int, int, int, int]:
    """Where cell ``index`` (row-major) of position_similarity_grid lies in its picture: (left, top, right, bottom),
    right and bottom exclusive."""
    left, top = _position_origin(index, grid, cell)
    return left, top, left + cell, top + cell


def position_cell_at(x: float, y: float, grid: int, cell: int) -> int | None:
    """The cell (row-major index) of position_similarity_grid under pixel (x, y); None in a gap, on a label or
    outside."""
    (col, dx), (row, dy) = divmod(x - _POS_LEFT, cell + _POS_GAP), divmod(y - _POS_TOP, cell + _POS_GAP)
    if not (0 <= col < grid and 0 <= row < grid and dx < cell and dy < cell):
        return None
    return int(row) * grid + int(col)


def position_similarity_grid(similarity: np.ndarray, cell: int = 56, selected: int | None = None) -> Image.Image:
    """How alike the position embeddings are (the ViT paper's Fig. 7, centre): a g x g grid of g x g maps, the
    map in row r, column c showing patch (r, c)'s cosine similarity to every patch; ``selected`` is outlined.

    ``similarity``: (g, g, g, g), as ``inside.position_similarity`` returns. A cell of 56 px divides evenly
    for g = 7 and g = 8; ``position_cell_at`` maps a click back to a cell.
    """
    g = similarity.shape[0]
    pictures = _similarity_pictures(similarity.reshape(g * g, g, g), cell)  # (g*g, cell, cell, 3)
    span = g * (cell + _POS_GAP)
    canvas = Image.new("RGB", (_POS_LEFT + span, _POS_TOP + span), BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    label_font = font(14)
    for index, picture in enumerate(pictures):
        canvas.paste(Image.fromarray(picture), _position_origin(index, g, cell))
    for i in range(g):
        x, y = _position_origin(i * g + i, g, cell)  # the diagonal: column i and row i
        draw.text((x + cell // 2, _POS_TOP - 10), str(i + 1), fill=TEXT, font=label_font, anchor="mm")
        draw.text((_POS_LEFT // 2, y + cell // 2), str(i + 1), fill=TEXT, font=label_font, anchor="mm")
    draw.text((_POS_LEFT + span // 2, 10), "column", fill=TEXT, font=label_font, anchor="mm")
    draw.text((_POS_LEFT // 2, _POS_TOP - 10), "row", fill=TEXT, font=label_font, anchor="mm")
    if selected is not None:
        left, top, right, bottom = position_cell_box(selected, g, cell)
        draw.rectangle((left - 1, top - 1, right, bottom), outline=SIMILARITY_MARK, width=3)
    return with_colour_key(canvas, colormap("viridis"), SIMILARITY_KEY)


def position_similarity_large(similarity: np.ndarray, patch: int, size: int = 336) -> Image.Image:
    """One patch's position similarity to every patch, large, that patch outlined.

    ``similarity``: (g, g, g, g), as ``inside.position_similarity`` returns; ``patch``: row-major index.
    """
    g = similarity.shape[0]
    row, col = divmod(patch, g)
    picture = Image.fromarray(_similarity_pictures(similarity[row, col][None], size)[0])
    return with_colour_key(mark_patch(picture, patch, g, SIMILARITY_MARK), colormap("viridis"), SIMILARITY_KEY)
