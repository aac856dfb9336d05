"""The models behind the app: each classifier loaded once per process, and one image's analysis.

No Gradio here: these are the functions every view, the API and the benchmarks call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vit_demo.app.zerogpu import app_device, model_work
from vit_demo.classifier import Classifier, Prediction, load_model
from vit_demo.data.preprocess import InputError
from vit_demo.interpret import explain, heads
from vit_demo.interpret.calibration import probabilities
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


ABLATIONS = ("mean", "zero")  # how a head is switched off: by its stored mean output (the default), or by zeros


@functools.cache
def ablation_means(name: str) -> torch.Tensor | None:
    """A model's stored head means (L, H, T, Dh) for mean-ablation, read once per process; None where its weights
    folder has none for these weights."""
    clf = classifier(name)
    return heads.read_head_means(clf.info.folder, clf.model)


@dataclasses.dataclass(frozen=True)
class HeadsOff:
    """Heads a page switched off, and how: what a view's numbers are computed under (it crosses into ZeroGPU's worker
    process by pickle, with the rest of a ``model_work`` call's arguments)."""

    off: tuple[tuple[int, int | None], ...]  # (layer, head), 0-based; head None: the whole layer
    mode: str = "mean"  # one of ABLATIONS


def heads_off(name: str, request: dict, required: bool = False) -> HeadsOff | None:
    """The heads a page's request switches off (its "off": [[layer, head], ...], 0-based, head null for a whole
    layer, and "mode": "mean" or "zero"), checked against model ``name``; None where it switches none off or says
    nothing of heads. ``required`` (the board's request): "off" must be there, and an empty list is a HeadsOff with
    no heads. Raises ValueError for anything else, in words for the page."""
    value, mode = request.get("off"), request.get("mode", "mean")
    if value is None and not required:
        return None
    config = model_config(name)
    if not isinstance(value, list) or len(value) > config.depth * config.heads:
        raise ValueError(f"'off' must be a list of at most {config.depth * config.heads} [layer, head] pairs")
    pairs = []
    for pair in value:
        if (not isinstance(pair, list) or len(pair) != 2 or not all(
                v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in pair) or pair[0] is None):
            raise ValueError(f"{pair!r} is not a [layer, head] pair of whole numbers (head null: the whole layer)")
        if not 0 <= pair[0] < config.depth or (pair[1] is not None and not 0 <= pair[1] < config.heads):
            raise ValueError(f"there is no head {pair!r}: layers are 0 to {config.depth - 1}, heads 0 to "
                             f"{config.heads - 1} (0-based)")
        pairs.append((pair[0], pair[1]))
    if mode not in ABLATIONS:
        raise ValueError(f"there is no ablation {mode!r}: choose one of {', '.join(ABLATIONS)}")
    if mode == "mean" and ablation_means(name) is None:
        raise ValueError("this model's weights keep no head means, so its heads can only be zero-ablated")
    return HeadsOff(tuple(pairs), mode) if pairs or required else None


@contextlib.contextmanager
def switched_off(name: str, off: HeadsOff | None) -> Iterator[None]:
    """Model ``name`` with the heads ``off`` switched off, for every forward pass on this thread in the ``with``
    (``heads.switched_off``); as it is where ``off`` is None."""
    if off is None or not off.off:
        yield
        return
    with heads.switched_off(classifier(name).model, off.off, ablation_means(name) if off.mode == "mean" else None):
        yield


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
def analyse_inputs(model: str, inputs: list[np.ndarray], explain_labels: list[str | None] | None,
                   off: HeadsOff | None = None) -> list[Analysis]:
    """Already preprocessed images through ``model`` in one forward and one backward pass (for the relevance of
    ``explain_labels[i]``, None: the predicted class), timing the model alone. ``explain_labels`` None: no relevance
    (the forward pass alone, some 2 ms less for a drawing), for a page that does not show it now. ``off``: with
    those heads switched off.

    Raises:
        ValueError: a label that is not one of the model's classes.
    """
    clf = classifier(model)
    if clf.device.type == "cuda":
        torch.cuda.synchronize(clf.device)
    started = time.perf_counter()
    with switched_off(model, off):
        predictions = clf.predict_preprocessed(inputs, relevance_for=explain_labels)
    model_ms = (time.perf_counter() - started) * 1000
    return [Analysis(model=model, input=prediction.input, attention=prediction.attention, probs=prediction.probs,
                     relevance=prediction.relevance, relevance_label=prediction.relevance_label, model_ms=model_ms,
                     device=str(clf.device), unfamiliar=prediction.unfamiliar)
            for prediction in predictions]


@dataclasses.dataclass(frozen=True, eq=False)
class Knockout:
    """One image through the model with and without some heads (``HeadsOff``): what the board shows. Compared by
    identity (``eq=False``), as ``Analysis``: it holds arrays."""

    classes: tuple[str, ...]
    off: tuple[tuple[int, int], ...]  # every head switched off, (layer, head), 0-based: a whole layer's heads too
    heads: int  # how many the model has in all
    mode: str  # one of ABLATIONS
    intact: np.ndarray  # (classes,) calibrated probabilities with every head on
    ablated: np.ndarray  # (classes,) with the heads off
    predicted: int  # the intact model's class and runner-up
    runner_up: int
    logit_diff: float  # the intact model's class minus its runner-up, in logits: with every head on
    ablated_logit_diff: float  # and with the heads off
    attention: np.ndarray  # the ablated run's (L, H, T, T)


@model_work
def knockout(model: str, image: np.ndarray, off: HeadsOff) -> Knockout:
    """One preprocessed image through ``model`` with and without the heads ``off`` (one batched forward pass of 2)."""
    clf = classifier(model)
    means = ablation_means(model) if off.mode == "mean" else None
    result = heads.knockout(clf.model, clf.batch([image]), off.off, means, attention=True)
    logits, ablated = result.logits[0].float().cpu(), result.ablated[0].float().cpu()
    predicted, runner_up = int(result.predicted[0]), int(result.runner_up[0])
    mask = heads.head_mask(clf.model, off.off)  # (L, H)
    return Knockout(
        classes=tuple(clf.classes), off=tuple(tuple(pair) for pair in mask.nonzero().tolist()), heads=mask.numel(),
        mode=off.mode, intact=probabilities(logits, clf.temperature).numpy(),
        ablated=probabilities(ablated, clf.temperature).numpy(), predicted=predicted, runner_up=runner_up,
        logit_diff=float(logits[predicted] - logits[runner_up]),
        ablated_logit_diff=float(ablated[predicted] - ablated[runner_up]),
        attention=result.ablated_attention[0].float().cpu().numpy())


@model_work
def predict(model: str, inputs: list[np.ndarray], off: HeadsOff | None = None, **options: Any) -> list[Prediction]:
    """``Classifier.predict_preprocessed`` of ``model`` (``off``: with those heads switched off), as model work (on
    ZeroGPU's GPU, through ``@spaces.GPU``)."""
    with switched_off(model, off):
        return classifier(model).predict_preprocessed(inputs, **options)


@model_work
def relevance(model: str, inputs: list[np.ndarray], labels: list[str | None]) -> np.ndarray:
    """``Classifier.relevance_preprocessed`` of ``model`` (B, g, g), as model work (on ZeroGPU's GPU, through
    ``@spaces.GPU``)."""
    return classifier(model).relevance_preprocessed(inputs, labels)


def starting_example(model: str, examples: list[Path], stem: str) -> tuple[Path, Analysis] | tuple[None, None]:
    """The example called ``stem`` and its analysis, the image a tab's page starts with; (None, None) where there is
    no such example or no model."""
    path = next((path for path in examples if path.stem == stem), None)
    if path is None or model_problem(model):
        return None, None
    return path, analyse(model, path)


def analyse(model: str, image: Any, explain_label: str | None = None) -> Analysis:
    """Preprocess ``image`` for ``model`` and run it, timing the model alone."""
    result = analyse_batch(model, [image], [explain_label])[0]
    if isinstance(result, InputError):
        raise result
    return result
