"""The page's preprocessing (vit_demo/page/assets/page/preprocess.js, run under Node by tests/page_preprocess.mjs)
against Python's (vit_demo.data.preprocess), on what the page would feed it: 1,000 canvas drawings and 200 photos;
and photos preprocessed for an imported model (preprocess_resized: with PIL for timm's, with torchvision for Hugging
Face's), which must match bit for bit.

A drawing is made as the page makes it: strokes drawn on the 336x336 canvas with one of the app's three pens
(preprocess.PENS), the canvas downsampled to 112x112 (canvas.js: drawImage with smoothing; here an area average) with
ink 255 on 0, and read by Python as a (112, 112) uint8 array (what the page's source reads). A photo is
RGBA pixels, as getImageData gives them for a decoded upload. For each, the two outputs must be identical on at least
99% of their pixels and the shipped model must read them as the same class; a blank canvas or a flat photo must be
refused by both with the same message.
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import CIFAR_CLASSES, HAS_SHARED_CIFAR, STROKES, mnist_test_digits, node_major
from PIL import Image, ImageDraw

from vit_demo.data.preprocess import (CANVAS_SIZE, DRAWING_PIXELS, PENS, InputError, NothingDrawn, preprocess_drawing,
                                      preprocess_photo, preprocess_resized)

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "tests" / "page_preprocess.mjs"
DRAWINGS, PHOTOS = 1000, 200
SUPERSAMPLE = 2  # strokes are drawn at twice the canvas' resolution, then averaged: antialiased as a canvas draws them
PEN_WIDTHS = [width for _, width in PENS]
DRAWING, PHOTO, RESIZED = 0, 1, 2  # RESIZED: preprocess_resized (preprocessResized)
INTERPOLATIONS = ("nearest", "bilinear", "bicubic")  # as page_preprocess.mjs numbers them
LIBRARIES = ("pil", "torchvision")  # likewise
OK, NOTHING_DRAWN, INPUT_ERROR, OTHER_ERROR = 0, 1, 2, 3


pytestmark = pytest.mark.skipif(node_major() < 20, reason="the page's modules run under Node 20 or later, "
                                                          "which is not on the PATH")


# ---- Canvas drawings, as the page makes them -------------------------------------------------------------------------


class CanvasPen:
    """What conftest.STROKES draws with (an ImageDraw), drawn instead on the big canvas: the 100x100 grid mapped to a
    box of the canvas, every stroke the pen's width in canvas pixels, with round caps and joins as canvas.js sets."""

    def __init__(self, draw: ImageDraw.ImageDraw, box: tuple[float, float, float, float], pen: float) -> None:
        self.draw, self.box, self.pen = draw, box, pen * SUPERSAMPLE

    def _xy(self, x: float, y: float) -> tuple[float, float]:
        left, top, sx, sy = self.box
        return (left + x * sx / 100) * SUPERSAMPLE, (top + y * sy / 100) * SUPERSAMPLE

    def _dot(self, x: float, y: float) -> None:
        r = self.pen / 2
        self.draw.ellipse((x - r, y - r, x + r, y + r), fill=255)

    def line(self, points, fill=None, width=None, joint=None, caps=True) -> None:
        xy = [self._xy(*p) for p in points]
        self.draw.line(xy, fill=255, width=max(1, round(self.pen)), joint="curve")
        for p in xy if caps else ():
            self._dot(*p)

    def _ellipse_points(self, box, start: float, end: float) -> list[tuple[float, float]]:
        x0, y0, x1, y1 = box
        end = end if end > start else end + 360
        angles = np.radians(np.linspace(start, end, 64))
        return [((x0 + x1) / 2 + (x1 - x0) / 2 * np.cos(a), (y0 + y1) / 2 + (y1 - y0) / 2 * np.sin(a)) for a in angles]

    def arc(self, box, start, end, fill=None, width=None) -> None:
        self.line(self._ellipse_points(box, start, end))

    def ellipse(self, box, outline=None, width=None) -> None:
        self.line(self._ellipse_points(box, 0, 360))


def to_page_bytes(ink: np.ndarray) -> np.ndarray:
    """A supersampled ink image in [0, 255] (ink bright) -> the 112x112 uint8 the canvas sends (its 336x336
    downsampled with smoothing: an area average here)."""
    factor = ink.shape[0] // CANVAS_SIZE
    small = ink.reshape(CANVAS_SIZE, factor, CANVAS_SIZE, factor).mean(axis=(1, 3))
    return np.clip(np.round(small), 0, 255).astype(np.uint8)


def blank_canvas() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("L", (DRAWING_PIXELS * SUPERSAMPLE,) * 2, 0)
    return image, ImageDraw.Draw(image)


def stroke_digit(rng: np.random.Generator) -> np.ndarray:
    """One of conftest's stroke digits, at a random place, size and aspect, with one of the three pens."""
    digit = str(rng.integers(10))
    size = rng.uniform(50, 330)
    sx, sy = size * rng.uniform(0.7, 1.2), size * rng.uniform(0.8, 1.2)
    left, top = rng.uniform(-0.1 * sx, DRAWING_PIXELS - 0.9 * sx), rng.uniform(-0.1 * sy, DRAWING_PIXELS - 0.9 * sy)
    image, draw = blank_canvas()
    STROKES[digit](CanvasPen(draw, (left, top, sx, sy), rng.choice(PEN_WIDTHS)), 1)
    return to_page_bytes(np.asarray(image, dtype=np.float32))


def mnist_pen_digit(digit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A real MNIST test digit as someone would draw it: its skeleton traced with one of the pens, at a random place
    and size on the canvas."""
    from skimage.morphology import skeletonize

    grid = 112  # the skeleton's resolution: the digit at 4x
    skeleton = skeletonize(np.asarray(Image.fromarray(digit).resize((grid, grid), Image.BILINEAR)) > 100)
    size = rng.uniform(60, 330)
    left, top = rng.uniform(-0.1 * size, DRAWING_PIXELS - 0.9 * size, 2)
    image, draw = blank_canvas()
    pen = CanvasPen(draw, (left, top, size * 100 / grid, size * 100 / grid), rng.choice(PEN_WIDTHS))
    for y, x in zip(*np.nonzero(skeleton)):  # a round dot on each skeleton pixel, a segment to each neighbour
        pen.line([(x, y)])
        for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
            if y + dy < grid and 0 <= x + dx < grid and skeleton[y + dy, x + dx]:
                pen.line([(x, y), (x + dx, y + dy)], caps=False)
    return to_page_bytes(np.asarray(image, dtype=np.float32))


def mnist_example(digit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A real MNIST test digit drawn on the canvas as the page draws its examples (an image scaled onto it)."""
    size = int(rng.uniform(60, 336)) * SUPERSAMPLE
    full = DRAWING_PIXELS * SUPERSAMPLE
    canvas = np.zeros((full, full), dtype=np.float32)
    top, left = rng.integers(0, full - size + 1, 2)
    canvas[top : top + size, left : left + size] = np.asarray(Image.fromarray(digit).resize((size, size), Image.BILINEAR))
    return to_page_bytes(canvas)


def edge_drawings(digits: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """What a user also does: a dot, a line along the border, a huge brush stroke, a tiny digit, dark ink on a light
    canvas, a faint pen, a blank or nearly blank canvas, a canvas all ink."""
    cases = []
    for pen in PEN_WIDTHS:  # one tap of each pen
        image, draw = blank_canvas()
        CanvasPen(draw, (0, 0, 100, 100), pen).line([(150, 170)])
        cases.append((f"dot, pen {pen}", to_page_bytes(np.asarray(image, dtype=np.float32))))
    for name, points in [("top border", [(0, 2), (336, 2)]), ("left border", [(1, 0), (1, 336)]),
                         ("corner", [(0, 330), (8, 336)]), ("bottom right", [(300, 334), (336, 300)])]:
        image, draw = blank_canvas()
        CanvasPen(draw, (0, 0, 100, 100), PEN_WIDTHS[1]).line(points)
        cases.append((f"line at the {name}", to_page_bytes(np.asarray(image, dtype=np.float32))))
    for name, points in [("zigzag", [(20, 20), (316, 60), (20, 120), (316, 180), (20, 240), (316, 300)]),
                         ("scribble", [(40, 40), (300, 300), (40, 300), (300, 40), (168, 20), (168, 320)])]:
        image, draw = blank_canvas()
        CanvasPen(draw, (0, 0, 100, 100), PEN_WIDTHS[2] * 2).line(points)
        cases.append((f"huge thick {name}", to_page_bytes(np.asarray(image, dtype=np.float32))))
    for digit, (left, top, size, pen) in zip("1478", [(150, 150, 22, 8), (10, 300, 28, 8), (300, 10, 30, 18),
                                                       (160, 40, 24, 8)]):
        image, draw = blank_canvas()
        STROKES[digit](CanvasPen(draw, (left, top, size, size), pen), 1)
        cases.append((f"tiny {digit}, pen {pen}", to_page_bytes(np.asarray(image, dtype=np.float32))))
    rng = np.random.default_rng(7)
    for i in range(4):
        cases.append((f"dark on light {i}", 255 - mnist_pen_digit(digits[i], rng)))
    cases.append(("faint pen", (mnist_pen_digit(digits[4], rng) * (60 / 255)).round().astype(np.uint8)))
    cases.append(("blank", np.zeros((CANVAS_SIZE, CANVAS_SIZE), np.uint8)))
    few = np.zeros((CANVAS_SIZE, CANVAS_SIZE), np.uint8)
    few[50, 50:53] = 255
    cases.append(("three pixels", few))
    cases.append(("all ink", np.full((CANVAS_SIZE, CANVAS_SIZE), 255, np.uint8)))
    return cases


def canvas_drawings(mnist_root: Path) -> list[tuple[str, np.ndarray]]:
    """DRAWINGS (name, 112x112 uint8) canvases: the edge cases, then real MNIST digits traced with a pen or pasted
    as the page's examples are, and stroke digits."""
    digits, _ = mnist_test_digits(mnist_root, 600)
    rng = np.random.default_rng(29)
    cases = edge_drawings(digits)
    traced, pasted = 430, 90
    cases += [(f"MNIST #{i} traced", mnist_pen_digit(digits[i], rng)) for i in range(traced)]
    cases += [(f"MNIST #{i} pasted", mnist_example(digits[i], rng)) for i in range(traced, traced + pasted)]
    while len(cases) < DRAWINGS:
        cases.append((f"strokes {len(cases)}", stroke_digit(rng)))
    return cases


# ---- Photos, as a decoded upload gives them ---------------------------------------------------------------------------


def rgba(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("RGBA")).copy()


def with_transparency(pixels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Some alpha: a soft round cut-out, a gradient, or a fully transparent frame (RGB left as it was)."""
    h, w = pixels.shape[:2]
    ys, xs = np.indices((h, w))
    kind = rng.integers(3)
    if kind == 0:
        r = np.hypot((ys - h / 2) / (h / 2), (xs - w / 2) / (w / 2))
        alpha = np.clip((1.1 - r) * 5, 0, 1) * 255
    elif kind == 1:
        alpha = xs / max(w - 1, 1) * 255
    else:
        alpha = np.full((h, w), 255.0)
        alpha[: h // 5], alpha[:, : w // 5] = 0, 0
    pixels[..., 3] = np.round(alpha).astype(np.uint8)
    return pixels


def random_size(rng: np.random.Generator, i: int) -> tuple[int, int]:
    """(width, height): large, medium, smaller than 32 on a side, or long and thin."""
    kind = i % 10
    if kind < 2:
        return int(rng.integers(600, 1300)), int(rng.integers(400, 1000))
    if kind < 7:
        return int(rng.integers(32, 400)), int(rng.integers(32, 400))
    if kind < 9:
        return int(rng.integers(4, 40)), int(rng.integers(4, 32))
    return (int(rng.integers(500, 1200)), int(rng.integers(20, 80)))[:: 1 if rng.random() < 0.5 else -1]


def source_photos(cifar_root: Path) -> list[tuple[str, Image.Image]]:
    """CIFAR-10 test photos (the fixture's 20 a class) and scikit-image's sample photos."""
    from vit_demo.data.outside_photos import SKIMAGE_PHOTOS, _package_folder

    sources = []
    for name in CIFAR_CLASSES:
        for path in sorted((cifar_root / "cifar10" / "test" / name).glob("*.png"))[:12]:
            sources.append((f"CIFAR {name} {path.stem}", Image.open(path).convert("RGB")))
    skimage_data = _package_folder("skimage", "data")
    for name in SKIMAGE_PHOTOS:
        sources.append((f"skimage {name}", Image.open(skimage_data / name).convert("RGB")))
    return sources


def photos(cifar_root: Path) -> list[tuple[str, np.ndarray]]:
    """PHOTOS (name, (H, W, 4) uint8 RGBA): the sources at random sizes and aspect ratios, a quarter of them with
    transparency, and the images there is nothing to classify in."""
    rng = np.random.default_rng(290)
    sources = source_photos(cifar_root)
    flat = np.zeros((40, 50, 4), np.uint8)
    flat[...] = (200, 30, 90, 255)
    nearly = flat.copy()
    nearly[::2, ::3, 1] += 3  # a range of 3/255: flat
    barely = flat.copy()
    barely[::2, ::3, 1] += 4  # 4/255: not flat
    clear = rng.integers(0, 256, (30, 30, 4), dtype=np.uint8)
    clear[..., 3] = 0  # fully transparent: white
    cases = [("one flat colour", flat), ("nearly flat", nearly), ("barely not flat", barely),
             ("fully transparent", clear), ("one pixel", flat[:1, :1].copy()), ("empty", flat[:0].copy()),
             ("exactly 32x32", rgba(sources[0][1]))]
    i = 0
    while len(cases) < PHOTOS:
        name, source = sources[int(rng.integers(len(sources)))]
        width, height = random_size(rng, i)
        pixels = rgba(source.resize((width, height), Image.BICUBIC if i % 2 else Image.LANCZOS))
        if i % 4 == 3:
            pixels = with_transparency(pixels, rng)
        cases.append((f"{name} at {width}x{height}{' with alpha' if i % 4 == 3 else ''}", pixels))
        i += 1
    return cases


# ---- Photos for an imported model (preprocess_resized), as a decoded upload gives them ------------------------------

TIMM = {"size": 224, "resize": 248, "interpolation": "bicubic"}  # timm's ViTs at 224: crop_pct 0.9, bicubic
# Hugging Face's ViTImageProcessor (transformers 5) at 224: 224x224 (the aspect not kept), bilinear, by torchvision
HF = {"size": 224, "resize": (224, 224), "interpolation": "bilinear", "library": "torchvision"}


def outside_photo(name: str) -> Image.Image:
    """One of scikit-image's sample photos (matplotlib's for Grace Hopper), as RGB: real photos that come with the
    test requirements, so every machine has them."""
    from vit_demo.data.outside_photos import _package_folder

    folder = _package_folder("matplotlib", "mpl-data/sample_data") if name == "grace_hopper.jpg" else \
        _package_folder("skimage", "data")
    return Image.open(folder / name).convert("RGB")


def cifar_cases(cifar_root: Path, rng: np.random.Generator, options_for) -> list[tuple[str, np.ndarray, dict]]:
    """Two CIFAR-10 test photos of each class (real where ../shared/data has them), the second with transparency,
    upscaled by the resize ``options_for(k)`` gives (k: the class and the photo's place, added)."""
    real, cases = "real" if HAS_SHARED_CIFAR else "generated", []
    for i, label in enumerate(CIFAR_CLASSES):
        for j, path in enumerate(sorted((cifar_root / "cifar10" / "test" / label).glob("*.png"))[:2]):
            options, pixels = options_for(i + j), rgba(Image.open(path))
            if j:
                pixels = with_transparency(pixels, rng)
            cases.append((f"{real} CIFAR-10 {label} {path.stem}{' with alpha' if j else ''}, {options}", pixels,
                          options))
    return cases


def refused_cases(rng: np.random.Generator, options: dict) -> list[tuple[str, np.ndarray, dict]]:
    """What both sides refuse, in the same words: a flat photo, a transparent one, an empty one, one too large."""
    flat = np.full((40, 50, 4), (200, 30, 90, 255), np.uint8)
    clear = rng.integers(0, 256, (30, 30, 4), dtype=np.uint8)
    clear[..., 3] = 0
    return [(f"refused: {name}", pixels, options) for name, pixels in [
        ("one flat colour", flat), ("fully transparent", clear), ("empty", flat[:0]),
        ("too large", np.zeros((1, 20_001, 4), np.uint8))]]


def resized_photos(cifar_root: Path) -> list[tuple[str, np.ndarray, dict]]:
    """(name, (H, W, 4) uint8 RGBA, preprocessResized's options), each name saying whether the photo is real.

    Real: scikit-image's and matplotlib's photos whole (downscaled: the rocket at 640x427 to 248 then 224 bicubic, as
    timm's ViTs take it), a user's crop of one (500x375 to 256 then 224 bilinear), some at random sizes and aspect
    ratios, four with transparency; CIFAR-10 test photos (real where ../shared/data has them, generated otherwise)
    upscaled from 32x32 (to 248 then 224). Every interpolation, shorter sides that make the crop's offset a half
    (rounded to even) and a [height, width] resize. Generated: a tiny image, images over 100 times taller than wide
    (which PIL resizes along the height first), noise. Then the four refusals."""
    rng = np.random.default_rng(46)
    cases = [(f"real rocket.jpg 640x427, {TIMM}", rgba(outside_photo("rocket.jpg")), TIMM),
             ("real motorcycle_left.png cropped to 500x375",
              rgba(outside_photo("motorcycle_left.png").crop((120, 60, 620, 435))),
              {"size": 224, "resize": 256, "interpolation": "bilinear"})]
    for name, options in [("astronaut.png", TIMM), ("astronaut.png", {**TIMM, "interpolation": "nearest"}),
                          ("coffee.png", {**TIMM, "resize": 235}),  # crop_pct 0.95: a top offset of 5.5 -> 6
                          ("text.png", {**TIMM, "resize": 233, "interpolation": "bilinear"}),  # 4.5 -> 4
                          ("hubble_deep_field.jpg", TIMM), ("retina.jpg", {**TIMM, "resize": 256}),
                          ("grace_hopper.jpg", TIMM), ("camera.png", {"size": 384, "resize": 384,
                                                                      "interpolation": "bicubic"}),
                          ("page.png", {**TIMM, "interpolation": "nearest"}),
                          ("coins.png", {**TIMM, "resize": (240, 260)})]:
        image = outside_photo(name)
        cases.append((f"real {name} {image.width}x{image.height}, {options}", rgba(image), options))
    for i in range(12):  # real photos at random sizes (resampled by PIL, as the photo tests make them)
        name = ("astronaut.png", "coffee.png", "rocket.jpg", "motorcycle_left.png", "ihc.png")[i % 5]
        width, height = random_size(rng, i + 1)
        options = {"size": int(rng.choice([16, 64, 224])), "interpolation": INTERPOLATIONS[i % 3]}
        options["resize"] = options["size"] + int(rng.integers(0, 40))
        cases.append((f"real {name} at {width}x{height}, {options}",
                      rgba(outside_photo(name).resize((width, height), Image.LANCZOS)), options))
    for i, name in enumerate(("astronaut.png", "coffee.png", "rocket.jpg", "motorcycle_left.png")):
        options = {**TIMM, "interpolation": INTERPOLATIONS[i % 3]}
        cases.append((f"real {name} with alpha, {options}", with_transparency(rgba(outside_photo(name)), rng), options))
    cases += cifar_cases(cifar_root, rng, lambda k: {**TIMM, "interpolation": INTERPOLATIONS[k % 3]})
    noise = rng.integers(0, 256, (4100, 40, 4), dtype=np.uint8)
    noise[..., 3] = 255
    for name, pixels, options in [("7x5", noise[:5, :7], TIMM),
                                  ("301x999 with random alpha", rng.integers(0, 256, (999, 301, 4), np.uint8), TIMM),
                                  ("40x4100", noise, {"size": 16, "resize": 18, "interpolation": "bicubic"}),
                                  ("40x4100", noise, {"size": 16, "resize": 30, "interpolation": "bilinear"}),
                                  ("33x3400", noise[:3400, :33], {"size": 8, "resize": 8, "interpolation": "bicubic"})]:
        cases.append((f"generated noise {name}, {options}", np.ascontiguousarray(pixels), options))
    cases += refused_cases(rng, TIMM)
    return [(name, pixels, {**options, "library": "pil"}) for name, pixels, options in cases]


def torchvision_photos(cifar_root: Path) -> list[tuple[str, np.ndarray, dict]]:
    """(name, (H, W, 4) uint8 RGBA, preprocessResized's options with library "torchvision"), each name saying whether
    the photo is real.

    Real: scikit-image's and matplotlib's photos whole, squashed to 224x224 as Hugging Face's processor takes them
    (bilinear, some bicubic; downscaled, and upscaled along a side shorter than 224 or to 384x384), [height, width]
    resizes that are not square, a shorter side (248, 256) then the crop; some at random sizes and aspect ratios, four
    with transparency; CIFAR-10 test photos (real where ../shared/data has them, generated otherwise) upscaled from
    32x32 to 224x224. Generated: a tiny image, one already 224x224 (not resized), noise with random alpha, an image
    over 100 times taller than wide. Then the four refusals."""
    rng = np.random.default_rng(4646)
    bicubic = {**HF, "interpolation": "bicubic"}
    cases = []
    for name, options in [("astronaut.png", HF), ("astronaut.png", bicubic), ("coffee.png", HF),
                          ("rocket.jpg", HF), ("rocket.jpg", bicubic), ("motorcycle_left.png", HF),
                          ("chelsea.png", bicubic), ("hubble_deep_field.jpg", HF), ("retina.jpg", bicubic),
                          ("grace_hopper.jpg", HF), ("camera.png", HF), ("coins.png", bicubic),  # 384x303: up in height
                          ("coins.png", {**HF, "size": 384, "resize": (384, 384)}),  # up on both sides
                          ("text.png", {**HF, "resize": (240, 260)}),  # 448x172: down in width, up in height
                          ("ihc.png", {**bicubic, "resize": (300, 230)}),
                          ("coffee.png", {**bicubic, "resize": 248}),  # the shorter side, then the crop
                          ("page.png", {**HF, "resize": 256})]:
        image = outside_photo(name)
        cases.append((f"real {name} {image.width}x{image.height}, {options}", rgba(image), options))
    for i in range(10):  # real photos at random sizes (resampled by PIL, as the photo tests make them)
        name = ("astronaut.png", "coffee.png", "rocket.jpg", "motorcycle_left.png", "chelsea.png")[i % 5]
        width, height = random_size(rng, i + 1)
        side = int(rng.choice([16, 64, 224]))
        options = {**HF, "size": side, "resize": (side + int(rng.integers(0, 30)), side + int(rng.integers(0, 30))),
                   "interpolation": INTERPOLATIONS[1 + i % 2]}
        cases.append((f"real {name} at {width}x{height}, {options}",
                      rgba(outside_photo(name).resize((width, height), Image.LANCZOS)), options))
    for i, name in enumerate(("astronaut.png", "coffee.png", "rocket.jpg", "motorcycle_left.png")):
        options = HF if i % 2 else bicubic
        cases.append((f"real {name} with alpha, {options}", with_transparency(rgba(outside_photo(name)), rng), options))
    cases += cifar_cases(cifar_root, rng, lambda k: HF if k % 2 else bicubic)
    noise = rng.integers(0, 256, (4100, 40, 4), dtype=np.uint8)
    noise[..., 3] = 255
    for name, pixels, options in [("7x5", noise[:5, :7], HF), ("7x5", noise[:5, :7], bicubic),
                                  ("224x224", noise[:224, :40].repeat(6, axis=1)[:, :224], HF),
                                  ("301x999 with random alpha", rng.integers(0, 256, (999, 301, 4), np.uint8), bicubic),
                                  ("40x4100", noise, {**HF, "size": 16, "resize": 18}),
                                  ("33x3400", noise[:3400, :33], {**bicubic, "size": 8, "resize": (8, 8)})]:
        cases.append((f"generated noise {name}, {options}", np.ascontiguousarray(pixels), options))
    cases += refused_cases(rng, HF)
    return cases


# ---- Both sides ------------------------------------------------------------------------------------------------------


def run_page(items: list[tuple], tmp_path: Path) -> tuple[list[tuple[int, bytes]], dict]:
    """[(DRAWING, (H, W) uint8), (PHOTO, (H, W, 4) uint8) or (RESIZED, (H, W, 4) uint8, its options: size, resize,
    interpolation, library)] through the page's module in one Node process -> [(status, payload)] and the runner's
    timings."""
    source, answers = tmp_path / "page-in.bin", tmp_path / "page-out.bin"
    with open(source, "wb") as f:
        for kind, pixels, *options in items:
            f.write(struct.pack("<BII", kind, pixels.shape[1], pixels.shape[0]))
            if kind == RESIZED:
                resize = options[0]["resize"]
                sides = (resize, 0) if isinstance(resize, int) else resize  # 0: resize is the shorter side
                f.write(struct.pack("<IIIBB", options[0]["size"], *sides,
                                    INTERPOLATIONS.index(options[0]["interpolation"]),
                                    LIBRARIES.index(options[0]["library"])))
            f.write(np.ascontiguousarray(pixels, dtype=np.uint8).tobytes())
    done = subprocess.run([shutil.which("node"), str(RUNNER), str(source), str(answers)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data, out, at = answers.read_bytes(), [], 0
    while at < len(data):
        status, length = struct.unpack_from("<BI", data, at)
        out.append((status, data[at + 5 : at + 5 + length]))
        at += 5 + length
    assert len(out) == len(items)
    return out, json.loads(done.stdout.strip().splitlines()[-1])


def run_python(kind: int, pixels: np.ndarray, options: dict | None = None) -> tuple[int, object]:
    """Python's answer for the same input: (OK, its 8-bit pixels, as the page keeps them: captions.image_text) or
    (status, the error's message)."""
    from vit_demo.page.captions import image_text

    try:
        if kind == DRAWING:
            image = preprocess_drawing(pixels.reshape(CANVAS_SIZE, CANVAS_SIZE))
        elif kind == RESIZED:
            image = preprocess_resized(pixels, **options)
        else:
            image = preprocess_photo(pixels)
    except NothingDrawn as exc:
        return NOTHING_DRAWN, str(exc)
    except InputError as exc:
        return INPUT_ERROR, str(exc)
    except Exception as exc:  # noqa: BLE001 - compared with the page's own failure
        return OTHER_ERROR, f"{type(exc).__name__}: {exc}"
    return OK, np.frombuffer(base64.b64decode(image_text(image)), np.uint8).reshape(np.shape(image))


@pytest.fixture(scope="module")
def models():
    from vit_demo.classifier import load_model

    return {DRAWING: load_model("mnist", device="cpu"), PHOTO: load_model("cifar10", device="cpu")}


def classes(model, images: list[np.ndarray]) -> list[str]:
    inputs = [image.astype(np.float32) / 255 for image in images]
    return [p.label for p in model.predict_preprocessed(inputs, attention=False)]


def compare(kind: int, cases: list[tuple[str, np.ndarray]], models, tmp_path: Path) -> dict:
    """Both sides on every case: the same refusals, >= 99% identical pixels, the same class. -> the parity figures."""
    shape = (28, 28) if kind == DRAWING else (32, 32, 3)
    started = time.perf_counter()
    python = [run_python(kind, pixels) for _, pixels in cases]
    python_s = time.perf_counter() - started
    page, timings = run_page([(kind, pixels) for _, pixels in cases], tmp_path)
    same, total, largest, refused, worst = 0, 0, 0, 0, (2.0, "")
    done_python, done_page, names = [], [], []
    for (name, _), (status, expected), (page_status, payload) in zip(cases, python, page):
        if status != OK:
            refused += 1
            assert (page_status, payload.decode()) == (status, expected), f"{name}: the page refused differently"
            continue
        assert page_status == OK, f"{name}: the page refused ({payload.decode()}) what Python read"
        got = np.frombuffer(payload, np.uint8).reshape(shape)
        identical = float((got == expected).mean())
        assert identical >= 0.99, f"{name}: only {identical:.2%} of the pixels are identical"
        same, total = same + int((got == expected).sum()), total + got.size
        largest = max(largest, int(np.abs(got.astype(int) - expected.astype(int)).max()))
        worst = min(worst, (identical, name))
        done_python.append(expected)
        done_page.append(got)
        names.append(name)
    python_classes, page_classes = classes(models[kind], done_python), classes(models[kind], done_page)
    differ = [f"{n}: {a} vs {b}" for n, a, b in zip(names, python_classes, page_classes) if a != b]
    assert not differ, f"the model reads {len(differ)} images differently: {differ[:5]}"
    ms = timings["drawing_ms" if kind == DRAWING else "photo_ms"]
    figures = {"images": len(cases), "refused": refused, "identical": same / max(total, 1), "largest": largest,
               "worst": worst, "python_ms": 1000 * python_s / len(cases), "page_ms": ms / len(cases)}
    print(f"\n{'drawings' if kind == DRAWING else 'photos'}: {figures['images']} ({refused} refused by both), "
          f"{figures['identical']:.4%} of pixels identical, largest difference {largest}"
          f"{f', worst image {worst[0]:.2%} ({worst[1]})' if worst[0] < 1 else ''}, the same class on all {len(names)}; "
          f"{figures['python_ms']:.2f} ms an image in Python, {figures['page_ms']:.2f} ms in Node")
    return figures


def test_drawings_match_python(mnist_root, models, tmp_path):
    cases = canvas_drawings(mnist_root)
    assert len(cases) == DRAWINGS
    figures = compare(DRAWING, cases, models, tmp_path)
    assert figures["refused"] == 3  # blank, three pixels, all ink


def test_photos_match_python(cifar_root, models, tmp_path):
    cases = photos(cifar_root)
    assert len(cases) == PHOTOS
    figures = compare(PHOTO, cases, models, tmp_path)
    assert figures["refused"] == 5  # flat, nearly flat, fully transparent, one pixel, empty


def test_refusals_say_what_python_says(tmp_path):
    """Inputs no caller should send, refused in words as Python's are."""
    too_large = np.zeros((1, 20_001, 4), np.uint8)
    out, _ = run_page([(PHOTO, too_large)], tmp_path)
    with pytest.raises(InputError) as python:
        preprocess_photo(too_large)
    assert out[0] == (INPUT_ERROR, str(python.value).encode())


def test_faint_dots_averaged_away_are_nothing_drawn_on_both_sides(tmp_path):
    """Four faint dots at the canvas' edges vanish when the large crop is scaled down: blank, in words, both sides."""
    canvas = np.zeros((112, 112), np.uint8)
    for y, x in ((0, 3), (3, 0), (111, 3), (3, 111)):
        canvas[y, x] = 54
    out, _ = run_page([(DRAWING, canvas)], tmp_path)
    with pytest.raises(NothingDrawn) as python:
        preprocess_drawing(canvas)
    assert out[0] == (NOTHING_DRAWN, str(python.value).encode())


def compare_resized(cases: list[tuple[str, np.ndarray, dict]], tmp_path: Path) -> str:
    """preprocessResized against preprocess_resized on every case: every value the same, the same refusals in the same
    words (four of them). -> what was compared, in words."""
    page, timings = run_page([(RESIZED, pixels, options) for _, pixels, options in cases], tmp_path)
    differing, refused, values = {}, 0, 0
    for (name, pixels, options), (page_status, payload) in zip(cases, page):
        status, expected = run_python(RESIZED, pixels, options)
        if status != OK:
            refused += 1
            assert (page_status, payload.decode()) == (status, expected), f"{name}: the page refused differently"
            continue
        assert page_status == OK, f"{name}: the page refused ({payload.decode()}) what Python read"
        assert expected.shape == (options["size"], options["size"], 3)
        got = np.frombuffer(payload, np.uint8).reshape(expected.shape)
        values += got.size
        if (got != expected).any():
            differing[name] = int((got != expected).sum())
    assert not differing, f"values that differ from Python's: {differing}"
    assert refused == 4
    real = sum(name.startswith("real") for name, _, _ in cases)
    return (f"{len(cases)} ({real} real, {refused} refused by both), all {values:,} values identical; "
            f"{timings['resized_ms'] / timings['resized']:.1f} ms an image in Node")


def test_resized_photos_match_python_bit_for_bit(cifar_root, tmp_path):
    """preprocessResized against preprocess_resized(..., library="pil"), timm's models' resize."""
    print(f"\nresized photos (PIL): {compare_resized(resized_photos(cifar_root), tmp_path)}")


def test_torchvision_resized_photos_match_python_bit_for_bit(cifar_root, tmp_path):
    """preprocessResized against preprocess_resized(..., library="torchvision"), Hugging Face's models' resize: torch's
    uint8 antialiased interpolation, which differs from PIL's by one level on some pixels."""
    print(f"\nresized photos (torchvision): {compare_resized(torchvision_photos(cifar_root), tmp_path)}")


def test_another_library_is_refused_in_words(tmp_path):
    """A library the page cannot resize as: an Error that names it (source.js shows it in place of a prediction)."""
    script = ('import { preprocessResized } from "./vit_demo/page/assets/page/preprocess.js";\n'
              'try { preprocessResized(new Uint8Array(4 * 4 * 4).fill(200), 4, 4, '
              '{ size: 2, resize: 2, interpolation: "bilinear", library: "keras" }); } '
              'catch (error) { console.log(error.constructor.name + ": " + error.message); }')
    done = subprocess.run([shutil.which("node"), "--input-type=module", "-e", script], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.stdout.strip() == ("Error: this page resizes photos as PIL or torchvision does, not as keras does: "
                                   "use the Python app"), done.stderr
