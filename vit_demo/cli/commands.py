"""What each command of ``python -m vit_demo`` runs (``vit_demo/cli/__init__.py`` builds the parser): the same
functions as the app, their results as JSON records."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from vit_demo.atomic import atomic_write
from vit_demo.classifier import Classifier, load_model
from vit_demo.data.datasets import DatasetNotFound, load_split, spread
from vit_demo.data.preprocess import InputError
from vit_demo.device import resolve_device
from vit_demo.importing import write_import
from vit_demo.interpret import heads
from vit_demo.interpret.faithfulness import mean_aucs, write_record
from vit_demo.interpret.inside import ATTENTION_DISTANCE_FILE, write_attention_distance
from vit_demo.pictures import slides
from vit_demo.progress import Steps
from vit_demo.training.calibrate import calibrate
from vit_demo.training.evaluation import evaluate
from vit_demo.weights import (CALIBRATION_FILE, GRAPH_WEIGHT_TYPES, HEAD_IMPORTANCE_FILE, HEAD_MEANS_FILE,
                              resolve_weights_folder, shown_path, update_config)


def predict_files(classifier: Classifier, files: Sequence[str], top: int, batch_size: int) -> int:
    """Print one JSON line per file, in order; return how many files could not be classified."""
    failures = 0
    for start in range(0, len(files), batch_size):
        chunk = files[start : start + batch_size]
        records: list[dict] = []
        inputs = []
        for name in chunk:
            try:
                inputs.append(classifier.preprocess(name))
                records.append({"file": name})
            except InputError as exc:
                records.append({"file": name, "error": str(exc)})
                failures += 1
        predictions = iter(classifier.predict_preprocessed(inputs, attention=False) if inputs else [])
        for record in records:
            if "error" not in record:
                p = next(predictions)
                record.update(label=p.label, confidence=round(p.confidence, 6),
                              top=[[label, round(prob, 6)] for label, prob in p.top(top)], unfamiliar=p.unfamiliar)
            print(json.dumps(record), flush=False)
        sys.stdout.flush()
    return failures


def model_and_split(args: argparse.Namespace, count: int | None = None
                    ) -> tuple[Classifier, torch.Tensor, torch.Tensor]:
    """The model ``args.model`` and ``count`` images (None: all) of its dataset's split with their labels, spread
    evenly over it (CIFAR-10's folders keep a split in class order: its first 1,000 test photos are all airplanes)."""
    classifier = load_model(args.model, args.device)
    images, labels = load_split(classifier.info.trained_dataset(), args.data_dir, args.split)
    chosen = slice(None) if count is None else spread(count, len(images))
    return classifier, images[chosen], labels[chosen]


def run_evaluate(args: argparse.Namespace) -> dict:
    classifier, images, labels = model_and_split(args, args.limit)
    dataset = classifier.info.trained_dataset().name
    started = time.perf_counter()
    _, correct, n = evaluate(classifier.model, images, labels, args.batch_size)
    return {"model": args.model, "dataset": dataset, "split": args.split, "n": n, "correct": correct,
            "accuracy": correct / n, "seconds": round(time.perf_counter() - started, 2),
            "device": str(classifier.device)}


def run_faithfulness(args: argparse.Namespace) -> list[dict]:
    """One record per kind of map: mean deletion and insertion AUC over ``args.n`` images spread evenly over the
    split; with ``args.keep``, kept in the weights folder too (the page shows the most faithful map first)."""
    classifier, images, _ = model_and_split(args, args.n)
    aucs = mean_aucs(classifier.model, images, classifier.info.trained_dataset().name, classifier.temperature,
                     args.batch_size)
    if args.keep:
        write_record(classifier.info.folder, aucs, args.split, len(images))
    return [{"method": kind, "model": args.model, "n": len(images), **auc} for kind, auc in aucs.items()]


def run_calibrate(args: argparse.Namespace) -> dict:
    """Fit and record the model's calibration; return the report, less its reliability bins."""
    folder = resolve_weights_folder(args.model)
    with Steps(f"calibrate {args.model}") as progress:
        report = calibrate(folder, args.data_dir, resolve_device(args.device), progress=progress)
    summary = {key: value for key, value in report.items() if key not in ("before", "after")}
    for when in ("before", "after"):
        summary[when] = {key: report[when][key] for key in ("ece", "nll", "accuracy_overall")}
    return {"model": args.model, "file": str(shown_path(folder / CALIBRATION_FILE)), **summary}


def run_inside(args: argparse.Namespace) -> dict:
    """Write ``attention_distance.json`` into the model's weights folder; return what was written."""
    classifier, images, _ = model_and_split(args)
    distance = write_attention_distance(classifier.info.folder, classifier.model, images, args.split, args.n)
    return {"model": args.model, "file": str(shown_path(classifier.info.folder / ATTENTION_DISTANCE_FILE)),
            "images": min(args.n, len(images)), "mean_attention_distance_px": np.round(distance.astype(float), 2).tolist()}


def heads_split(args: argparse.Namespace, split: str) -> tuple[Classifier, torch.Tensor, torch.Tensor]:
    """The model and its dataset's ``split`` (never downloaded: these commands study a model on data it knows)."""
    if not Path(args.data_dir).is_dir():
        raise DatasetNotFound(f"--data-dir {args.data_dir}: no such folder")
    classifier = load_model(args.model, args.device)
    images, labels = load_split(classifier.info.trained_dataset(), args.data_dir, split, download=False)
    return classifier, images, labels


def ablation_means(args: argparse.Namespace, classifier: Classifier) -> torch.Tensor:
    """The weights folder's head means; where it has none, computed for this run from training images (saying so)."""
    means = heads.read_head_means(classifier.info.folder, classifier.model)
    if means is None:
        print(f"note: {shown_path(classifier.info.folder)} has no {HEAD_MEANS_FILE} for these weights; the "
              f"means are computed for this run (keep them: python -m vit_demo head-means --model {args.model} "
              f"--data-dir {args.data_dir})", file=sys.stderr)
        train, _ = load_split(classifier.info.trained_dataset(), args.data_dir, "train", download=False)
        means = heads.head_means(classifier.model, heads.mean_sample(train)).half().float()  # as the file keeps them
    return means


def every_kth(args: argparse.Namespace) -> tuple[Classifier, torch.Tensor, torch.Tensor]:
    """The heads' commands' images: every ``args.every``-th of the split, ``args.n`` of them, and their labels."""
    classifier, images, labels = heads_split(args, args.split)
    return classifier, images[:: args.every][: args.n], labels[:: args.every][: args.n]


def run_heads(args: argparse.Namespace) -> list[dict]:
    """The baseline, each head's accuracy when it alone is ablated and its importance, and the pruning curves."""
    classifier, images, labels = every_kth(args)
    model = classifier.model
    means = ablation_means(args, classifier) if args.ablation == "mean" else None
    report = heads.heads_report(model, images, labels, means, args.batch_size)
    records = [{"baseline": report["baseline"], "n": len(images)}]
    for (layer, head), value in np.ndenumerate(report["accuracy"].numpy()):
        records.append({"layer": layer + 1, "head": head + 1, "accuracy": float(value),
                        "importance": float(f"{report['importance'][layer, head]:.6g}")})
    records += [{"order": order, "curve": [round(value, 6) for value in curve]}
                for order, curve in report["curves"].items()]
    return records


def run_lens(args: argparse.Namespace) -> list[dict]:
    """The accuracy of [CLS] read through the final norm and head after each layer."""
    classifier, images, labels = every_kth(args)
    accuracies = heads.lens_accuracy(classifier.model, images, labels, args.batch_size)
    return [{"layer": layer, "accuracy": value} for layer, value in enumerate(accuracies, 1)]


def run_head_means(args: argparse.Namespace) -> dict:
    """Write the weights folder's head means; return what was written."""
    classifier, images, _ = heads_split(args, "train")
    picked = heads.mean_sample(images)
    heads.write_head_means(classifier.info.folder, classifier.model, picked)
    path = classifier.info.folder / HEAD_MEANS_FILE
    return {"model": args.model, "file": str(shown_path(path)), "split": "train", "images": len(picked),
            "bytes": path.stat().st_size}


def run_head_importance(args: argparse.Namespace) -> dict:
    """Write the weights folder's head importance and pruning curves; return a summary of what was written."""
    classifier, images, labels = heads_split(args, args.split)
    picked = spread(args.n, len(images))
    record = heads.write_head_importance(classifier.info.folder, classifier.model, images[picked], labels[picked],
                                         ablation_means(args, classifier), args.split, args.batch_size)
    return {"model": args.model, "file": str(shown_path(classifier.info.folder / HEAD_IMPORTANCE_FILE)),
            "split": args.split, "images": record["images"], "baseline": record["baseline"],
            "ablation": record["ablation"]}


def run_onnx(args: argparse.Namespace) -> list[dict]:
    """Write each model's ONNX graphs; one record per file written."""
    from vit_demo.onnx.export import write_onnx  # imports onnx and the exporter: only for this command

    records = []
    for name in args.model or ["mnist", "cifar10"]:
        with Steps(f"onnx {name}") as progress:  # (on stderr: stdout keeps the JSON lines)
            records += [{"model": name, **record} for record in write_onnx(name, progress)]
    return records


def run_import(args: argparse.Namespace) -> dict:
    """Import a pretrained ViT into a weights folder (vit_demo/importing.py) and write the page's graphs there
    (vit_demo/onnx/export.py) unless told not to; return what was written: ``graphs``, each graph file's bytes, or
    none and why (``graphs_left_out``)."""
    options = [] if args.checkpoint is None else ["--checkpoint", args.checkpoint]
    options += [] if args.image_size is None else ["--image-size", str(args.image_size)]
    rounded = args.graph_weights != GRAPH_WEIGHT_TYPES[0]
    options += ["--graph-weights", args.graph_weights] if rounded else []
    options += [] if args.graphs else ["--no-graphs"]
    command = shlex.join(["python", "-m", "vit_demo", "import", args.source, *options, "--out", args.out])
    with Steps("import") as progress:  # (on stderr: stdout keeps the JSON line)
        written = write_import(args.source, args.out, args.checkpoint, args.image_size, command, args.force,
                               progress)
        if rounded:
            update_config(args.out, graph_weights=args.graph_weights)
        if not args.graphs:
            return {**written, "graphs": {}, "graphs_left_out": f"--no-graphs: python -m vit_demo onnx --model "
                                                                f"{shlex.quote(args.out)} writes them"}
        from vit_demo.onnx.export import write_onnx  # imports onnx and the exporter: only here

        records = [record for record in write_onnx(args.out, progress) if "bytes" in record]  # (none removed)
    return {**written, "graphs": {Path(record["file"]).name: record["bytes"] for record in records}}


def run_hub(args: argparse.Namespace) -> dict:
    """Write a weights folder as a timm checkpoint and Hub model folder (vit_demo/hub.py); return what was
    written."""
    from vit_demo.hub import write_hub

    options = ([] if args.repo == "USER/NAME" else ["--repo", args.repo]) + ([] if args.project is None else
                                                                             ["--project", args.project])
    command = shlex.join(["python", "-m", "vit_demo", "hub", args.folder, args.out, *options])
    return write_hub(args.folder, args.out, args.force, args.repo, args.project, command)


def run_export(args: argparse.Namespace) -> dict:
    """Write one view of ``args.file`` for a slide; return what was written."""
    if args.out is not None and not Path(args.out).resolve().parent.is_dir():
        raise ValueError(f"--out {args.out}: its folder {Path(args.out).resolve().parent} does not exist")
    classifier = load_model(args.model, args.device)
    name, data, prediction = slides.export_slide(classifier, classifier.preprocess(args.file), args.view, args.layer,
                                                 args.head, args.label, args.patch, args.width)
    out = Path(args.out or name)
    atomic_write(out, lambda f: f.write(data))
    return {"file": args.file, "label": prediction.label, "view": args.view, "out": str(out), "bytes": len(data)}
