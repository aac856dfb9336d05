"""From what a user gives (a file, a PIL image, a numpy array, a sketch) to what the model takes.

One function per input kind, shared by the app, the CLI and the tests:

- :func:`preprocess_drawing`: a digit drawn anywhere, at any size, with any pen -> MNIST-like 28x28.
- :func:`preprocess_photo`: a photo of any size and mode -> CIFAR-10-like 32x32 RGB.
- :func:`preprocess_resized`: a photo -> what an imported model (timm's, Hugging Face's) read in training: resized and
  centre-cropped exactly as its own library does it.

:class:`Preprocessing` says which one a weights folder's model takes. All return float32 arrays with values in [0, 1]
on 256 levels, as the datasets' 8-bit images are (so the page, which gets the input as bytes, holds exactly what the
model read), and raise :class:`InputError`, whose message is meant for the user, for anything they cannot use.
"""

from __future__ import annotations

import dataclasses
import io
import os
import warnings
from pathlib import Path
from typing import Any, Union

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps, UnidentifiedImageError

ImageInput = Union[str, os.PathLike, bytes, Image.Image, np.ndarray]

MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_PIXELS = 40_000_000  # checked from the header, before any pixel is decoded
MAX_DIMENSION = 20_000

INK_THRESHOLD = 0.2  # ink above this (in [0, 1], after removing the background) counts as drawn
MIN_INK_PIXELS = 4  # fewer than this is a stray click, not a digit
DIGIT_BOX = 20  # MNIST digits fit a 20x20 box...
DIGIT_CANVAS = 28  # ...centred by centre of mass in a 28x28 image
# Stroke width (as stroke_width measures it) that preprocessing brings a drawing into: the middle of MNIST's range.
STROKE_RANGE = (1.8, 2.9)
WORK_SCALE = 4  # strokes are measured and adjusted at 4x MNIST's resolution

# The drawing the app's canvas sends (app/canvas.py, page/assets/canvas.js), as data/sketches.py draws it too.
CANVAS_SIZE = 112  # the side, in pixels, of the copy the browser sends (SMALL in canvas.js)
DRAWING_PIXELS = 336  # the canvas' own resolution; CSS scales it to the page
PENS = (("thin pen", 8), ("pen", 18), ("brush", 34))


class InputError(ValueError):
    """Input that cannot be classified; the message says why in words meant for the user."""


class NothingDrawn(InputError):
    """A blank canvas or an empty image: there is nothing to classify."""

    def __init__(self, message: str = "Nothing to classify: the image is blank. Draw a digit.") -> None:
        super().__init__(message)


# ---- Decoding ------------------------------------------------------------------------------------


def open_image(source: str | os.PathLike | bytes) -> Image.Image:
    """Open and fully decode an image file (or its bytes) within size limits, as a PIL image.

    Animated images give their first frame; EXIF orientation is applied.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: " + ("a folder, not an image file" if path.is_dir() else "no such file"))
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"{path.name}: the file is larger than {MAX_FILE_BYTES // 2**20} MB")
        data = path.read_bytes()
    else:
        data = bytes(source)
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"the file is larger than {MAX_FILE_BYTES // 2**20} MB")
    if not data:
        raise InputError("the file is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            _check_size(image.width, image.height)
            image.seek(0)
            image.load()
            image = ImageOps.exif_transpose(image)
    except InputError:
        raise
    except UnidentifiedImageError:
        raise InputError("this file is not an image that can be read (PNG, JPEG, GIF, BMP, WebP, TIFF...)") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InputError(f"the image has too many pixels (more than {MAX_PIXELS:,})") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise InputError(f"the image file is damaged or truncated ({exc})") from None
    return image


def _check_size(width: int, height: int) -> None:
    if width * height > MAX_PIXELS or max(width, height) > MAX_DIMENSION:
        raise InputError(f"the image is too large ({width}x{height}); the limit is {MAX_PIXELS:,} pixels")
    if width == 0 or height == 0:
        raise NothingDrawn("Nothing to classify: the image is empty.")


def to_float_array(image: ImageInput) -> np.ndarray:
    """Any supported input -> float32 (H, W, C) in [0, 1], with C in {1 (grey), 2 (grey+alpha), 3 (RGB), 4 (RGBA)}."""
    if isinstance(image, np.ndarray):
        return _array_to_float(image)
    if not isinstance(image, Image.Image):
        if not isinstance(image, (str, os.PathLike, bytes, bytearray, memoryview)):
            raise InputError(f"cannot read an image from a {type(image).__name__}")
        image = open_image(image)
    _check_size(image.width, image.height)
    if image.mode == "F":  # 32-bit float, as scientific tools write it: scaled as a float array is
        return _array_to_float(np.asarray(image, dtype=np.float32))
    if image.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        array = np.asarray(image, dtype=np.float32)
        peak = 65535.0 if image.mode.startswith("I;16") or array.max(initial=0) > 255 else 255.0
        return np.clip(array / peak, 0, 1)[..., None]
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    elif image.mode not in ("L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    array = np.asarray(image, dtype=np.float32) / 255.0
    return array.reshape(image.height, image.width, -1)


def _array_to_float(array: np.ndarray) -> np.ndarray:
    if array.ndim == 3 and array.shape[-1] not in (1, 2, 3, 4) and array.shape[0] in (1, 3, 4):
        array = np.moveaxis(array, 0, -1)  # (C, H, W) -> (H, W, C)
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[-1] not in (1, 2, 3, 4):
        raise InputError(f"an image array must be (H, W) or (H, W, C) with 1-4 channels, not {array.shape}")
    _check_size(array.shape[1], array.shape[0])
    if array.dtype == bool:
        return array.astype(np.float32)
    if np.issubdtype(array.dtype, np.integer):
        if array.dtype == np.uint8:
            return array.astype(np.float32) / 255.0
        peak = 65535.0 if array.dtype == np.uint16 else max(255.0, float(array.max()))
        return np.clip(array.astype(np.float32) / peak, 0, 1)
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError(f"an image array must hold real numbers, not {array.dtype}")
    if not np.isfinite(array).all():
        raise InputError("the image array holds NaN or infinite values")
    peak = float(array.max())
    scaled = array / peak if peak > 1.0 else array  # in the array's own precision: no overflow
    return np.clip(scaled, 0, 1).astype(np.float32)


def eight_bit(image: np.ndarray) -> np.ndarray:
    """An image clipped to [0, 1] and rounded to 256 levels, as float32: the form of MNIST's and CIFAR-10's images."""
    return (np.round(np.clip(image, 0, 1) * 255) / 255).astype(np.float32)


# ---- Drawings -> MNIST ---------------------------------------------------------------------------


def ink_map(pixels: np.ndarray) -> np.ndarray:
    """(H, W, C) in [0, 1] -> (H, W) ink in [0, 1], whatever the colours.

    A transparent layer carries its ink in alpha. Otherwise the background is taken as the most
    common brightness (the median), so dark ink on light paper and light ink on a dark screen both work.
    """
    channels = pixels.shape[-1]
    if channels in (2, 4) and pixels[..., -1].min() < 0.99:
        return pixels[..., -1]
    grey = pixels[..., :3].mean(axis=-1) if channels >= 3 else pixels[..., 0]  # (H, W)
    background = float(np.median(grey))
    if background >= 0.5:  # dark ink on a light background
        return np.clip((background - grey) / max(background, 1e-6), 0, 1)
    return np.clip((grey - background) / max(1.0 - background, 1e-6), 0, 1)


def stroke_width(digit: torch.Tensor) -> float:
    """Mean stroke width in pixels of a (H, W) ink map with its peak at 1.

    Ink mass is width x length and the total edge strength is twice the length, so their ratio gives
    the width without thresholds (a 1 px stroke and a half-covered 2 px stroke read alike).
    MNIST's own test digits measure 1.6-3.3 (5th-95th percentile), median 2.2.
    """
    dy = digit[1:, :-1] - digit[:-1, :-1]
    dx = digit[:-1, 1:] - digit[:-1, :-1]
    edges = torch.sqrt(dx**2 + dy**2).sum()
    return float(2 * digit.sum() / edges.clamp_min(1e-6))


def _fit_box(work: torch.Tensor) -> torch.Tensor:
    """Crop a work-scale ink map to its ink and shrink it so the longest side is 20 px (MNIST's box)."""
    rows = torch.nonzero((work > 0.05).any(dim=1)).flatten()
    cols = torch.nonzero((work > 0.05).any(dim=0)).flatten()
    work = work[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    h, w = work.shape
    size = (max(1, round(h * DIGIT_BOX / max(h, w))), max(1, round(w * DIGIT_BOX / max(h, w))))
    digit = F.interpolate(work[None, None], size=size, mode="area")[0, 0]  # (<=20, <=20)
    return digit / digit.max().clamp_min(1e-6)


def _change_width(work: torch.Tensor, pixels: float) -> torch.Tensor:
    """Dilate (pixels > 0) or erode (pixels < 0) a (H, W) ink map by about |pixels| (at least 2) in stroke width."""
    k = 2 * max(1, round(abs(pixels) / 2)) + 1
    sign = 1.0 if pixels > 0 else -1.0
    padded = F.pad(work[None, None], (k // 2,) * 4)
    return sign * F.max_pool2d(sign * padded, k, stride=1)[0, 0]


def preprocess_drawing(image: ImageInput) -> np.ndarray:
    """A drawn digit -> an MNIST-like (28, 28) float32 image, white ink on black, in [0, 1].

    Works for a sketchpad composite (dark ink on white), a transparent layer (ink in alpha), or a
    photo of ink on paper; the digit may be anywhere on the canvas, at any size, with any pen.
    Steps: find the ink, crop to it, bring the stroke width into MNIST's range, scale the longest
    side to 20 px keeping the aspect ratio, and centre the centre of mass in a 28x28 image.

    Raises:
        NothingDrawn: for a blank or empty image.
        InputError: for anything that is not a usable image.
    """
    ink = ink_map(to_float_array(image))  # (H, W)
    drawn = ink > INK_THRESHOLD
    if drawn.sum() < MIN_INK_PIXELS:
        raise NothingDrawn()
    rows, cols = np.flatnonzero(drawn.any(axis=1)), np.flatnonzero(drawn.any(axis=0))
    crop = torch.from_numpy(np.ascontiguousarray(ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]))  # (h, w)

    # Work at 4x the final size: fine enough to adjust strokes, small enough to be fast.
    h, w = crop.shape
    scale = WORK_SCALE * DIGIT_BOX / max(h, w)
    size = (max(1, round(h * scale)), max(1, round(w * scale)))
    if scale < 1:
        work = F.interpolate(crop[None, None], size=size, mode="area")[0, 0]  # (<=80, <=80)
    else:
        work = F.interpolate(crop[None, None], size=size, mode="bilinear", align_corners=False)[0, 0]
    inked = work[work > 0.05]
    if inked.numel() == 0:  # a few faint dots far apart, averaged away at this scale: nothing to read
        raise NothingDrawn()
    # A pen much thinner than a work pixel leaves faint grey strokes: scale so typical ink is full strength.
    work = (work / torch.quantile(inked, 0.9).clamp_min(1e-6)).clamp_(0, 1)
    work = F.pad(work, (WORK_SCALE * 4,) * 4)  # room for thicker strokes
    low, high = STROKE_RANGE
    for _ in range(4):
        digit = _centre_by_mass(_fit_box(work).numpy())
        width = stroke_width(torch.from_numpy(digit))
        if low <= width <= high:
            break
        adjusted = _change_width(work, ((low if width < low else high) - width) * WORK_SCALE)
        if not (adjusted > 0.05).any():  # thinning would erase the ink altogether: keep the strokes as they are
            break
        work = adjusted
    return digit


def _centre_by_mass(digit: np.ndarray) -> np.ndarray:
    """Paste a (h, w) digit into a 28x28 image so that its centre of mass sits at the centre.

    The shift is sub-pixel (bilinear), so a digit moved on the canvas gives the same image.
    """
    h, w = digit.shape
    ys, xs = np.indices(digit.shape)
    mass = digit.sum()
    com_y, com_x = (ys * digit).sum() / mass, (xs * digit).sum() / mass
    # Pixel centres: the centre of a 28x28 image is at 13.5.
    offset_y = float(np.clip((DIGIT_CANVAS - 1) / 2 - com_y, 0, DIGIT_CANVAS - h))
    offset_x = float(np.clip((DIGIT_CANVAS - 1) / 2 - com_x, 0, DIGIT_CANVAS - w))
    top, left = int(offset_y), int(offset_x)
    fy, fx = offset_y - top, offset_x - left
    padded = np.zeros((h + 1, w + 1), dtype=np.float32)  # (h + 1, w + 1): room for the fractional shift
    padded[:h, :w] += (1 - fy) * (1 - fx) * digit
    padded[1:, :w] += fy * (1 - fx) * digit
    padded[:h, 1:] += (1 - fy) * fx * digit
    padded[1:, 1:] += fy * fx * digit
    canvas = np.zeros((DIGIT_CANVAS + 1, DIGIT_CANVAS + 1), dtype=np.float32)
    canvas[top : top + h + 1, left : left + w + 1] = padded
    canvas = canvas[:DIGIT_CANVAS, :DIGIT_CANVAS]
    # Scale so that typical ink is at full strength, as in MNIST, even where a thin line left grey pixels.
    return eight_bit(canvas / np.quantile(canvas[canvas > 0.05], 0.9))


# ---- Photos -> CIFAR-10 --------------------------------------------------------------------------


FLAT_RANGE = 4 / 255  # a photo whose pixel values all lie closer than this is one flat colour: nothing to classify


def photo_rgb(image: ImageInput) -> np.ndarray:
    """A photo of any size and mode -> float32 (H, W, 3) RGB in [0, 1], transparent areas composited over white.

    Raises:
        NothingDrawn: for an empty image, or one of a single flat colour (all white, all black, fully
            transparent, a single pixel): a model would give it a confident, meaningless label.
        InputError: for anything that is not a usable image.
    """
    pixels = to_float_array(image)  # (H, W, C)
    channels = pixels.shape[-1]
    if channels in (2, 4):
        alpha = pixels[..., -1:]
        pixels = pixels[..., :-1] * alpha + (1.0 - alpha)  # composite over white
    if channels in (1, 2):
        pixels = np.repeat(pixels, 3, axis=-1)
    if np.ptp(pixels.reshape(-1, 3), axis=0).max() < FLAT_RANGE:  # every channel's range
        raise NothingDrawn("Nothing to classify: the image is one flat colour.")
    return pixels


def preprocess_photo(image: ImageInput, size: int = 32) -> np.ndarray:
    """A photo of any size and mode -> a (size, size, 3) float32 RGB image in [0, 1].

    Transparent areas become white (``photo_rgb``); the shorter side is resized to ``size`` and the centre cropped.

    Raises:
        NothingDrawn, InputError: as ``photo_rgb``.
    """
    rgb = torch.from_numpy(np.ascontiguousarray(photo_rgb(image))).permute(2, 0, 1)[None]  # (1, 3, H, W)
    h, w = rgb.shape[-2:]
    scale = size / min(h, w)
    new_h, new_w = max(size, round(h * scale)), max(size, round(w * scale))
    rgb = F.interpolate(rgb, size=(new_h, new_w), mode="bilinear", antialias=True, align_corners=False)
    top, left = (new_h - size) // 2, (new_w - size) // 2
    rgb = rgb[0, :, top : top + size, left : left + size].clamp(0, 1)  # (3, size, size)
    return eight_bit(rgb.permute(1, 2, 0).numpy())


# ---- Photos -> an imported model's input ---------------------------------------------------------

INTERPOLATIONS = {"pil": {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC},
                  "torchvision": {"bilinear": "BILINEAR", "bicubic": "BICUBIC"}}  # by library: what each can do here


def resized_shape(height: int, width: int, resize: int | tuple[int, int]) -> tuple[int, int]:
    """The (height, width) an image is resized to: ``resize`` (h, w) itself, or an int for the shorter side, the
    longer one scaled to keep the aspect ratio and truncated, as torchvision's ``Resize(int)`` does."""
    if not isinstance(resize, int):
        return resize
    short, long = (width, height) if width <= height else (height, width)
    scaled = int(resize * long / short)
    return (scaled, resize) if width <= height else (resize, scaled)


def preprocess_resized(image: ImageInput, size: int, resize: int | tuple[int, int], interpolation: str,
                       library: str) -> np.ndarray:
    """A photo -> a (size, size, 3) float32 RGB image in [0, 1]: resized (``resized_shape``) by ``library`` ("pil":
    PIL's ``Image.resize``, as timm's eval transform does; "torchvision": its ``resize`` of a uint8 tensor with
    antialiasing, as Hugging Face's ``ViTImageProcessor`` does in transformers 5) with ``interpolation``, then the
    centre cropped as torchvision's ``CenterCrop`` (its offsets rounded), then divided by 255 (``ToTensor``). What
    timm's ``create_transform(**resolve_data_config({}, model=m))`` and the processor give, before normalisation,
    which the model does itself.

    Raises:
        NothingDrawn, InputError: as ``photo_rgb``.
    """
    rgb = np.round(photo_rgb(image) * 255).astype(np.uint8)  # (H, W, 3): an 8-bit photo's own values, exactly
    height, width = resized_shape(*rgb.shape[:2], resize)
    if library == "pil":
        rgb = np.asarray(Image.fromarray(rgb).resize((width, height), INTERPOLATIONS[library][interpolation]))
    else:
        from torchvision.transforms.v2 import functional as tvF  # (imported models only)

        mode = getattr(tvF.InterpolationMode, INTERPOLATIONS[library][interpolation])
        chw = torch.from_numpy(rgb).permute(2, 0, 1)  # (3, H, W) uint8
        rgb = tvF.resize(chw, [height, width], interpolation=mode, antialias=True).permute(1, 2, 0).numpy()
    top, left = int(round((height - size) / 2.0)), int(round((width - size) / 2.0))
    return rgb[top : top + size, left : left + size].astype(np.float32) / 255  # (size, size, 3)


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """Which preprocessing a weights folder's model takes (config.json's ``preprocessing``; where there is none, its
    dataset's: vit_demo/data/datasets.py). ``method``: "drawing" (``preprocess_drawing``), "photo"
    (``preprocess_photo``) or "resize_crop" (``preprocess_resized``, with ``resize``, ``interpolation`` and
    ``library``: an imported model's own steps). The model normalises what it gets with its config's mean and std."""

    method: str
    resize: int | tuple[int, int] | None = None  # the shorter side, or (height, width)
    interpolation: str | None = None
    library: str | None = None

    def __post_init__(self) -> None:
        resizing = (self.resize, self.interpolation, self.library)
        if self.method in ("drawing", "photo") and resizing != (None, None, None):
            raise ValueError(f"the {self.method} preprocessing takes no resize, interpolation or library")
        if self.method == "resize_crop":
            if self.interpolation not in INTERPOLATIONS.get(self.library, {}):
                raise ValueError(f"cannot resize with {self.library}'s {self.interpolation!r} interpolation: "
                                 f"{', '.join(f'{k}: {sorted(v)}' for k, v in INTERPOLATIONS.items())}")
            sides = (self.resize,) if isinstance(self.resize, int) else self.resize
            if not isinstance(sides, tuple) or len(sides) not in (1, 2) or not all(
                    isinstance(side, int) and side > 0 for side in sides):
                raise ValueError(f"resize must be a positive whole number or [height, width], not {self.resize}")
        elif self.method not in ("drawing", "photo"):
            raise ValueError(f"unknown preprocessing {self.method!r}: drawing, photo or resize_crop")

    def apply(self, image: ImageInput, size: int) -> np.ndarray:
        """``image`` as the model of input ``size`` reads it, in [0, 1]: (28, 28) for digits, else (size, size, 3)."""
        if self.method == "drawing":
            return preprocess_drawing(image)
        if self.method == "photo":
            return preprocess_photo(image, size)
        return preprocess_resized(image, size, self.resize, self.interpolation, self.library)

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in dataclasses.asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Preprocessing:
        resize = values.get("resize")
        return cls(**{**values, "resize": tuple(resize) if isinstance(resize, list) else resize})
