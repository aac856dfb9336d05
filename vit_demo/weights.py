"""A weights folder: ``config.json`` (architecture, dataset, classes, checksum) and ``model.safetensors``.

safetensors holds tensors only, so loading weights can never run code; the SHA-256 of the tensor
file is recorded in the config and checked on load.

A model trained here names its dataset, whose classes and preprocessing it takes (vit_demo/data/datasets.py); one
trained on a folder of one's own pictures (``folder:PATH``) records its classes and preprocessing itself, as an
imported one does, so that it loads where the folder is not. A model imported from timm or Hugging Face (``python -m vit_demo import``, vit_demo/importing.py) has no dataset: its config
records where it came from (``import``), its classes in the head's order, and its own ``preprocessing``
(vit_demo/data/preprocess.py, ``Preprocessing``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.data.datasets import DATASETS, FOLDER_PREFIX, DatasetSpec, dataset_spec, image_folder_spec
from vit_demo.data.preprocess import Preprocessing, resized_shape
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.unfamiliar_rule import UnfamiliarRule

WEIGHTS_ROOT = Path(__file__).resolve().parent.parent / "weights"
SHIPPED = ("mnist", "cifar10")  # the models this repository ships, in WEIGHTS_ROOT, by the names the app takes
CONFIG_FILE = "config.json"
GRAPH_WEIGHT_TYPES = ("float32", "float16", "int8")  # config.json's graph_weights, the first the default (onnx/export)
WEIGHTS_FILE = "model.safetensors"
METRICS_FILE = "metrics.json"
CALIBRATION_FILE = "calibration.json"  # how the temperature was fitted, and the test-set ECE and NLL before and after
RELIABILITY_FILE = "reliability.png"  # its reliability diagrams, before and after
CURVES_FILE = "training_curves.png"
SNAPSHOTS_DIR = "snapshots"  # the model during training, a few epochs on a log scale (train.py --snapshots)
SNAPSHOTS_INDEX = "snapshots.json"
MAE_DECODER_FILE = "mae_decoder.safetensors"  # a pretraining run's MAE decoder, beside its encoder (model.safetensors)
RECONSTRUCTIONS_FILE = "reconstructions.png"  # a pretraining run's MAE filling in hidden patches of test images
# Made from the weights by the tools that study them (python -m vit_demo head-means, head-importance, inside, onnx),
# once, and read by the app, which has no dataset.
HEAD_MEANS_FILE = "head_means.safetensors"  # each head's mean output, for mean-ablation
HEAD_IMPORTANCE_FILE = "head_importance.json"  # importance and pruning curves
ATTENTION_DISTANCE_FILE = "attention_distance.json"  # each layer's and head's mean attention distance
FAITHFULNESS_FILE = "faithfulness.json"  # each kind of map's mean deletion and insertion AUC (the page's first map)
GRAPH_FILE = "model.onnx"  # the model as the page runs it (vit_demo/onnx/export.py)
RELEVANCE_GRAPH_FILE = "relevance.onnx"  # the class-specific relevance, gradients traced in
LENS_GRAPH_FILE = "lens.onnx"  # the logit lens, apart from model.onnx where it costs the first answer (a large head)
PATCHING_GRAPH_FILES = {"heads": "patching_heads.onnx", "residual": "patching_residual.onnx"}  # two-image patching
GRAPH_WEIGHTS_FILE = "graphs.data"  # the weights the graphs above share (ONNX external data), each tensor once


class WeightsError(RuntimeError):
    """Weights that are missing or unusable; the message names the file and how to make it."""


@dataclasses.dataclass(frozen=True)
class WeightsInfo:
    folder: Path
    dataset: DatasetSpec | None  # what the model was trained on; None: it was imported
    config: ViTConfig
    classes: tuple[str, ...]  # what the head's outputs mean, in its order; none for a model without a head
    preprocessing: Preprocessing  # what an image goes through before the model reads it
    temperature: float = 1.0  # logits are divided by it before the softmax (interpret/calibration.py); 1: not calibrated
    unfamiliar: UnfamiliarRule | None = None  # when an image looks unlike anything the model knows; None: no rule
    pretrained: dict | None = None  # a pretrained encoder's record (train.py --pretrain): its head is untrained
    imported: dict | None = None  # an imported model's record: its source, the command, the library's version
    graph_weights: str = GRAPH_WEIGHT_TYPES[0]  # how the page's graphs keep the weights: as they are, or rounded

    @property
    def name(self) -> str:
        """The model's name in the files made from it: its dataset's (mnist, cifar10), or its weights folder's (an
        imported model's, or one trained on a folder of one's own pictures)."""
        return self.folder.name if self.dataset is None or self.dataset.root is not None else self.dataset.name

    def trained_dataset(self) -> DatasetSpec:
        """The dataset the model was trained on, for the commands that measure it there; for an imported model a
        WeightsError that says it has none."""
        if self.dataset is None:
            raise WeightsError(f"{shown_path(self.folder)} holds a model imported from {self.imported['source']}, not "
                               f"one trained here: it has no dataset ({', '.join(DATASETS)}) to measure it on")
        return self.dataset


def weights_sha256(folder: Path) -> str:
    """The SHA-256 of a weights folder's tensor file, as its config records it (``weights_sha256``)."""
    return hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()


def resolve_weights_folder(name_or_path: str | Path) -> Path:
    """A shipped model's name (``mnist``, ``cifar10``) or a path to a weights folder."""
    if isinstance(name_or_path, str) and name_or_path in DATASETS:
        return WEIGHTS_ROOT / name_or_path
    return Path(name_or_path)


def own_weights_folder(folder: str | Path) -> Path:
    """``folder`` resolved, where it is a weights folder of one's own to serve beside the shipped models (an imported
    model, or one trained on a folder of one's own): it holds a config.json and is not named as a shipped model.

    Raises:
        WeightsError: it is not.
    """
    folder = Path(folder).resolve()
    if not (folder / CONFIG_FILE).is_file():
        raise WeightsError(f"{folder}: no {CONFIG_FILE} there, so no weights folder (python -m vit_demo import or "
                           "train.py writes one)")
    if folder.name in SHIPPED:
        raise WeightsError(f"{folder}: {folder.name!r} is a shipped model's name; rename the folder")
    return folder


def shown_path(path: Path) -> Path:
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
    return f"python train.py --dataset {dataset or 'mnist|cifar10|folder:PATH'} --out {shown_path(folder)}"


def _make_command(info: WeightsInfo) -> str:
    """The command that makes a weights folder again: the import, or the training run."""
    if info.imported is not None:
        return info.imported["command"]
    return _train_command(info.folder, info.dataset.name)


def save_weights(folder: str | Path, model: VisionTransformer, dataset: DatasetSpec) -> None:
    """Write the weights of a model trained on ``dataset``, then the config that vouches for them, each atomically.
    A folder dataset's preprocessing is recorded beside its classes (mnist's and cifar10's are their dataset's)."""
    own = {"preprocessing": dataset.preprocessing.to_dict()} if dataset.root is not None else {}
    _save(folder, model, {"dataset": dataset.name, "classes": list(dataset.classes), **own})


def save_imported(folder: str | Path, model: VisionTransformer, classes: tuple[str, ...],
                  preprocessing: Preprocessing, record: dict) -> None:
    """Write an imported model's weights, then its config: ``record`` (its ``source`` and the ``command`` that
    imported it), its classes in the head's order and its preprocessing."""
    _save(folder, model, {"import": record, "classes": list(classes), "preprocessing": preprocessing.to_dict()})


def _save(folder: str | Path, model: VisionTransformer, identity: dict) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    blob = save_safetensors(state)
    atomic_write(folder / WEIGHTS_FILE, lambda f: f.write(blob))
    config = {**identity, "vit": model.config.to_dict(), "weights_sha256": hashlib.sha256(blob).hexdigest()}
    atomic_write_text(folder / CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def read_weights_info(folder: Path) -> tuple[WeightsInfo, str]:
    """Read and check ``config.json``; return the info and the expected weights checksum."""
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise WeightsError(f"{shown_path(config_path)} not found. Make it with: {_train_command(folder, None)}")
    raw = None
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
        config = ViTConfig.from_dict(raw["vit"])
        checksum = str(raw["weights_sha256"])
        classes = tuple(str(name) for name in raw["classes"])
        if "import" in raw:
            spec, preprocessing, imported = None, Preprocessing.from_dict(raw["preprocessing"]), dict(raw["import"])
            size = config.image_size
            if preprocessing.method == "resize_crop" and min(resized_shape(size, size, preprocessing.resize)) < size:
                raise ValueError(f"its preprocessing resizes to less than the model's {size} pixels")
        elif str(raw["dataset"]).startswith(FOLDER_PREFIX):  # a folder of one's own pictures: not read here
            spec, imported = image_folder_spec(Path(raw["dataset"][len(FOLDER_PREFIX):]), classes, config.mean,
                                               config.std, config.image_size), None
            preprocessing = Preprocessing.from_dict(raw["preprocessing"])
            if preprocessing != spec.preprocessing:
                raise ValueError(f"a folder of pictures is read with the {spec.preprocessing.method} preprocessing")
        else:
            spec, imported = dataset_spec(raw["dataset"]), None
            preprocessing = spec.preprocessing
            if classes != spec.classes:
                raise ValueError("its classes do not match the dataset")
        if config.num_classes != len(classes) or len(set(classes)) != len(classes):
            raise ValueError(f"{len(set(classes))} distinct classes for a head of {config.num_classes}")
        temperature = float(raw.get("temperature", 1.0))
        if not 0 < temperature < float("inf"):
            raise ValueError(f"temperature {temperature} is not a positive number")
        unfamiliar = UnfamiliarRule.from_dict(raw["unfamiliar"]) if raw.get("unfamiliar") else None
        graph_weights = str(raw.get("graph_weights", GRAPH_WEIGHT_TYPES[0]))
        if graph_weights not in GRAPH_WEIGHT_TYPES:
            raise ValueError(f"graph_weights {graph_weights!r} is not one of {', '.join(GRAPH_WEIGHT_TYPES)}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        imported = raw.get("import") if isinstance(raw, dict) else None
        command = imported.get("command") if isinstance(imported, dict) else None
        raise WeightsError(
            f"{shown_path(config_path)} is not a valid weights config ({exc}). "
            f"Make it again with: {command if isinstance(command, str) else _train_command(folder, None)}"
        ) from exc
    return WeightsInfo(folder=folder, dataset=spec, config=config, classes=classes, preprocessing=preprocessing,
                       temperature=temperature, unfamiliar=unfamiliar, pretrained=raw.get("pretrained"),
                       imported=imported, graph_weights=graph_weights), checksum


def update_config(folder: str | Path, **fields: object) -> None:
    """Set ``fields`` in a weights folder's ``config.json`` (None removes one), atomically; the weights and their
    checksum stay as they are."""
    path = Path(folder) / CONFIG_FILE
    config = json.loads(path.read_text(encoding="utf-8"))
    for key, value in fields.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    atomic_write_text(path, json.dumps(config, indent=2) + "\n")


def load_weights(name_or_path: str | Path, device: torch.device | str = "cpu") -> tuple[WeightsInfo, VisionTransformer]:
    """Load a weights folder into a model in eval mode, verifying the checksum first."""
    folder = resolve_weights_folder(name_or_path)
    info, checksum = read_weights_info(folder)
    remake = f"Make it again with: {_make_command(info)}"
    weights_path = folder / WEIGHTS_FILE
    if not weights_path.is_file():
        raise WeightsError(f"{shown_path(weights_path)} not found. Make it with: {_make_command(info)}")
    blob = weights_path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != checksum:
        raise WeightsError(
            f"{shown_path(weights_path)} is corrupt: its SHA-256 does not match {shown_path(folder / CONFIG_FILE)}. {remake}")
    model = VisionTransformer(info.config)
    try:
        model.load_state_dict(load_safetensors(blob))
    except (SafetensorError, RuntimeError) as exc:
        raise WeightsError(f"{shown_path(weights_path)} does not fit its config ({exc}). {remake}") from exc
    return info, model.to(device).eval()


# What a model must share with the one it starts (train.py --init-from); stochastic depth, dropout and, from a
# pretraining run's encoder, the number of classes may differ.
ENCODER_FIELDS = ("image_size", "patch_size", "in_channels", "dim", "depth", "heads", "mlp_dim", "mean", "std")


def initialise_from(model: VisionTransformer, folder: str | Path, head: bool) -> list[str]:
    """Start ``model`` from a weights folder (its checksum checked): every tensor but the head's, which keeps its fresh
    initialisation (the encoder of a pretraining run, ``train.py --pretrain``), or with ``head`` every tensor (a model
    of the same classes, to fine-tune it). Returns the names of the tensors copied."""
    info, trained = load_weights(Path(folder))
    differ = [f"{name} {getattr(info.config, name)} there, {getattr(model.config, name)} here"
              for name in ENCODER_FIELDS if getattr(info.config, name) != getattr(model.config, name)]
    if differ:
        raise WeightsError(f"{shown_path(Path(folder))} holds another architecture: {'; '.join(differ)}")
    state = {k: v for k, v in trained.state_dict().items() if head or not k.startswith("head.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if sorted(missing) != ([] if head else ["head.bias", "head.weight"]) or unexpected:
        raise WeightsError(f"{shown_path(Path(folder))} does not fit: missing {missing}, unexpected {unexpected}")
    return sorted(state)


# ---- Snapshots: the model as it was during training --------------------------------------------------------


def snapshot_epochs(epochs: int, count: int) -> list[int]:
    """Up to ``count`` epochs before the last, on a log scale from 1: when training keeps a snapshot.

    Attention forms early, so the early epochs are where to look; the last epoch is the weights themselves.
    """
    if count <= 0 or epochs <= 1:
        return []
    return sorted({int(round(e)) for e in np.geomspace(1, epochs, count + 1)[:-1]} - {epochs})


def save_snapshot(folder: str | Path, model: torch.nn.Module, epoch: int) -> None:
    """Keep the model (a ViT, or a pretraining run's whole MAE) as it is after ``epoch`` in ``folder/snapshots/``:
    fp16 tensors, half the size of fp32."""
    state = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()}
    path = Path(folder) / SNAPSHOTS_DIR / f"epoch-{epoch:04d}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = save_safetensors(state)
    atomic_write(path, lambda f: f.write(blob))


def write_snapshot_index(folder: str | Path, history: list[dict], measure: str = "test_accuracy") -> None:
    """List the snapshots in ``folder`` with their epoch, ``measure`` from the history (a pretraining run's:
    its test reconstruction loss) and SHA-256 (checked on load)."""
    folder = Path(folder)
    measured = {h["epoch"]: h[measure] for h in history}
    entries = []
    for path in sorted((folder / SNAPSHOTS_DIR).glob("epoch-*.safetensors")):
        epoch = int(path.stem.split("-")[1])
        if epoch in measured:
            entries.append({"epoch": epoch, measure: measured[epoch], "file": f"{SNAPSHOTS_DIR}/{path.name}",
                            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    atomic_write_text(folder / SNAPSHOTS_INDEX, json.dumps(entries, indent=2) + "\n")


def carry_snapshots(source: Path, folder: str | Path) -> None:
    """Copy the snapshots (and their index) a run kept in ``source`` into ``folder``, where a fine-tune of its model
    carries them on; nothing where they are the same folder, or there are none."""
    folder = Path(folder)
    if not (source / SNAPSHOTS_INDEX).is_file() or folder.resolve() == source.resolve():
        return
    shutil.copytree(source / SNAPSHOTS_DIR, folder / SNAPSHOTS_DIR, dirs_exist_ok=True)
    shutil.copy2(source / SNAPSHOTS_INDEX, folder / SNAPSHOTS_INDEX)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    epoch: int
    test_accuracy: float
    model: VisionTransformer
    temperature: float = 1.0  # this snapshot's own calibration (see calibration.py)


def load_snapshots(name_or_path: str | Path, device: torch.device | str = "cpu") -> list[Snapshot]:
    """The snapshots a training run kept, oldest first, each checked against its SHA-256 (none: an empty list).

    The weights are stored as fp16 and loaded back into an fp32 model.
    """
    folder = resolve_weights_folder(name_or_path)
    index = folder / SNAPSHOTS_INDEX
    if not index.is_file():
        return []
    info, _ = read_weights_info(folder)
    snapshots = []
    for entry in json.loads(index.read_text(encoding="utf-8")):
        path = folder / entry["file"]
        blob = path.read_bytes() if path.is_file() else b""
        if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
            raise WeightsError(f"{shown_path(path)} is missing or corrupt: its SHA-256 does not match {shown_path(index)}. "
                               f"Make it again with: {_make_command(info)}")
        model = VisionTransformer(info.config)
        model.load_state_dict({k: v.float() for k, v in load_safetensors(blob).items()})
        snapshots.append(Snapshot(entry["epoch"], entry["test_accuracy"], model.to(device).eval(),
                                  float(entry.get("temperature", 1.0))))
    return snapshots


def set_snapshot_temperatures(folder: str | Path, temperatures: dict[int, float]) -> None:
    """Record each snapshot's fitted temperature ({epoch: T}) in ``snapshots.json``."""
    index = Path(folder) / SNAPSHOTS_INDEX
    entries = json.loads(index.read_text(encoding="utf-8"))
    for entry in entries:
        entry["temperature"] = temperatures[entry["epoch"]]
    atomic_write_text(index, json.dumps(entries, indent=2) + "\n")


def _read_record(name_or_path: str | Path, file: str) -> dict | None:
    try:
        return json.loads((resolve_weights_folder(name_or_path) / file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_metrics(name_or_path: str | Path) -> dict | None:
    """What train.py recorded about a weights folder's run (metrics.json), or None where there is no record."""
    return _read_record(name_or_path, METRICS_FILE)


def read_calibration(name_or_path: str | Path) -> dict | None:
    """How a weights folder's temperature was fitted and measured (calibration.json), or None where it never was."""
    return _read_record(name_or_path, CALIBRATION_FILE)
