"""Write the app's example images: one MNIST test digit per class and one CIFAR-10 test photo per class, and the
"Also try" examples of things the models were never taught.

    python scripts/make_examples.py --data-dir DIR

Each example is the first test image of its class that the shipped model reads right and does not flag as
unfamiliar (a digit: read at 99.9% or more), read from the written file as the app reads an example: an example shows
what the model does, and one it gets wrong or calls no digit would mislead a room. Digits are stored black on white (as drawn on the canvas), 28x28;
photos as the original 32x32 PNGs. The others (``examples/outside/``) are lessons in what a model cannot know:
drawings of no digit made in code (``vit_demo/data/sketches.py``), and photos of no CIFAR-10 class from the sample
images scikit-image installs (public domain: NASA's astronaut and rocket), 96 pixels on the shorter side. The
examples of a model that reads large photos of anything (``examples/large-photos/``: an imported model's tab) are four
of those sample photos, 256 pixels on the shorter side.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from vit_demo import load_model  # noqa: E402
from vit_demo.data.datasets import DATASETS, load_split  # noqa: E402


# A digit example is one the model reads surely too: one read just above the unfamiliar rule's threshold as its file
# can fall under it as the canvas draws it (the page draws an example at its size, smoothed), and be called no digit.
SURE = {"mnist": 0.999}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True)
    args = parser.parse_args()
    for name, folder, invert in (("mnist", "digits", True), ("cifar10", "photos", False)):
        images, labels = load_split(name, args.data_dir, "test", download=False)
        out = REPO / "examples" / folder
        out.mkdir(parents=True, exist_ok=True)
        classifier = load_model(name, device="cpu")
        for label, class_name in enumerate(DATASETS[name].classes):
            path = out / f"{class_name}.png"
            for index in np.flatnonzero(labels.numpy() == label):
                array = images[int(index)].permute(1, 2, 0).numpy().squeeze()
                Image.fromarray(255 - array if invert else array).save(path, optimize=True)
                read = classifier.predict(path)
                if read.label == class_name and not read.unfamiliar and read.confidence >= SURE.get(name, 0):
                    break
            print(f"{path.relative_to(REPO)}: test image {int(index)}, read as {read.label} ({read.confidence:.1%})")
    write_outside()
    write_large_photos()


# The "Also try" examples: file -> where it comes from (sketches' family and kind, or scikit-image's sample photo),
# and what it teaches, said on the page once it is clicked (true whatever the model answers).
OUTSIDE_DRAWINGS = {
    "letter-a": (("letter", "A"), "A letter is no digit. Which digit is it nearest to, for the model?"),
    "smiley": (("doodle", "smiley"), "A smiley is no digit either, yet the model can only answer one of its ten. "
                                     "Does it warn you?")}
OUTSIDE_PHOTOS = {
    "astronaut": ("astronaut.png", "A person is none of its ten kinds of things, yet it must answer one of them. "
                                   "Does it warn you?"),
    "rocket": ("rocket.jpg", "A rocket is none of its ten either: its answer is the nearest of them, and a high "
                             "percentage does not make it right.")}


# The examples of a model that reads large photos of anything (an imported one's tab, which starts with chelsea:
# layout.added_tab): scikit-image's sample photos (public domain or CC0), 256 pixels on the shorter side, as JPEG.
LARGE_PHOTOS = ("chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg")


def sample_photo(source: str, shorter_side: int) -> Image.Image:
    """scikit-image's sample photo ``source`` in RGB, shrunk (Lanczos) to ``shorter_side`` pixels on that side."""
    from vit_demo.data.outside_photos import _package_folder

    with Image.open(_package_folder("skimage", "data") / source) as photo:
        photo = photo.convert("RGB")
    photo.thumbnail((10_000, shorter_side) if photo.width > photo.height else (shorter_side, 10_000), Image.LANCZOS)
    return photo


def write_large_photos() -> None:
    out = REPO / "examples" / "large-photos"
    out.mkdir(parents=True, exist_ok=True)
    for source in LARGE_PHOTOS:
        photo, path = sample_photo(source, 256), out / f"{Path(source).stem}.jpg"
        photo.save(path, quality=90, optimize=True)
        print(f"{path.relative_to(REPO)}: {photo.width} x {photo.height}, {path.stat().st_size:,} bytes")


def write_outside() -> None:
    """The "Also try" examples and their lessons.json, each with what each model makes of it."""
    from vit_demo.data import sketches

    for folder, model, files in (("digits", "mnist", OUTSIDE_DRAWINGS), ("photos", "cifar10", OUTSIDE_PHOTOS)):
        out = REPO / "examples" / "outside" / folder
        out.mkdir(parents=True, exist_ok=True)
        lessons = {f"{name}.png": lesson for name, (_, lesson) in files.items()}
        (out / "lessons.json").write_text(json.dumps(lessons, indent=1) + "\n", encoding="utf-8")
        for name, (source, _) in files.items():
            path = out / f"{name}.png"
            if folder == "digits":
                family, kind = source
                strokes = sketches.NON_DIGITS[family][kind](np.random.default_rng(0))
                ink = sketches.canvas_drawing(strokes, np.random.default_rng(0))  # (112, 112), ink bright
                Image.fromarray(255 - ink).save(path, optimize=True)
            else:
                sample_photo(source, 96).save(path, optimize=True)
            read = load_model(model, device="cpu").predict(path)
            print(f"{path.relative_to(REPO)}: read as {read.label} ({read.confidence:.1%})"
                  f"{', flagged as unfamiliar' if read.unfamiliar else ''}")


if __name__ == "__main__":
    main()
