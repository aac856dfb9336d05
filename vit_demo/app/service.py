"""The models behind the app: each classifier loaded once per process, what its weights folder holds (calibration,
snapshots, the heads' means), and the model work the API calls (through ZeroGPU where it runs there).
No Gradio here.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vit_demo.app.zerogpu import app_device, model_work
from vit_demo.classifier import Classifier, Prediction, load_model
from vit_demo.interpret import heads
from vit_demo.model import ViTConfig
from vit_demo.training.recipes import RECIPES
from vit_demo.weights import (CONFIG_FILE, SHIPPED, WEIGHTS_ROOT, Snapshot, WeightsError, load_snapshots,
                              own_weights_folder, read_calibration, read_metrics)

WEIGHTS_ENV = "VIT_DEMO_WEIGHTS"  # a folder holding mnist/ and cifar10/ weights folders, to serve weights of your own
ADDED: dict[str, Path] = {}  # models served beside them (app.py --model DIR, static/space --model DIR): name -> folder


def add_model(folder: str | Path) -> str:
    """Serve the weights folder ``folder`` (an imported model, or one trained on a folder of one's own) beside the
    shipped models; return the name the page and the API take for it: the folder's name.

    Raises:
        WeightsError: it is no weights folder, or its name is taken by another model.
    """
    folder = own_weights_folder(folder)
    name = folder.name
    if ADDED.get(name, folder) != folder:
        raise WeightsError(f"{folder}: a model called {name!r} is served already; rename the folder")
    ADDED[name] = folder
    return name


def weights_root() -> Path:
    """Where the shipped models' weights folders are: ``weights/``, or ``$VIT_DEMO_WEIGHTS`` where that is set."""
    return Path(os.environ.get(WEIGHTS_ENV, WEIGHTS_ROOT))


def weights_root_models() -> list[Path]:
    """The weights folders in the weights root beside the shipped models' (where a Space's bundle keeps the models
    ``space --model`` added): the app serves them too."""
    root = weights_root()
    found = root.iterdir() if root.is_dir() else ()
    return sorted(folder for folder in found if folder.name not in SHIPPED and (folder / CONFIG_FILE).is_file())


def models() -> tuple[str, ...]:
    """Every model the app serves: the shipped ones, then those added."""
    return (*SHIPPED, *ADDED)


def weights_folder(name: str) -> Path:
    """A model's weights folder: an added model's own, else ``weights/<name>``, or ``$VIT_DEMO_WEIGHTS/<name>``
    where that is set."""
    return ADDED.get(name) or weights_root() / name


@functools.cache
def classifier(name: str) -> Classifier:
    """A model (``mnist``, ``cifar10``, one added; one without a head too: the page shows its attention), loaded once
    per process on ``VIT_DEMO_DEVICE`` (default: auto; the CPU on ZeroGPU, vit_demo.app.zerogpu)."""
    return load_model(weights_folder(name), device=app_device(), headless=True)


@functools.cache
def calibration_report(name: str) -> dict | None:
    """How a model's probabilities were calibrated and measured (its calibration.json), read once per process."""
    return read_calibration(weights_folder(name))


def model_config(name: str) -> ViTConfig:
    """The model's architecture; until a shipped model's weights exist, the one train.py will give them."""
    return RECIPES[name].vit if model_problem(name) and name in SHIPPED else classifier(name).info.config


def model_problem(name: str) -> str | None:
    """Why a model can't be used (missing or corrupt weights), or None when it can."""
    try:
        classifier(name)
    except WeightsError as exc:
        return str(exc)
    return None


@functools.cache
def ablation_means(name: str) -> torch.Tensor | None:
    """A model's stored head means (L, H, T, Dh) for mean-ablation, read once per process; None where its weights
    folder has none for these weights."""
    clf = classifier(name)
    return heads.read_head_means(clf.info.folder, clf.model)


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """The model through its training: the snapshots train.py kept, then the trained model itself."""

    snapshots: list[Snapshot]  # oldest first
    epochs: int | None  # how long the trained model was trained, from metrics.json
    test_accuracy: float | None
    problem: str | None  # why there are no snapshots to show, or None
    pretrained: bool = False  # it began from a pretrained encoder (train.py --init-from a --pretrain run), not random
    test_images: int | None = None  # how many test images test_accuracy is of, from metrics.json

    @property
    def positions(self) -> int:
        """Stops on the training slider: one per snapshot, and the trained model last."""
        return len(self.snapshots) + 1


@functools.cache
def training_run(name: str) -> TrainingRun:
    """A model's snapshots, loaded (and checked) once per process."""
    metrics = read_metrics(weights_folder(name)) or {}
    epochs, accuracy = metrics.get("epochs"), metrics.get("test_accuracy")
    # an --init-from that is not a supervised run carried on (metrics.json's "continues") is a pretrained encoder
    pretrained = bool(metrics.get("init_from")) and not metrics.get("continues")
    snapshots, problem = [], model_problem(name)
    if not problem:
        try:
            snapshots = load_snapshots(weights_folder(name), classifier(name).device)
        except WeightsError as exc:
            problem = str(exc)
        else:
            imported = classifier(name).info.imported
            if not snapshots and imported:
                problem = (f"This model was imported from {imported['source']}: there are no snapshots of its training "
                           "to show here.")
            elif not snapshots:
                problem = ("This model was trained before snapshots were kept along the way, so there is no earlier "
                           "model to show here.")
    return TrainingRun(snapshots, epochs, accuracy, problem, pretrained, metrics.get("test_images"))


@model_work
def predict(model: str, inputs: list[np.ndarray], **options: Any) -> list[Prediction]:
    """``Classifier.predict_preprocessed`` of ``model``, as model work (on ZeroGPU's GPU, through ``@spaces.GPU``)."""
    return classifier(model).predict_preprocessed(inputs, **options)
