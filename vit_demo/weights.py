"""A weights folder: ``config.json`` (architecture, dataset, classes, checksum) and ``model.safetensors``.

safetensors holds tensors only, so loading weights can never run code; the SHA-256 of the tensor
file is recorded in the config and checked on load.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.data import DATASETS, DatasetSpec, dataset_spec
from vit_demo.model import ViTConfig, VisionTransformer

WEIGHTS_ROOT = Path(__file__).resolve().parent.parent / "weights"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
METRICS_FILE = "metrics.json"
CURVES_FILE = "training_curves.png"


class WeightsError(RuntimeError):
    """Weights that are missing or unusable; the message names the file and how to make it."""


@dataclasses.dataclass(frozen=True)
class WeightsInfo:
    folder: Path
    dataset: DatasetSpec
    config: ViTConfig


def resolve_weights_folder(name_or_path: str | Path) -> Path:
    """A shipped model's name (``mnist``, ``cifar10``) or a path to a weights folder."""
    if isinstance(name_or_path, str) and name_or_path in DATASETS:
        return WEIGHTS_ROOT / name_or_path
    return Path(name_or_path)


def _shown(path: Path) -> Path:
    """A path as users should see it: relative to the working directory or the repo where it can be."""
    for base in (Path.cwd(), WEIGHTS_ROOT.parent):
        try:
            return path.resolve().relative_to(base.resolve())
        except ValueError:
            continue
    return path


def _train_command(folder: Path, dataset: str | None) -> str:
    if folder.resolve() == (WEIGHTS_ROOT / folder.name).resolve() and folder.name in DATASETS:
        return f"python train.py --dataset {folder.name}"
    return f"python train.py --dataset {dataset or 'mnist|cifar10'} --out {_shown(folder)}"


def save_weights(folder: str | Path, model: VisionTransformer, dataset: DatasetSpec) -> None:
    """Write the weights, then the config that vouches for them, each atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    blob = save_safetensors(state)
    atomic_write(folder / WEIGHTS_FILE, lambda f: f.write(blob))
    config = {
        "dataset": dataset.name,
        "classes": list(dataset.classes),
        "vit": model.config.to_dict(),
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
    }
    atomic_write_text(folder / CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def read_weights_info(folder: Path) -> tuple[WeightsInfo, str]:
    """Read and check ``config.json``; return the info and the expected weights checksum."""
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise WeightsError(f"{_shown(config_path)} not found. Make it with: {_train_command(folder, None)}")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
        spec = dataset_spec(raw["dataset"])
        config = ViTConfig.from_dict(raw["vit"])
        checksum = str(raw["weights_sha256"])
        if tuple(raw["classes"]) != spec.classes or config.num_classes != len(spec.classes):
            raise ValueError("its classes do not match the dataset")
    except (ValueError, KeyError, TypeError, AssertionError, UnicodeDecodeError) as exc:
        raise WeightsError(
            f"{_shown(config_path)} is not a valid weights config ({exc}). "
            f"Make it again with: {_train_command(folder, None)}"
        ) from exc
    return WeightsInfo(folder=folder, dataset=spec, config=config), checksum


def load_weights(name_or_path: str | Path, device: torch.device | str = "cpu") -> tuple[WeightsInfo, VisionTransformer]:
    """Load a weights folder into a model in eval mode, verifying the checksum first."""
    folder = resolve_weights_folder(name_or_path)
    info, checksum = read_weights_info(folder)
    remake = f"Make it again with: {_train_command(folder, info.dataset.name)}"
    weights_path = folder / WEIGHTS_FILE
    if not weights_path.is_file():
        raise WeightsError(f"{_shown(weights_path)} not found. Make it with: {_train_command(folder, info.dataset.name)}")
    blob = weights_path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != checksum:
        raise WeightsError(
            f"{_shown(weights_path)} is corrupt: its SHA-256 does not match {_shown(folder / CONFIG_FILE)}. {remake}")
    model = VisionTransformer(info.config)
    try:
        model.load_state_dict(load_safetensors(blob))
    except (SafetensorError, RuntimeError) as exc:
        raise WeightsError(f"{_shown(weights_path)} does not fit its config ({exc}). {remake}") from exc
    return info, model.to(device).eval()
