"""Pictures of nothing CIFAR-10 knows, made in code, to train the photo model's unfamiliar rule against (outlier
exposure: Hendrycks, Mazeika and Dietterich, 2019, "Deep Anomaly Detection with Outlier Exposure", ICLR).

The outside photos the rule is measured on (``outside_photos``) are never trained on; these are made instead, of
kinds that share nothing with them: noise with a natural image's spectrum, overlapping discs and squares ("dead
leaves", Lee, Mumford and Huang, 2001), text, lines and stripes, training photos cut into tiles and shuffled, a
training photo's small detail blown up, and pixels of random noise. Half of each kind is grey, as many outside
photos are, so that a rule trained against them cannot learn "grey means unfamiliar" (the training photos it is
trained to keep include grey ones too, ``grey``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageFont

SIZE = 32
KINDS = ("spectral noise", "dead leaves", "text and lines", "tiles of 8", "tiles of 4", "detail", "pixel noise")


def grey(images: torch.Tensor) -> torch.Tensor:
    """uint8 RGB images (N, 3, H, W) in grey (ITU-R 601 luma), still (N, 3, H, W)."""
    luma = (0.299 * images[:, 0].float() + 0.587 * images[:, 1].float() + 0.114 * images[:, 2].float())  # (N, H, W)
    return luma.round().clamp(0, 255).to(torch.uint8)[:, None].expand(-1, 3, -1, -1).contiguous()


def _colour(rng: np.random.Generator, low: int = 0, high: int = 256) -> tuple[int, int, int]:
    return tuple(int(v) for v in rng.integers(low, high, 3))


def spectral_noise(count: int, rng: np.random.Generator) -> np.ndarray:
    """Noise whose power falls as 1/f^a (a 1.5 or 2.5, as natural images' does), its channels independent or one
    shade tinted: (count, 3, 32, 32) uint8."""
    frequency = np.fft.fftfreq(SIZE)[:, None] ** 2 + np.fft.fftfreq(SIZE)[None] ** 2  # (32, 32), squared
    frequency[0, 0] = 1.0
    found = []
    for i in range(count):
        amplitude = frequency ** (-(1.5 if i % 2 else 2.5) / 2)
        phases = np.exp(2j * np.pi * rng.random((3, SIZE, SIZE)))
        image = np.real(np.fft.ifft2(amplitude * phases))  # (3, 32, 32)
        if rng.random() < 0.5:
            image = image[:1] * rng.uniform(0.5, 1.5, (3, 1, 1)) + 0.3 * image
        found.append((image - image.min()) / (np.ptp(image) + 1e-9))
    return (np.stack(found) * 255).astype(np.uint8)


def dead_leaves(count: int, rng: np.random.Generator) -> np.ndarray:
    """Discs and rectangles of random colours and sizes laid over each other: (count, 3, 32, 32) uint8."""
    found = []
    for _ in range(count):
        image = Image.new("RGB", (SIZE, SIZE), _colour(rng))
        draw = ImageDraw.Draw(image)
        for _ in range(rng.integers(3, 40)):
            r = rng.uniform(1, 12)
            x, y = rng.uniform(-5, SIZE + 5, 2)
            if rng.random() < 0.5:
                draw.ellipse([x - r, y - r, x + r, y + r], fill=_colour(rng))
            else:
                draw.rectangle([x - r, y - r * rng.uniform(0.3, 2), x + r, y + r], fill=_colour(rng))
        found.append(np.asarray(image).transpose(2, 0, 1))
    return np.stack(found)


def text_and_lines(count: int, rng: np.random.Generator) -> np.ndarray:
    """Lines of random characters, random strokes, or stripes at any angle, drawn at three times the size and
    shrunk: (count, 3, 32, 32) uint8."""
    font, big = ImageFont.load_default(), 3 * SIZE
    found = []
    for i in range(count):
        image = Image.new("RGB", (big, big), _colour(rng, 150) if rng.random() < 0.7 else _colour(rng))
        draw = ImageDraw.Draw(image)
        ink = _colour(rng, 0, 120)
        if i % 3 == 0:
            y = int(rng.integers(-5, 10))
            while y < big:
                line = "".join(chr(int(c)) for c in rng.integers(33, 127, 20))
                draw.text((int(rng.integers(-10, 5)), y), line, fill=ink, font=font)
                y += int(rng.integers(9, 16))
        elif i % 3 == 1:
            for _ in range(rng.integers(2, 15)):
                draw.line([tuple(rng.uniform(0, big, 2)), tuple(rng.uniform(0, big, 2))], fill=_colour(rng),
                          width=int(rng.integers(1, 8)))
        else:
            width = int(rng.integers(4, 30))
            for start in range(0, 2 * big, 2 * width):
                draw.rectangle([start, 0, start + width, 2 * big] if rng.random() < 0.5 else
                               [0, start, 2 * big, start + width], fill=ink)
            image = image.rotate(rng.uniform(0, 180))
        found.append(np.asarray(image.resize((SIZE, SIZE), Image.BILINEAR)).transpose(2, 0, 1))
    return np.stack(found)


def shuffled_tiles(photos: torch.Tensor, grid: int, generator: torch.Generator) -> torch.Tensor:
    """Each photo (N, 3, 32, 32) cut into grid x grid tiles, put back in a random order: (N, 3, 32, 32)."""
    n, tile = len(photos), SIZE // grid
    tiles = photos.reshape(n, 3, grid, tile, grid, tile).permute(0, 2, 4, 1, 3, 5).reshape(n, grid * grid, 3, tile,
                                                                                          tile)
    order = torch.stack([torch.randperm(grid * grid, generator=generator) for _ in range(n)])  # (N, grid^2)
    tiles = tiles[torch.arange(n)[:, None], order]
    return tiles.reshape(n, grid, grid, 3, tile, tile).permute(0, 3, 1, 4, 2, 5).reshape(n, 3, SIZE, SIZE)


def details(photos: torch.Tensor, rng: np.random.Generator, size: int = 10) -> torch.Tensor:
    """A random size x size detail of each photo (N, 3, 32, 32), blown up to 32 x 32: (N, 3, 32, 32) uint8."""
    corners = rng.integers(0, SIZE - size + 1, (len(photos), 2))
    crops = torch.stack([photo[:, top : top + size, left : left + size] for photo, (top, left) in zip(photos, corners)])
    return F.interpolate(crops.float(), size=(SIZE, SIZE), mode="bilinear").round().clamp(0, 255).to(torch.uint8)


def outliers(photos: torch.Tensor, per_kind: int, seed: int) -> torch.Tensor:
    """``per_kind`` pictures of each of ``KINDS``, the first half of each kind grey: (len(KINDS) * per_kind, 3, 32, 32)
    uint8. ``photos``: 3 * per_kind training photos (N, 3, 32, 32) uint8 for the kinds made of them."""
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    source = photos[: 3 * per_kind].split(per_kind)
    made = [torch.from_numpy(spectral_noise(per_kind, rng)), torch.from_numpy(dead_leaves(per_kind, rng)),
            torch.from_numpy(text_and_lines(per_kind, rng)), shuffled_tiles(source[0], 4, generator),
            shuffled_tiles(source[1], 8, generator), details(source[2], rng),
            torch.from_numpy(rng.integers(0, 256, (per_kind, 3, SIZE, SIZE), dtype=np.uint8))]
    for kind in made:
        kind[: per_kind // 2] = grey(kind[: per_kind // 2])
    return torch.cat(made)
