"""The datasets: what each one is, and its images as uint8 tensors.

MNIST is read from its original ``*-idx?-ubyte(.gz)`` files under ``<data_dir>/MNIST/raw`` and
CIFAR-10 from an ImageFolder layout ``<data_dir>/cifar10/{train,test}/<class>/*.png``. Where
neither is found, torchvision downloads the dataset into ``data_dir`` (this needs internet).
A folder of one's own pictures (``folder:PATH``, ``image_folder_dataset``) is an ImageFolder too, its images of any
size and mode read as the app reads an uploaded photo (``preprocess_photo``). Decoded images are cached as one tensor
file so that an epoch never decodes 60,000 files again.
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
from vit_demo.data.preprocess import Preprocessing, preprocess_photo


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    name: str  # what train.py --dataset takes: mnist, cifar10, or folder:PATH (PATH absolute)
    classes: tuple[str, ...]
    image_size: int
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    preprocessing: Preprocessing  # what a user's image goes through to look like the dataset's
    recipe: str  # the recipe (training/recipes.py) and augmentation (data/augment.py) it trains with
    root: Path | None = None  # a folder of one's own pictures: where it was read; None: mnist, cifar10 (--data-dir)

    @property
    def folder_name(self) -> str:
        """The name of the folders made for it (``weights/<name>``, ``runs/<name>``): the dataset's, or its folder's."""
        return self.name if self.root is None else self.root.name


DATASETS = {
    "mnist": DatasetSpec(
        name="mnist",
        classes=tuple(str(d) for d in range(10)),
        image_size=28,
        channels=1,
        mean=(0.1307,),
        std=(0.3081,),
        preprocessing=Preprocessing("drawing"),
        recipe="mnist",
    ),
    "cifar10": DatasetSpec(
        name="cifar10",
        classes=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
        image_size=32,
        channels=3,
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
        preprocessing=Preprocessing("photo"),
        recipe="cifar10",
    ),
}

SPLITS = ("train", "test")
T = TypeVar("T")


class DatasetNotFound(FileNotFoundError):
    pass


def dataset_spec(name: str) -> DatasetSpec:
    """A dataset by the name train.py --dataset takes: ``mnist``, ``cifar10``, or ``folder:PATH``, a folder of one's
    own pictures, read (and measured: its classes, mean and std) by ``image_folder_dataset``."""
    if name.startswith(FOLDER_PREFIX):
        return image_folder_dataset(name[len(FOLDER_PREFIX):])
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)} or {FOLDER_PREFIX}PATH") from None


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vit_demo"


def load_split(
    dataset: str | DatasetSpec, data_dir: str | Path, split: str = "train", *, download: bool = True,
    cache_dir: Path | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(images, labels)``: uint8 (N, C, H, W) and int64 (N,).

    ``dataset``: mnist or cifar10 (by name or spec), found under ``data_dir``; or a folder dataset's spec, whose
    images ``data_dir`` itself holds (``image_folder_dataset``), with the spec's classes. ``data_dir`` may be
    read-only; a decoded-image cache is written to ``cache_dir`` instead (default: ``$XDG_CACHE_HOME/vit_demo``).
    """
    spec = dataset if isinstance(dataset, DatasetSpec) else dataset_spec(dataset)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    data_dir = Path(data_dir)
    if spec.root is not None:
        return _folder_splits(spec, data_dir, cache_dir or default_cache_dir()).splits[split]
    if spec.name == "mnist":
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


# ---- A folder of one's own pictures (folder:PATH) ---------------------------------------------------------

FOLDER_PREFIX = "folder:"
FOLDER_TEST_SHARE = 0.1  # of each class, held out as the test split where a folder has no train/ and test/
FOLDER_SPLIT_SEED = 0  # that split's seed: the same whatever a run's --seed, so runs are measured on the same images
IMAGE_EXTENSIONS = frozenset(Image.registered_extensions())  # the files read as images (".png", ".jpg", ".webp"...)


def image_folder_spec(root: Path, classes: tuple[str, ...], mean: tuple[float, ...], std: tuple[float, ...],
                      image_size: int = DATASETS["cifar10"].image_size) -> DatasetSpec:
    """A folder of photos as a dataset: read as the app reads a photo, trained with the photo (cifar10) recipe."""
    photos = DATASETS["cifar10"]
    return DatasetSpec(name=f"{FOLDER_PREFIX}{root}", classes=tuple(classes), image_size=image_size,
                       channels=photos.channels, mean=tuple(mean), std=tuple(std),
                       preprocessing=photos.preprocessing, recipe=photos.recipe, root=root)


def image_folder_dataset(path: str | Path, cache_dir: Path | None = None) -> DatasetSpec:
    """``path`` as a dataset: ``path/train/<class>/*`` and ``path/test/<class>/*`` as they are, or ``path/<class>/*``
    with ``FOLDER_TEST_SHARE`` of each class held out as the test split (seed ``FOLDER_SPLIT_SEED``). The classes are
    the class folders' names in sorted order, as torchvision's ImageFolder takes them (folders whose name starts with
    a dot left out); the mean and std are each channel's over the training images, as preprocessed.

    Raises:
        DatasetNotFound: no such folder. ValueError: fewer than two classes, or a class without a readable image.
    """
    given = Path(path).expanduser()
    if not given.is_dir():
        raise DatasetNotFound(f"{path}: no such folder")
    root = given.resolve()
    classes = _folder_classes(root)
    unmeasured = image_folder_spec(root, classes, mean=(0.0,) * 3, std=(1.0,) * 3)
    train_x, _ = load_split(unmeasured, root, "train", cache_dir=cache_dir)
    if not len(load_split(unmeasured, root, "test", cache_dir=cache_dir)[0]):
        raise ValueError(f"{root}: too few pictures to hold any out to test on (a class needs 2 or more)")
    pixels = train_x.float().div_(255)  # (N, 3, H, W)
    mean, std = pixels.mean(dim=(0, 2, 3)), pixels.std(dim=(0, 2, 3)).clamp_min(1e-3)  # (3,) each
    return dataclasses.replace(unmeasured, mean=tuple(round(v, 4) for v in mean.tolist()),
                               std=tuple(round(v, 4) for v in std.tolist()))


def image_folder_record(spec: DatasetSpec, cache_dir: Path | None = None) -> dict:
    """What metrics.json keeps of a folder dataset: where it is, how it was split, each split's images per class,
    and the files skipped (not readable as an image, or a single flat colour)."""
    found = _folder_splits(spec, spec.root, cache_dir or default_cache_dir())
    counts = {split: dict(zip(spec.classes, torch.bincount(labels, minlength=len(spec.classes)).tolist()))
              for split, (_, labels) in found.splits.items()}
    held_out = None if found.has_split_folders else {"share_of_each_class": FOLDER_TEST_SHARE,
                                                     "seed": FOLDER_SPLIT_SEED}
    return {"path": str(spec.root), "test_held_out": held_out, "images_per_class": counts,
            "skipped": list(found.skipped)}


@dataclasses.dataclass(frozen=True)
class _FolderSplits:
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]  # split -> uint8 (N, 3, S, S), int64 (N,)
    skipped: tuple[str, ...]  # "relative/path: why", each file that could not be used
    has_split_folders: bool  # train/ and test/ as given; else the test split was held out


def _has_split_folders(root: Path) -> bool:
    given = [split for split in SPLITS if (root / split).is_dir()]
    if given and len(given) < len(SPLITS):
        raise DatasetNotFound(f"{root} has {given[0]}/ but no {[s for s in SPLITS if s not in given][0]}/: give it "
                              "both, or only a folder per class")
    return bool(given)


def _class_folders(root: Path) -> tuple[str, ...]:
    return tuple(sorted(entry.name for entry in os.scandir(root) if entry.is_dir() and not entry.name.startswith(".")))


def _folder_classes(root: Path) -> tuple[str, ...]:
    """The class folders of a folder dataset, checked: at least two, the same in train/ and test/, none empty."""
    if _has_split_folders(root):
        classes, test_classes = _class_folders(root / "train"), _class_folders(root / "test")
        if test_classes != classes:
            raise ValueError(f"{root}/test's class folders {list(test_classes)} are not train's {list(classes)}")
        where = root / "train"
    else:
        classes, where = _class_folders(root), root
    if len(classes) < 2:
        raise ValueError(f"{where} holds {len(classes)} class folder{'' if len(classes) == 1 else 's'}"
                         f"{' (' + classes[0] + ')' if classes else ''}: a classifier needs at least 2, a folder of "
                         "pictures for each class")
    return classes


def _image_files(root: Path, classes: tuple[str, ...]) -> list[tuple[Path, int]]:
    """Every image file under each class folder (at any depth), in sorted order, with its class's index."""
    missing = [c for c in classes if not (root / c).is_dir()]
    if missing:
        raise DatasetNotFound(f"{root} lacks class folders {missing}")
    files = []
    for label, name in enumerate(classes):
        found = sorted(p for p in (root / name).rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(root).parts))
        if not found:
            raise ValueError(f"{root / name} holds no pictures: every class needs some")
        files += [(path, label) for path in found]
    return files


def _decode_folder_cached(root: Path, classes: tuple[str, ...], size: int, cache_dir: Path
                          ) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    """Every image file under ``root``'s class folders, preprocessed as the app preprocesses a photo: uint8
    (N, 3, size, size), labels (N,), and the files skipped, each with why. Cached, keyed on the folder's listing."""
    files = _image_files(root, classes)
    listing = "\n".join(f"{p.relative_to(root)}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p, _ in files)
    key = hashlib.sha256(f"{root}\n{size}\n{classes}\n{listing}".encode()).hexdigest()[:16]
    cache_file = cache_dir / f"folder-{root.name}-{key}.pt"
    if cache_file.is_file():
        cached = torch.load(cache_file, weights_only=True)
        return cached["images"], cached["labels"], tuple(cached["skipped"])
    pictures, labels, skipped = [], [], []
    for path, label in files:
        try:
            picture = preprocess_photo(path, size)  # (size, size, 3) in [0, 1], on 256 levels
        except ValueError as exc:  # InputError: not an image, damaged, too large, one flat colour
            skipped.append(f"{path.relative_to(root)}: {exc}")
            continue
        pictures.append(torch.from_numpy(np.round(picture * 255).astype(np.uint8)).permute(2, 0, 1))  # (3, S, S)
        labels.append(label)
    images = torch.stack(pictures) if pictures else torch.empty(0, 3, size, size, dtype=torch.uint8)
    labels = torch.tensor(labels, dtype=torch.int64)
    empty = [c for k, c in enumerate(classes) if not (labels == k).any()]
    if empty:
        raise ValueError(f"{root / empty[0]} holds no picture that can be read: every class needs some")
    cache_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(cache_file, lambda f: torch.save({"images": images, "labels": labels, "skipped": skipped}, f))
    return images, labels, tuple(skipped)


def stratified_holdout(labels: torch.Tensor, share: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels (N,) -> (indices kept, indices held out), each in order: ``share`` of each class held out (rounded; at
    least one of a class of two or more, none of a class of one), chosen at random with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    held = []
    for k in range(int(labels.max()) + 1 if len(labels) else 0):
        members = torch.nonzero(labels == k).flatten()
        count = max(1, round(share * len(members))) if len(members) > 1 else 0
        held.append(members[torch.randperm(len(members), generator=generator)[:count]])
    held_out = torch.cat(held).sort().values if held else torch.empty(0, dtype=torch.int64)
    kept = torch.ones(len(labels), dtype=torch.bool)
    kept[held_out] = False
    return torch.nonzero(kept).flatten(), held_out


def _folder_splits(spec: DatasetSpec, root: Path, cache_dir: Path) -> _FolderSplits:
    if not root.is_dir():
        raise DatasetNotFound(f"{root}: no such folder (the pictures of {spec.name})")
    if _has_split_folders(root):
        decoded = {split: _decode_folder_cached(root / split, spec.classes, spec.image_size, cache_dir)
                   for split in SPLITS}
        return _FolderSplits({split: (x, y) for split, (x, y, _) in decoded.items()},
                             tuple(f"{split}/{file}" for split, (*_, skipped) in decoded.items() for file in skipped),
                             has_split_folders=True)
    images, labels, skipped = _decode_folder_cached(root, spec.classes, spec.image_size, cache_dir)
    kept, held_out = stratified_holdout(labels, FOLDER_TEST_SHARE, FOLDER_SPLIT_SEED)
    return _FolderSplits({"train": (images[kept], labels[kept]), "test": (images[held_out], labels[held_out])},
                         skipped, has_split_folders=False)
