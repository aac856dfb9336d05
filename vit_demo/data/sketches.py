"""Drawings made in code as a visitor makes them on the app's canvas: digits, and things that are no digit.

Each drawing is a few strokes (polylines in a unit box, y down), bent by a random affine map and a little noise,
drawn with one of the canvas' pens (``preprocess.PENS``, round caps) at a random size (larger for a wider pen) and place
on its 336-pixel surface, shrunk to the 112-pixel copy the canvas sends (``preprocess.CANVAS_SIZE``), and put through
the app's own drawing preprocessing (``preprocess.preprocess_drawing``). The digits follow the stroke digits the
tests draw; the non-digits are letters unlike any digit, doodles, scribbles, dots, hashes and shapes. They measure
the rule that flags a drawing unlike any digit (``vit_demo/interpret/unfamiliar.py``), and ``train.py
--outlier-drawings`` trains on drawings of no digit drawn with seeds of its own (outlier exposure).

Reading a drawing as the app does takes some 10 ms, so sets of them are kept in the cache folder (``cached``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

from vit_demo.atomic import atomic_write
from vit_demo.data import preprocess
from vit_demo.data.datasets import default_cache_dir
from vit_demo.data.preprocess import CANVAS_SIZE, DRAWING_PIXELS, PENS, preprocess_drawing

Stroke = list[tuple[float, float]]
PEN_SHARE = 7  # a drawing is at least this many pen widths across: wider pens draw larger


def arc(cx: float, cy: float, rx: float, ry: float, start: float, end: float, steps: int = 24) -> Stroke:
    """Points along an ellipse from angle ``start`` to ``end`` in degrees (0: to the right, 90: down)."""
    return [(cx + rx * math.cos(math.radians(a)), cy + ry * math.sin(math.radians(a)))
            for a in np.linspace(start, end, steps)]


def ring(cx: float, cy: float, rx: float, ry: float) -> Stroke:
    return arc(cx, cy, rx, ry, 0, 360, 36)


def polygon(points: Stroke) -> Stroke:
    return [*points, points[0]]


def regular(sides: int, r: float = 0.42, turn: float = -90, step: int = 1) -> Stroke:
    """A closed regular polygon (``step`` 2 with 5 sides: a five-pointed star) about the box's centre."""
    corners = [(0.5 + r * math.cos(math.radians(turn + 360 * k * step / sides)),
                0.5 + r * math.sin(math.radians(turn + 360 * k * step / sides))) for k in range(sides)]
    return polygon(corners)


# Digits, after the tests' stroke digits (tests/conftest.py STROKES), with a second way of writing most.
DIGITS: dict[str, list[list[Stroke]]] = {
    "0": [[ring(0.5, 0.5, 0.25, 0.4)], [arc(0.5, 0.5, 0.22, 0.42, -80, 285)]],
    "1": [[[(0.55, 0.1), (0.55, 0.9)]], [[(0.4, 0.25), (0.55, 0.1), (0.55, 0.9)]],
          [[(0.4, 0.22), (0.55, 0.1), (0.55, 0.9)], [(0.4, 0.9), (0.7, 0.9)]]],
    "2": [[arc(0.5, 0.32, 0.25, 0.22, 180, 400), [(0.7, 0.45), (0.25, 0.9), (0.78, 0.9)]],
          [arc(0.5, 0.3, 0.22, 0.2, 200, 380) + [(0.28, 0.88), (0.75, 0.88)]]],
    "3": [[arc(0.5, 0.3, 0.22, 0.2, 200, 450), arc(0.5, 0.7, 0.25, 0.22, 270, 520)],
          [[(0.28, 0.1), (0.72, 0.1), (0.45, 0.45)], arc(0.5, 0.68, 0.25, 0.23, 270, 520)]],
    "4": [[[(0.6, 0.9), (0.6, 0.1), (0.22, 0.65), (0.8, 0.65)]],
          [[(0.3, 0.1), (0.25, 0.6), (0.8, 0.6)], [(0.65, 0.3), (0.62, 0.92)]]],
    "5": [[[(0.72, 0.1), (0.32, 0.1), (0.29, 0.48)], arc(0.5, 0.65, 0.26, 0.27, 220, 510)],
          [[(0.3, 0.12), (0.28, 0.48)], arc(0.5, 0.66, 0.25, 0.25, 220, 500), [(0.3, 0.12), (0.72, 0.1)]]],
    "6": [[arc(0.6, 0.64, 0.35, 0.56, 180, 270), ring(0.485, 0.71, 0.235, 0.21)],
          [[(0.62, 0.08), (0.32, 0.5)] + arc(0.5, 0.7, 0.2, 0.2, 180, 540)]],
    "7": [[[(0.25, 0.12), (0.75, 0.12), (0.42, 0.9)]],
          [[(0.25, 0.12), (0.75, 0.12), (0.45, 0.9)], [(0.42, 0.5), (0.7, 0.5)]]],
    "8": [[ring(0.5, 0.28, 0.2, 0.2), ring(0.5, 0.7, 0.25, 0.22)],
          [arc(0.5, 0.28, 0.2, 0.2, 90, -180) + arc(0.5, 0.7, 0.24, 0.22, 270, 630)
           + arc(0.5, 0.28, 0.2, 0.2, 180, 90)]],
    "9": [[ring(0.5, 0.3, 0.22, 0.2), [(0.72, 0.3), (0.68, 0.9)]],
          [arc(0.5, 0.3, 0.22, 0.2, 0, 360) + [(0.72, 0.3), (0.6, 0.65), (0.45, 0.9)]]],
}


def _letters() -> dict[str, list[Stroke]]:
    return {
        "A": [[(0.2, 0.9), (0.5, 0.1), (0.8, 0.9)], [(0.32, 0.6), (0.68, 0.6)]],
        "E": [[(0.72, 0.1), (0.3, 0.1), (0.3, 0.9), (0.72, 0.9)], [(0.3, 0.5), (0.62, 0.5)]],
        "F": [[(0.72, 0.1), (0.3, 0.1), (0.3, 0.9)], [(0.3, 0.5), (0.62, 0.5)]],
        "H": [[(0.25, 0.1), (0.25, 0.9)], [(0.75, 0.1), (0.75, 0.9)], [(0.25, 0.5), (0.75, 0.5)]],
        "K": [[(0.3, 0.1), (0.3, 0.9)], [(0.72, 0.1), (0.3, 0.55), (0.75, 0.9)]],
        "M": [[(0.15, 0.9), (0.22, 0.1), (0.5, 0.6), (0.78, 0.1), (0.85, 0.9)]],
        "N": [[(0.25, 0.9), (0.25, 0.1), (0.75, 0.9), (0.75, 0.1)]],
        "R": [[(0.3, 0.9), (0.3, 0.1)] + arc(0.45, 0.3, 0.25, 0.2, 270, 450)[1:] + [(0.3, 0.5), (0.72, 0.9)]],
        "T": [[(0.15, 0.12), (0.85, 0.12)], [(0.5, 0.12), (0.5, 0.9)]],
        "V": [[(0.2, 0.1), (0.5, 0.9), (0.8, 0.1)]],
        "W": [[(0.1, 0.1), (0.3, 0.9), (0.5, 0.35), (0.7, 0.9), (0.9, 0.1)]],
        "X": [[(0.2, 0.1), (0.8, 0.9)], [(0.8, 0.1), (0.2, 0.9)]],
        "Y": [[(0.2, 0.1), (0.5, 0.5), (0.8, 0.1)], [(0.5, 0.5), (0.5, 0.9)]],
        "e": [[(0.22, 0.6), (0.78, 0.6)] + arc(0.5, 0.6, 0.28, 0.28, 0, -320)],
        "h": [[(0.3, 0.05), (0.3, 0.92)], [(0.3, 0.92)] + arc(0.5, 0.6, 0.2, 0.2, 180, 360) + [(0.7, 0.92)]],
        "m": [[(0.12, 0.35), (0.12, 0.9)] + arc(0.27, 0.5, 0.15, 0.15, 180, 360) + [(0.42, 0.9)]
              + arc(0.57, 0.5, 0.15, 0.15, 180, 360) + [(0.72, 0.9)]],
        "n": [[(0.3, 0.3), (0.3, 0.9)] + arc(0.5, 0.5, 0.2, 0.2, 180, 360) + [(0.7, 0.9)]],
        "r": [[(0.35, 0.3), (0.35, 0.9)], arc(0.6, 0.5, 0.25, 0.18, 190, 300)],
        "k": [[(0.3, 0.05), (0.3, 0.92)], [(0.7, 0.35), (0.3, 0.65), (0.72, 0.92)]],
    }


def _doodles() -> dict[str, list[Stroke]]:
    petals = [ring(0.5 + 0.28 * math.cos(a), 0.5 + 0.28 * math.sin(a), 0.14, 0.14)
              for a in np.linspace(0, 2 * math.pi, 6, endpoint=False)]
    return {
        "star": [regular(5, step=2)],
        "heart": [[(0.5, 0.88)] + arc(0.32, 0.35, 0.18, 0.18, 135, 360) + arc(0.68, 0.35, 0.18, 0.18, 180, 405)
                  + [(0.5, 0.88)]],
        "house": [polygon([(0.2, 0.45), (0.8, 0.45), (0.8, 0.95), (0.2, 0.95)]),
                  [(0.12, 0.5), (0.5, 0.08), (0.88, 0.5)],
                  [(0.42, 0.95), (0.42, 0.7), (0.58, 0.7), (0.58, 0.95)]],
        "smiley": [ring(0.5, 0.5, 0.42, 0.42), [(0.36, 0.38)], [(0.64, 0.38)], arc(0.5, 0.52, 0.22, 0.2, 20, 160)],
        "sun": [ring(0.5, 0.5, 0.2, 0.2)] + [[(0.5 + 0.28 * math.cos(a), 0.5 + 0.28 * math.sin(a)),
                                               (0.5 + 0.45 * math.cos(a), 0.5 + 0.45 * math.sin(a))]
                                              for a in np.linspace(0, 2 * math.pi, 8, endpoint=False)],
        "spiral": [[(0.5 + 0.4 * t * math.cos(4 * math.pi * t), 0.5 + 0.4 * t * math.sin(4 * math.pi * t))
                    for t in np.linspace(0.03, 1, 60)]],
        "arrow": [[(0.1, 0.5), (0.9, 0.5)], [(0.65, 0.28), (0.9, 0.5), (0.65, 0.72)]],
        "tree": [[(0.45, 0.95), (0.45, 0.6)], [(0.55, 0.95), (0.55, 0.6)], regular(3, 0.38, -90)],
        "flower": [ring(0.5, 0.5, 0.12, 0.12), *petals],
        "fish": [arc(0.45, 0.5, 0.3, 0.2, 0, 360), [(0.72, 0.5), (0.92, 0.3), (0.92, 0.7), (0.72, 0.5)], [(0.3, 0.45)]],
        "stick figure": [ring(0.5, 0.16, 0.1, 0.1), [(0.5, 0.26), (0.5, 0.62)], [(0.25, 0.4), (0.75, 0.4)],
                         [(0.3, 0.95), (0.5, 0.62), (0.7, 0.95)]],
        "cloud": [arc(0.3, 0.6, 0.16, 0.16, 90, 270) + arc(0.45, 0.42, 0.17, 0.17, 180, 340)
                  + arc(0.66, 0.48, 0.17, 0.17, 220, 380) + arc(0.72, 0.64, 0.12, 0.12, 270, 450) + [(0.3, 0.76)]],
        "cat face": [ring(0.5, 0.58, 0.35, 0.32), [(0.2, 0.4), (0.25, 0.1), (0.42, 0.28)],
                     [(0.58, 0.28), (0.75, 0.1), (0.8, 0.4)], [(0.1, 0.62), (0.35, 0.65)], [(0.65, 0.65), (0.9, 0.62)]],
    }


def _scribble(rng: np.random.Generator) -> list[Stroke]:
    """A smooth random walk, as a hand scribbles."""
    heading, point, points = rng.uniform(0, 2 * math.pi), np.array([0.5, 0.5]), []
    for _ in range(int(rng.integers(25, 60))):
        heading += rng.normal(0, 0.9)
        point = np.clip(point + 0.08 * np.array([math.cos(heading), math.sin(heading)]), 0, 1)
        points.append(tuple(point))
    return [points]


def _zigzag(rng: np.random.Generator) -> list[Stroke]:
    teeth = int(rng.integers(4, 9))
    return [[(x, 0.3 if i % 2 else 0.7) for i, x in enumerate(np.linspace(0.05, 0.95, teeth + 1))]]


def _loops(rng: np.random.Generator) -> list[Stroke]:
    """Cursive loops in a row (llll or eeee)."""
    count, points = int(rng.integers(3, 6)), []
    for t in np.linspace(0, 1, 30 * count):
        a = 2 * math.pi * count * t
        points.append((0.1 + 0.8 * t + 0.08 * math.cos(a + math.pi), 0.5 + 0.25 * math.sin(a)))
    return [points]


def _hatching(rng: np.random.Generator) -> list[Stroke]:
    """Back and forth over one spot, as someone filling in or scratching out."""
    rows = int(rng.integers(5, 10))
    return [[(0.1 if i % 2 == 0 else 0.9, y + rng.normal(0, 0.02)) for i, y in enumerate(np.linspace(0.2, 0.8, rows))]]


def _dots(count: int) -> Callable[[np.random.Generator], list[Stroke]]:
    return lambda rng: [[(float(x), float(y))] for x, y in rng.uniform(0.1, 0.9, (count, 2))]


def _filled(outline: Stroke) -> list[Stroke]:
    """A closed outline coloured in: the outline shrunk towards its centre, again and again."""
    cx, cy = np.mean(outline, axis=0)
    return [[(cx + s * (x - cx), cy + s * (y - cy)) for x, y in outline] for s in np.linspace(1, 0.05, 9)]


def _hashes() -> dict[str, list[Stroke]]:
    return {
        "#": [[(0.38, 0.1), (0.32, 0.9)], [(0.68, 0.1), (0.62, 0.9)], [(0.12, 0.36), (0.88, 0.36)],
              [(0.12, 0.64), (0.88, 0.64)]],
        "grid": [[(x, 0.05), (x, 0.95)] for x in (0.35, 0.65)] + [[(0.05, y), (0.95, y)] for y in (0.35, 0.65)],
        "crosshatch": [[(x, 0.1), (x + 0.3, 0.9)] for x in (0.0, 0.2, 0.4, 0.6)]
                      + [[(x + 0.3, 0.1), (x, 0.9)] for x in (0.0, 0.2, 0.4, 0.6)],
        "plus": [[(0.5, 0.1), (0.5, 0.9)], [(0.1, 0.5), (0.9, 0.5)]],
        "asterisk": [[(0.5 + 0.4 * math.cos(a), 0.5 + 0.4 * math.sin(a)), (0.5 - 0.4 * math.cos(a),
                                                                           0.5 - 0.4 * math.sin(a))]
                     for a in np.linspace(0, math.pi, 3, endpoint=False)],
        "equals": [[(0.15, 0.4), (0.85, 0.4)], [(0.15, 0.6), (0.85, 0.6)]],
    }


def _shapes() -> dict[str, list[Stroke]]:
    return {
        "square": [regular(4, 0.45, 45)], "triangle": [regular(3, 0.45, -90)], "diamond": [regular(4, 0.45, 0)],
        "pentagon": [regular(5, 0.45)], "hexagon": [regular(6, 0.45, 0)],
        "rectangle": [polygon([(0.05, 0.3), (0.95, 0.3), (0.95, 0.7), (0.05, 0.7)])],
        "filled disc": _filled(ring(0.5, 0.5, 0.4, 0.4)), "filled square": _filled(regular(4, 0.45, 45)),
        "filled triangle": _filled(regular(3, 0.45, -90)), "line": [[(0.1, 0.5), (0.9, 0.5)]],
        "wave": [[(x, 0.5 + 0.15 * math.sin(4 * math.pi * x)) for x in np.linspace(0.05, 0.95, 30)]],
        "check mark": [[(0.15, 0.55), (0.4, 0.85), (0.88, 0.15)]],
    }


_Maker = Callable[[np.random.Generator], list[Stroke]]


def _fixed(strokes: list[Stroke]) -> _Maker:
    return lambda rng: strokes


NON_DIGITS: dict[str, dict[str, _Maker]] = {
    "letter": {name: _fixed(s) for name, s in _letters().items()},
    "doodle": {name: _fixed(s) for name, s in _doodles().items()},
    "scribble": {"scribble": _scribble, "zigzag": _zigzag, "loops": _loops, "hatching": _hatching},
    "dots": {"dot": _dots(1), "two dots": _dots(2), "three dots": _dots(3), "dots": _dots(7)},
    "hash": {name: _fixed(s) for name, s in _hashes().items()},
    "shape": {name: _fixed(s) for name, s in _shapes().items()},
}


def bend(strokes: list[Stroke], rng: np.random.Generator) -> list[Stroke]:
    """A hand's version of the strokes: turned up to 12 degrees, stretched, sheared, every point a little off."""
    turn, shear = math.radians(rng.uniform(-12, 12)), rng.uniform(-0.2, 0.2)
    sx, sy = rng.uniform(0.75, 1.15), rng.uniform(0.85, 1.15)
    matrix = np.array([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]]) @ np.array(
        [[sx, shear], [0, sy]])
    return [[tuple(matrix @ (np.array(p) - 0.5) + 0.5 + rng.normal(0, 0.012, 2)) for p in stroke] for stroke in strokes]


def canvas_drawing(strokes: list[Stroke], rng: np.random.Generator) -> np.ndarray:
    """Strokes drawn on the canvas with a random pen, size and place -> the (112, 112) uint8 ink the canvas reads
    (ink bright)."""
    pen = PENS[int(rng.integers(len(PENS)))][1]
    room = DRAWING_PIXELS - 2 * pen
    size = rng.uniform(min(max(0.45 * room, PEN_SHARE * pen), 0.95 * room), 0.95 * room)  # a brush draws large
    left, top = rng.uniform(pen, DRAWING_PIXELS - size - pen, 2)
    surface = Image.new("L", (DRAWING_PIXELS, DRAWING_PIXELS), 255)
    draw = ImageDraw.Draw(surface)
    for stroke in strokes:
        points = [(left + size * x, top + size * y) for x, y in stroke]
        if len(points) > 1:
            draw.line(points, fill=0, width=pen, joint="curve")
        for x, y in points[:: max(1, len(points) - 1)]:  # round caps at both ends (a dot: one)
            draw.ellipse((x - pen / 2, y - pen / 2, x + pen / 2, y + pen / 2), fill=0)
    small = surface.resize((CANVAS_SIZE, CANVAS_SIZE), Image.BOX)
    return 255 - np.asarray(small, dtype=np.uint8)


def digit_ways() -> list[tuple[int, list[Stroke]]]:
    """Every way of writing every digit, in order: [(digit, strokes)]."""
    return [(int(digit), strokes) for digit, written in DIGITS.items() for strokes in written]


KIND_HALVES = ("every", "even", "odd")  # every kind of non-digit drawing, or every other one from the first or second


def non_digit_kinds(half: str = "every") -> list[tuple[str, _Maker]]:
    """The kinds of non-digit drawing (``half`` of them, KIND_HALVES), in order: [("family/kind", maker)]."""
    kinds = [(f"{family}/{name}", make) for family, makers in NON_DIGITS.items() for name, make in makers.items()]
    return kinds if half == "every" else kinds[KIND_HALVES.index(half) - 1 :: 2]


def digit_drawings(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` stroke digits, every way of writing each in turn, as the model reads them: (N, 28, 28) float32 in
    [0, 1], and their labels (N,)."""
    rng = np.random.default_rng(seed)
    ways = digit_ways()
    images, labels = [], []
    for i in range(count):
        label, strokes = ways[i % len(ways)]
        images.append(preprocess_drawing(canvas_drawing(bend(strokes, rng), rng)))
        labels.append(label)
    return np.stack(images), np.array(labels)


def non_digit_drawings(count: int, seed: int, half: str = "every") -> tuple[np.ndarray, list[str]]:
    """``count`` drawings of no digit, each kind (of ``half`` of them) in turn, as the model reads them: (N, 28, 28)
    float32 in [0, 1], and what each is ("family/kind")."""
    rng = np.random.default_rng(seed)
    kinds = non_digit_kinds(half)
    images, names = [], []
    for i in range(count):
        name, make = kinds[i % len(kinds)]
        images.append(preprocess_drawing(canvas_drawing(bend(make(rng), rng), rng)))
        names.append(name)
    return np.stack(images), names


def on_canvas(digits: np.ndarray, seed: int) -> np.ndarray:
    """Handwritten digits (N, 28, 28) uint8, white on black as MNIST keeps them, written on the canvas at a random
    size and place (bilinear, as a photo of the page scales) and read back as the app reads a drawing: (N, 28, 28)
    float32 in [0, 1]. What the model sees of a real pen digit: the app never hands it MNIST's own 28x28."""
    rng = np.random.default_rng(seed)
    read = []
    for digit in digits:
        size = int(rng.integers(40, CANVAS_SIZE))
        ink = np.zeros((CANVAS_SIZE, CANVAS_SIZE), dtype=np.uint8)
        top, left = rng.integers(0, CANVAS_SIZE - size + 1, 2)
        scaled = Image.fromarray(digit).resize((size, size), Image.BILINEAR)
        ink[top : top + size, left : left + size] = np.asarray(scaled)
        read.append(preprocess_drawing(ink))
    return np.stack(read)


# ---- Sets of drawings, kept in the cache folder ---------------------------------------------------------------


def _source_key() -> str:
    """What drawings made in code depend on besides their seed: the code that draws and reads them."""
    return hashlib.sha256(b"".join(Path(file).read_bytes() for file in (__file__, preprocess.__file__))).hexdigest()


def cached(name: str, make: Callable[[], np.ndarray], *keys: bytes) -> torch.Tensor:
    """``make()`` (a float32 array), kept in the cache folder under a key of ``keys`` and the drawing code."""
    key = hashlib.sha256(b"".join(keys) + _source_key().encode()).hexdigest()[:16]
    path = default_cache_dir() / f"drawings-{name}-{key}.pt"
    if path.is_file():
        return torch.load(path, weights_only=True)
    found = torch.from_numpy(np.asarray(make(), dtype=np.float32))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: torch.save(found, f))  # another process may be reading the cache
    return found


def canvas_digits(images: torch.Tensor, seed: int) -> torch.Tensor:
    """MNIST digits (N, 1, 28, 28) uint8 written on the canvas and read as the app reads them (``on_canvas``):
    (N, 1, 28, 28) float32 in [0, 1]."""
    digits = images[:, 0].numpy()
    return cached("canvas", lambda: on_canvas(digits, seed), digits.tobytes(), str(seed).encode())[:, None]


def drawing_set(kind: str, count: int, seed: int, half: str = "every") -> tuple[torch.Tensor, list[str]]:
    """``count`` drawings made in code, (N, 1, 28, 28) float32 in [0, 1], and what each is: non-digits
    ("family/kind", of ``half`` of the kinds) or stroke digits (their digit)."""
    if kind == "non-digits":
        names = [name for name, _ in non_digit_kinds(half)]
        make = lambda: non_digit_drawings(count, seed, half)[0]  # noqa: E731
    else:
        names = [str(digit) for digit, _ in digit_ways()]
        make = lambda: digit_drawings(count, seed)[0]  # noqa: E731
    images = cached(kind, make, f"{count} {seed}".encode() + (b"" if half == "every" else half.encode()))
    return images[:, None], [names[i % len(names)] for i in range(count)]
