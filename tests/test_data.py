import gzip

import numpy as np
import pytest
import torch

from vit_demo.data.datasets import DATASETS, DatasetNotFound, load_split, read_idx


@pytest.mark.parametrize("split", ["train", "test"])
def test_mnist_split(mnist_root, split):
    images, labels = load_split("mnist", mnist_root, split, download=False)
    assert images.dtype == torch.uint8 and images.shape[1:] == (1, 28, 28)
    assert labels.dtype == torch.int64 and labels.shape == (len(images),)
    assert set(labels.unique().tolist()) == set(range(10))
    assert images.float().mean() > 10  # real strokes, not an empty array


def test_missing_dataset_without_download(tmp_path):
    with pytest.raises(DatasetNotFound, match="MNIST files not found"):
        load_split("mnist", tmp_path, "test", download=False)
    with pytest.raises(DatasetNotFound, match="cifar10"):
        load_split("cifar10", tmp_path, "test", download=False)


def test_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset"):
        load_split("imagenet", tmp_path)
    with pytest.raises(ValueError, match="unknown split"):
        load_split("mnist", tmp_path, "validation")


def test_truncated_idx_file_is_reported(tmp_path):
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    with gzip.open(path, "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + (100).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2 + b"\0" * 50)
    with pytest.raises(ValueError, match="truncated"):
        read_idx(path)


def test_image_folder_is_decoded_once_and_cached(cifar_root, tmp_path):
    cache = tmp_path / "cache"
    images, labels = load_split("cifar10", cifar_root, "test", download=False, cache_dir=cache)
    assert images.dtype == torch.uint8 and images.shape[1:] == (3, 32, 32)
    assert torch.equal(torch.bincount(labels), torch.full((10,), 20))
    cached = list(cache.glob("cifar10-test-*.pt"))
    assert len(cached) == 1
    # A second load reads the cache: prove it by making the cache disagree with the PNGs.
    payload = torch.load(cached[0], weights_only=True)
    payload["labels"] = torch.zeros_like(payload["labels"])
    torch.save(payload, cached[0])
    _, labels_again = load_split("cifar10", cifar_root, "test", download=False, cache_dir=cache)
    assert labels_again.sum() == 0


def test_changed_image_folder_is_decoded_afresh(cifar_root, tmp_path):
    import shutil

    root = tmp_path / "data"
    shutil.copytree(cifar_root / "cifar10" / "test", root / "cifar10" / "test")
    cache = tmp_path / "cache"
    before, _ = load_split("cifar10", root, "test", download=False, cache_dir=cache)
    victim = sorted((root / "cifar10" / "test" / "cat").glob("*.png"))[0]
    victim.unlink()
    after, _ = load_split("cifar10", root, "test", download=False, cache_dir=cache)
    assert len(after) == len(before) - 1


def test_class_order_is_cifar_order():
    assert DATASETS["cifar10"].classes[0] == "airplane" and DATASETS["cifar10"].classes[9] == "truck"
    assert list(DATASETS["cifar10"].classes) == sorted(DATASETS["cifar10"].classes)


def test_wrongly_sized_image_is_reported(cifar_root, tmp_path):
    import shutil

    from PIL import Image

    root = tmp_path / "data"
    shutil.copytree(cifar_root / "cifar10" / "test", root / "cifar10" / "test")
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(root / "cifar10" / "test" / "dog" / "zz_small.png")
    with pytest.raises(ValueError, match="expected 32x32"):
        load_split("cifar10", root, "test", download=False, cache_dir=tmp_path / "cache")
