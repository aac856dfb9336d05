"""Photos of none of CIFAR-10's ten classes, to test how well the photo model tells them from its own kind.

Taken from the sample images that scikit-image and matplotlib install with themselves (read as files, so
neither is imported): people, a rocket, a motorbike, coffee, the Moon, stars, coins, textures, microscope
slides, a page of text, and 100 faces from Labeled Faces in the Wild (scikit-image's ``lfw_subset``). Left
out: scikit-image's cat (``chelsea``) and horse, which are CIFAR-10 classes, and its drawings and test
patterns. Each photo of 256 pixels or more a side gives five pictures: the whole photo (centre-cropped as the
app crops an upload) and its four quarters, as a visitor might upload a detail.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from PIL import Image

SKIMAGE_PHOTOS = ("astronaut.png", "brick.png", "camera.png", "cell.png", "clock_motion.png", "coffee.png",
                  "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png", "microaneurysms.png",
                  "moon.png", "motorcycle_left.png", "page.png", "retina.jpg", "rocket.jpg", "text.png")
MATPLOTLIB_PHOTOS = ("grace_hopper.jpg",)
FACES = 100  # lfw_subset.npy: 100 faces, then 100 patches of background
QUARTERS_FROM = 256  # pixels: a photo at least this large on its shorter side also gives its four quarters


class OutsidePhotosMissing(FileNotFoundError):
    """The packages whose sample photos make the set are not installed."""


def _package_folder(package: str, sub: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise OutsidePhotosMissing(f"the outside photos come with {package}: pip install scikit-image matplotlib")
    return Path(next(iter(spec.submodule_search_locations))) / sub


def _pictures(name: str, image: Image.Image) -> list[tuple[str, np.ndarray]]:
    """The photo as a whole and, when it is large enough, its four quarters: [(name, (H, W, 3) uint8)]."""
    rgb = np.asarray(image.convert("RGB"))
    h, w = rgb.shape[:2]
    found = [(name, rgb)]
    if min(h, w) >= QUARTERS_FROM:
        for i, (top, left) in enumerate(((0, 0), (0, w // 2), (h // 2, 0), (h // 2, w // 2))):
            found.append((f"{name}#quarter{i + 1}", rgb[top : top + h // 2, left : left + w // 2]))
    return found


def outside_photos() -> list[tuple[str, np.ndarray]]:
    """Every outside picture, in a fixed order: [(name, (H, W, 3) uint8 RGB)].

    Raises:
        OutsidePhotosMissing: scikit-image or matplotlib is not installed.
    """
    skimage_data = _package_folder("skimage", "data")
    sources = [skimage_data / name for name in SKIMAGE_PHOTOS]
    sources += [_package_folder("matplotlib", "mpl-data/sample_data") / name for name in MATPLOTLIB_PHOTOS]
    found = []
    for path in sources:
        with Image.open(path) as image:
            found += _pictures(path.name, image)
    faces = np.load(skimage_data / "lfw_subset.npy")[:FACES]  # (100, 25, 25) uint8 grey
    found += [(f"lfw_subset.npy#face{i + 1}", np.repeat(face[..., None], 3, axis=-1)) for i, face in enumerate(faces)]
    return found
