"""The models behind the app: each classifier loaded once per process, and one image's analysis.

No Gradio here: these are the functions every view, the API and the benchmarks call.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vit_demo.app.zerogpu import app_device, model_work
from vit_demo.classifier import Classifier, Prediction, load_model
from vit_demo.data.preprocess import InputError
from vit_demo.interpret import explain, heads
from vit_demo.model import ViTConfig
from vit_demo.training.recipes import RECIPES
from vit_demo.weights import WEIGHTS_ROOT, Snapshot, WeightsError, load_snapshots, read_calibration, read_metrics

WEIGHTS_ENV = "VIT_DEMO_WEIGHTS"  # a folder holding mnist/ and cifar10/ weights folders, to serve weights of your own


def weights_folder(name: str) -> Path:
    """A model's weights folder: ``weights/<name>``, or ``$VIT_DEMO_WEIGHTS/<name>`` where that is set."""
    return Path(os.environ.get(WEIGHTS_ENV, WEIGHTS_ROOT)) / name


@functools.cache
def classifier(name: str) -> Classifier:
    """A model (``mnist``, ``cifar10``), loaded once per process on ``VIT_DEMO_DEVICE`` (default: auto; the CPU on
    ZeroGPU, vit_demo.app.zerogpu)."""
    return load_model(weights_folder(name), device=app_device())


@functools.cache
def calibration_report(name: str) -> dict | None:
    """How a model's probabilities were calibrated and measured (its calibration.json), read once per process."""
    return read_calibration(weights_folder(name))


def model_config(name: str) -> ViTConfig:
    """The model's architecture; until its weights exist, the one train.py will give them."""
    return RECIPES[name].vit if model_problem(name) else classifier(name).info.config


def input_shape(name: str) -> tuple[int, ...]:
    """What the model reads: (H, W) for one channel, (H, W, C) for more."""
    config = model_config(name)
    side = (config.image_size, config.image_size)
    return side if config.in_channels == 1 else (*side, config.in_channels)


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

    @property
    def positions(self) -> int:
        """Stops on the training slider: one per snapshot, and the trained model last."""
        return len(self.snapshots) + 1


@functools.cache
def training_run(name: str) -> TrainingRun:
    """A model's snapshots, loaded (and checked) once per process."""
    metrics = read_metrics(weights_folder(name)) or {}
    epochs, accuracy = metrics.get("epochs"), metrics.get("test_accuracy")
    problem = model_problem(name)
    if problem:
        return TrainingRun([], epochs, accuracy, problem)
    try:
        snapshots = load_snapshots(weights_folder(name), classifier(name).device)
    except WeightsError as exc:
        return TrainingRun([], epochs, accuracy, str(exc))
    if not snapshots:
        return TrainingRun([], epochs, accuracy, "This model was trained before snapshots were kept along the way, "
                           "so there is no earlier model to show here.")
    return TrainingRun(snapshots, epochs, accuracy, None)


@dataclasses.dataclass(frozen=True, eq=False)
class Analysis:
    """One image through the model: what it saw, what it said, its attention and its class-specific relevance.

    Compared and hashed by identity (``eq=False``): each analysis is a new state, and Gradio hashes the state to
    see whether it changed (its ``change`` event draws the views).
    """

    model: str  # mnist or cifar10
    input: np.ndarray  # (28, 28) or (32, 32, 3), in [0, 1]
    attention: np.ndarray  # (layers, heads, tokens, tokens)
    probs: dict[str, float]
    relevance: np.ndarray | None  # (g, g), for relevance_label; None where it was not asked for
    relevance_label: str | None
    model_ms: float
    device: str
    unfamiliar: bool = False  # looks unlike anything the model knows (the weights' rule)

    @property
    def label(self) -> str:
        return max(self.probs, key=self.probs.get)

    @property
    def grid(self) -> int:
        return explain.grid_size(self.attention)

    @functools.cached_property
    def rollout(self) -> np.ndarray:  # (g, g)
        return explain.attention_rollout(self.attention)


def analyse_batch(model: str, images: list[Any], explain_labels: list[str | None] | None = None
                  ) -> list[Analysis | InputError]:
    """Preprocess ``images`` for ``model`` and analyse them together (``analyse_inputs``), with the relevance of
    ``explain_labels[i]`` (None or omitted: the predicted class).

    An image that can't be read (or is blank) gets its ``InputError`` (``NothingDrawn``) in its place.
    """
    clf = classifier(model)
    explain_labels = explain_labels or [None] * len(images)
    inputs: dict[int, np.ndarray] = {}
    results: list[Analysis | InputError | None] = [None] * len(images)
    for i, image in enumerate(images):
        try:
            inputs[i] = clf.preprocess(image)
        except InputError as exc:
            results[i] = exc
    if inputs:
        analyses = analyse_inputs(model, list(inputs.values()), [explain_labels[i] for i in inputs])
        for i, analysis in zip(inputs, analyses):
            results[i] = analysis
    return results


@model_work
def analyse_inputs(model: str, inputs: list[np.ndarray], explain_labels: list[str | None] | None) -> list[Analysis]:
    """Already preprocessed images through ``model`` in one forward and one backward pass (for the relevance of
    ``explain_labels[i]``, None: the predicted class), timing the model alone. ``explain_labels`` None: no relevance
    (the forward pass alone).

    Raises:
        ValueError: a label that is not one of the model's classes.
    """
    clf = classifier(model)
    if clf.device.type == "cuda":
        torch.cuda.synchronize(clf.device)
    started = time.perf_counter()
    predictions = clf.predict_preprocessed(inputs, relevance_for=explain_labels)
    model_ms = (time.perf_counter() - started) * 1000
    return [Analysis(model=model, input=prediction.input, attention=prediction.attention, probs=prediction.probs,
                     relevance=prediction.relevance, relevance_label=prediction.relevance_label, model_ms=model_ms,
                     device=str(clf.device), unfamiliar=prediction.unfamiliar)
            for prediction in predictions]


@model_work
def predict(model: str, inputs: list[np.ndarray], **options: Any) -> list[Prediction]:
    """``Classifier.predict_preprocessed`` of ``model``, as model work (on ZeroGPU's GPU, through ``@spaces.GPU``)."""
    return classifier(model).predict_preprocessed(inputs, **options)


@model_work
def relevance(model: str, inputs: list[np.ndarray], labels: list[str | None]) -> np.ndarray:
    """``Classifier.relevance_preprocessed`` of ``model`` (B, g, g), as model work (on ZeroGPU's GPU, through
    ``@spaces.GPU``)."""
    return classifier(model).relevance_preprocessed(inputs, labels)


def analyse(model: str, image: Any, explain_label: str | None = None) -> Analysis:
    """Preprocess ``image`` for ``model`` and run it, timing the model alone."""
    result = analyse_batch(model, [image], [explain_label])[0]
    if isinstance(result, InputError):
        raise result
    return result
