"""Photos of none of CIFAR-10's ten classes, to test how well the photo model tells them from its own kind.

Taken from the sample images that scikit-image and matplotlib install with themselves (read as files, so
neither is imported): people, a rocket, a motorbike, coffee, the Moon, stars, coins, textures, microscope
slides, a page of text, and 100 faces from Labeled Faces in the Wild (scikit-image's ``lfw_subset``). Left
out: scikit-image's cat (``chelsea``) and horse, which are CIFAR-10 classes, and its drawings and test
patterns. Each photo of 256 pixels or more a side gives five pictures: the whole photo (centre-cropped as the
app crops an upload) and its four quarters, as a visitor might upload a detail.

Besides them, the photo rule (``vit_demo/interpret/unfamiliar.py``) reads the pictures of four of Debian's wallpaper
packages (``wallpapers``: photos of flowers, leaves, water, hills, a bridge, a dragonfly, a glass of wine, and drawn
wallpapers), split by source (``roles``) into a third whose crops it learns from, a third it is chosen on and a
third it is reported on.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
from PIL import Image

SKIMAGE_PHOTOS = ("astronaut.png", "brick.png", "camera.png", "cell.png", "clock_motion.png", "coffee.png",
                  "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png", "microaneurysms.png",
                  "moon.png", "motorcycle_left.png", "page.png", "retina.jpg", "rocket.jpg", "text.png")
MATPLOTLIB_PHOTOS = ("grace_hopper.jpg",)
FACES = 100  # lfw_subset.npy: 100 faces, then 100 patches of background
QUARTERS_FROM = 256  # pixels: a photo at least this large on its shorter side also gives its four quarters
WALLPAPERS = Path("/usr/share/backgrounds")
WALLPAPER_PACKAGES = ("gnome-backgrounds", "lomiri-wallpapers", "mate-backgrounds", "ukui-wallpapers")
WALLPAPER_SIDE = 1024  # pixels: a wallpaper is read shrunk to at most this on its longer side
# The pictures the page offers as ones the photo model cannot know ("Also try", and the coffee cup the docs show):
# always in the reported third.
PAGE_PHOTOS = ("astronaut.png", "rocket.jpg", "coffee.png")
CROPS = 150  # random crops of each whole picture of the third learnt from (a face: 5)


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


def wallpapers() -> list[tuple[str, np.ndarray]]:
    """The pictures of Debian's ``WALLPAPER_PACKAGES``, whole and as quarters (``_pictures``), in a fixed order.

    Raises:
        OutsidePhotosMissing: the packages are not installed.
    """
    paths = sorted(p for p in WALLPAPERS.rglob("*") if p.suffix.lower() in (".jpg", ".png", ".webp")
                   and not re.search(r"_\d+x\d+$", p.stem))  # no second size of one (Elephants_3840x2160)
    if not paths:
        raise OutsidePhotosMissing(f"the outside photos include Debian's wallpapers: apt-get install "
                                   f"{' '.join(WALLPAPER_PACKAGES)}")
    found = []
    for path in paths:
        with Image.open(path) as image:
            image = image.convert("RGB")
            image.thumbnail((WALLPAPER_SIDE, WALLPAPER_SIDE), Image.LANCZOS)
            found += _pictures(path.name, image)
    return found


def source_of(name: str) -> str:
    """The picture a whole picture or quarter (``moon.png#quarter2``) was taken from; a face is its own."""
    return name if "#face" in name else name.split("#quarter")[0]


LEARN, CHOOSE, REPORT = 0, 1, 2  # the roles of ``roles``


def roles(names: list[str]) -> np.ndarray:
    """Each picture's role, by source: ``LEARN`` (its crops are learnt from), ``CHOOSE`` or ``REPORT``: every third
    source in name order, faces by number, ``PAGE_PHOTOS`` always reported on. (N,) int."""
    sources = sorted({source_of(n) for n in names if "#face" not in n and source_of(n) not in PAGE_PHOTOS})
    role = {s: i % 3 for i, s in enumerate(sources)} | {s: REPORT for s in PAGE_PHOTOS}
    return np.array([int(n.split("#face")[1]) % 3 if "#face" in n else role[source_of(n)] for n in names])


def crops(pictures: list[tuple[str, np.ndarray]], rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """``CROPS`` random square crops of each whole picture (a quarter to all of its shorter side; of a face, 5 of
    four fifths to all), half of them mirrored: [(name of the source, (S, S, 3) uint8)]."""
    found = []
    for name, picture in pictures:
        if "#quarter" in name:
            continue
        face = "#face" in name
        h, w = picture.shape[:2]
        for _ in range(5 if face else CROPS):
            s = int(min(h, w) * rng.uniform(0.8 if face else 0.25, 1.0))
            y, x = int(rng.integers(0, h - s + 1)), int(rng.integers(0, w - s + 1))
            crop = picture[y : y + s, x : x + s]
            found.append((name, crop[:, ::-1] if rng.random() < 0.5 else crop))
    return found
