"""The datasets: what each one is, and its images as uint8 tensors.

MNIST is read from its original ``*-idx?-ubyte(.gz)`` files under ``<data_dir>/MNIST/raw`` and
CIFAR-10 from an ImageFolder layout ``<data_dir>/cifar10/{train,test}/<class>/*.png``. Where
neither is found, torchvision downloads the dataset into ``data_dir`` (this needs internet).
Decoded PNGs are cached as one tensor file so that an epoch never decodes 60,000 files again.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from PIL import Image

from vit_demo.atomic import atomic_write
from vit_demo.data.preprocess import Preprocessing


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    name: str
    classes: tuple[str, ...]
    image_size: int
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    preprocessing: Preprocessing  # what a user's image goes through to look like the dataset's


DATASETS = {
    "mnist": DatasetSpec(
        name="mnist",
        classes=tuple(str(d) for d in range(10)),
        image_size=28,
        channels=1,
        mean=(0.1307,),
        std=(0.3081,),
        preprocessing=Preprocessing("drawing"),
    ),
    "cifar10": DatasetSpec(
        name="cifar10",
        classes=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
        image_size=32,
        channels=3,
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
        preprocessing=Preprocessing("photo"),
    ),
}

SPLITS = ("train", "test")
T = TypeVar("T")


class DatasetNotFound(FileNotFoundError):
    pass


def dataset_spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}") from None


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vit_demo"


def load_split(
    name: str, data_dir: str | Path, split: str = "train", *, download: bool = True, cache_dir: Path | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(images, labels)``: uint8 (N, C, H, W) and int64 (N,).

    ``data_dir`` may be read-only; a decoded-image cache is written to ``cache_dir`` instead
    (default: ``$XDG_CACHE_HOME/vit_demo``).
    """
    spec = dataset_spec(name)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    data_dir = Path(data_dir)
    if name == "mnist":
        return _load_mnist(data_dir, split, download)
    return _load_image_folder_cached(data_dir, spec, split, download, cache_dir or default_cache_dir())


def spread(count: int, total: int) -> torch.Tensor:
    """``count`` indices spread evenly over ``total`` (all of them where there are fewer): for splits stored in class
    order, such as CIFAR-10's folders, every class gets its share."""
    return torch.linspace(0, total - 1, min(count, total)).round().long()


# ---- MNIST -------------------------------------------------------------------------------------

_MNIST_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _find_idx_file(raw_dir: Path, stem: str) -> Path | None:
    for candidate in (raw_dir / stem, raw_dir / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    return None


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise ValueError(f"{path} is truncated: expected {shape}, got {array.size} bytes")
    return array.reshape(shape)


def _download(name: str, data_dir: Path, fetch: Callable[[], T]) -> T:
    """``fetch()`` (a torchvision download), with a failure said in one line: offline, or a server down."""
    try:
        return fetch()
    except (OSError, RuntimeError) as exc:
        said = [line.strip() for line in str(exc).splitlines() if line.strip()]  # torchvision's last line: the cause
        reason = said[-1] if said else type(exc).__name__
        raise DatasetNotFound(f"{name} is not in {data_dir} and could not be downloaded ({reason}): connect to the "
                              f"internet, or give --data-dir the folder that holds it") from None


def _load_mnist(data_dir: Path, split: str, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    raw_dir = data_dir / "MNIST" / "raw"
    found = [_find_idx_file(raw_dir, stem) for stem in _MNIST_FILES[split]]
    if None in found:
        if not download:
            raise DatasetNotFound(f"MNIST files not found in {raw_dir}")
        import torchvision

        _download("MNIST", data_dir, lambda: torchvision.datasets.MNIST(str(data_dir), train=split == "train",
                                                                        download=True))
        found = [_find_idx_file(raw_dir, stem) for stem in _MNIST_FILES[split]]
    images, labels = (read_idx(path) for path in found)
    if len(images) != len(labels):
        raise ValueError(f"MNIST {split}: {len(images)} images but {len(labels)} labels in {raw_dir}")
    return torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


# ---- Image folders (CIFAR-10) -------------------------------------------------------------------


def _image_folder_files(root: Path, classes: tuple[str, ...]) -> list[tuple[Path, int]]:
    missing = [c for c in classes if not (root / c).is_dir()]
    if missing:
        raise DatasetNotFound(f"{root} lacks class folders {missing}")
    return [(path, label) for label, c in enumerate(classes) for path in sorted((root / c).glob("*.png"))]


def _download_cifar10_to_folder(data_dir: Path, spec: DatasetSpec, split: str) -> None:
    """Download CIFAR-10 through torchvision and write it out in the ImageFolder layout."""
    import torchvision

    dataset = _download("CIFAR-10", data_dir, lambda: torchvision.datasets.CIFAR10(str(data_dir), train=split == "train",
                                                                                  download=True))
    root = data_dir / spec.name / split
    for index, (image, label) in enumerate(zip(dataset.data, dataset.targets)):
        folder = root / spec.classes[label]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{index:05d}.png")


def _load_image_folder_cached(
    data_dir: Path, spec: DatasetSpec, split: str, download: bool, cache_dir: Path
) -> tuple[torch.Tensor, torch.Tensor]:
    root = data_dir / spec.name / split
    if not root.is_dir():
        if not download:
            raise DatasetNotFound(f"{root} not found (expected <data-dir>/{spec.name}/{split}/<class>/*.png)")
        _download_cifar10_to_folder(data_dir, spec, split)
    files = _image_folder_files(root, spec.classes)
    if not files:
        raise DatasetNotFound(f"no PNG images under {root}")
    # The cache key covers the folder and its listing, so a changed folder is decoded afresh.
    listing = "\n".join(f"{p.relative_to(root)}:{p.stat().st_size}" for p, _ in files)
    key = hashlib.sha256(f"{root.resolve()}\n{listing}".encode()).hexdigest()[:16]
    cache_file = cache_dir / f"{spec.name}-{split}-{key}.pt"
    if cache_file.is_file():
        cached = torch.load(cache_file, weights_only=True)
        return cached["images"], cached["labels"]
    images = torch.empty(len(files), spec.channels, spec.image_size, spec.image_size, dtype=torch.uint8)
    for i, (path, _) in enumerate(files):
        with Image.open(path) as image:
            array = np.array(image.convert("RGB" if spec.channels == 3 else "L"))
        if array.shape[:2] != (spec.image_size, spec.image_size):
            raise ValueError(f"{path} is {array.shape[1]}x{array.shape[0]}, expected {spec.image_size}x{spec.image_size}")
        images[i] = torch.from_numpy(array.reshape(spec.image_size, spec.image_size, -1)).permute(2, 0, 1)
    labels = torch.tensor([label for _, label in files], dtype=torch.int64)
    cache_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(cache_file, lambda f: torch.save({"images": images, "labels": labels}, f))
    return images, labels
