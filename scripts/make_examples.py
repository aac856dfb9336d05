"""Write the app's example images: one MNIST test digit per class and one CIFAR-10 test photo per class.

    python scripts/make_examples.py --data-dir DIR

Each is the first test image of its class that the shipped model reads right and does not flag as unfamiliar, read
from the written file as the app reads an example: an example shows what the model does, and one it gets wrong or
calls no digit would mislead a room. Digits are stored black on white (as drawn on the canvas), 28x28; photos as
the original 32x32 PNGs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from vit_demo import load_model  # noqa: E402
from vit_demo.data.datasets import DATASETS, load_split  # noqa: E402


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
                if read.label == class_name and not read.unfamiliar:
                    break
            print(f"{path.relative_to(REPO)}: test image {int(index)}, read as {read.label} ({read.confidence:.1%})")


if __name__ == "__main__":
    main()
