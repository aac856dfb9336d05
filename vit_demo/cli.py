"""``python -m vit_demo predict|evaluate|calibrate|faithfulness|inside|export|heads|lens|head-means|head-importance|
onnx|space|static``: the command line over the same functions as the app."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from vit_demo.atomic import atomic_write
from vit_demo.classifier import Classifier, load_model
from vit_demo.data.datasets import SPLITS, DatasetNotFound, load_split, spread
from vit_demo.data.preprocess import InputError
from vit_demo.deploy.space import write_space
from vit_demo.device import resolve_device
from vit_demo.interpret import explain, heads
from vit_demo.interpret.faithfulness import MAP_KINDS, faithfulness
from vit_demo.interpret.inside import ATTENTION_DISTANCE_FILE, DISTANCE_IMAGES, write_attention_distance
from vit_demo.pictures import slides
from vit_demo.training.calibrate import calibrate
from vit_demo.training.evaluation import evaluate
from vit_demo.weights import CALIBRATION_FILE, WeightsError, resolve_weights_folder, shown_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vit_demo", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    predict = commands.add_parser("predict", help="classify image files; one JSON object per line per file")
    predict.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    predict.add_argument("--device", default="auto")
    predict.add_argument("--top", type=int, default=3, help="how many classes to list in 'top'")
    predict.add_argument("--batch-size", type=int, default=256, help="files per forward pass")
    predict.add_argument("files", nargs="+", metavar="FILE")

    ev = commands.add_parser("evaluate", help="accuracy on a dataset split; one JSON line")
    ev.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    ev.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    ev.add_argument("--split", default="test", choices=SPLITS)
    ev.add_argument("--limit", type=int, help="only the first N images")
    ev.add_argument("--device", default="auto")
    ev.add_argument("--batch-size", type=int, default=500)

    calibrate = commands.add_parser(
        "calibrate", help="fit a weights folder's temperature (and its unfamiliar-image rule) and keep it there",
        description="Fit the temperature that calibrates the model's probabilities (Guo et al., 2017) on images it "
                    "did not train on: the training images its run held out, or for weights trained on the whole "
                    "training split a random half of the test split. Measure the expected calibration error and "
                    "negative log-likelihood before and after on images it was not fitted on, and write them to "
                    "calibration.json; the temperature goes into config.json. One JSON line.")
    calibrate.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    calibrate.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    calibrate.add_argument("--device", default="auto")

    faith = commands.add_parser(
        "faithfulness", help="deletion and insertion AUC of each kind of map; one JSON line per kind",
        description="Rank patches by each kind of map, remove them (deletion) or add them to a blank image "
                    "(insertion) 10%% at a time, and average the area under the predicted class's probability "
                    "over the first N images of a split: lower deletion and higher insertion AUC = more faithful.")
    faith.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    faith.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    faith.add_argument("--split", default="test", choices=SPLITS)
    faith.add_argument("--n", type=int, default=1000, help="the first N images of the split (default: 1000)")
    faith.add_argument("--device", default="auto")
    faith.add_argument("--batch-size", type=int, default=100)

    inside = commands.add_parser(
        "inside", help="compute a weights folder's mean attention distance per layer and head, and keep it there")
    inside.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    inside.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    inside.add_argument("--split", default="test", choices=SPLITS)
    inside.add_argument("--n", type=int, default=DISTANCE_IMAGES, help="the first N images of the split")
    inside.add_argument("--device", default="auto")

    export = commands.add_parser(
        "export", help="one image's view for slides: a PNG at least 1600 px wide, or a GIF through the layers",
        description="Draw one view of an image for a slide, as the app's export does, and print one JSON line.")
    export.add_argument("file", metavar="FILE")
    export.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    export.add_argument("--view", default=slides.CLS_GRID, choices=(*slides.PNG_VIEWS, slides.LAYERS_GIF),
                        help="grid: [CLS] in every layer and head; layer: one layer and head; rollout; relevance: of "
                             "--label; patches: the patch grid; query: where --patch looks in every layer and head; "
                             "gif: [CLS] through the layers (default: grid)")
    export.add_argument("--layer", type=int, help="for --view layer: 1 to the model's depth (default: the last)")
    export.add_argument("--head", default="mean", help="for layer and gif: 1 to the number of heads, or mean")
    export.add_argument("--label", help="for relevance: the class to explain (default: the predicted one)")
    export.add_argument("--patch", type=int, help="for query: a patch, 0-based in reading order (default: the one "
                                                  "[CLS] draws on most, as in the app)")
    export.add_argument("--out", help="the file to write (default: named for what it shows, in this folder)")
    export.add_argument("--width", type=int, default=slides.SLIDE_WIDTH, help="pixels, for PNGs (default: 1600)")
    export.add_argument("--device", default="auto")

    knockout = commands.add_parser(
        "heads", help="what each head is worth: accuracy with it switched off, its importance, pruning curves",
        description="Switch each attention head off in turn (mean-ablation: its output replaced by its mean over "
                    "training images, from the weights folder's head_means.safetensors; or zero-ablation) and "
                    "measure the accuracy; score each head's importance as the mean |d loss / d gate| of a gate on "
                    "its output (Michel et al., 2019); and remove heads cumulatively, most important first and in "
                    f"{heads.RANDOM_ORDERS} seeded random orders. JSON lines: the baseline, one per head (1-based "
                    "layer and head), then the two curves (accuracy after removing 0, 1, ..., all heads).")
    lens = commands.add_parser(
        "lens", help="the logit lens: accuracy of [CLS] read after each layer, one JSON line per layer",
        description="Apply the final norm and head to [CLS] after each layer (the logit lens, nostalgebraist 2020) "
                    "and print the accuracy of what it reads, per layer (1-based); the last is the model's own.")
    for command in (knockout, lens):
        command.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
        command.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
        command.add_argument("--n", type=positive_int, required=True, help="the first N images of the split")
        command.add_argument("--split", default="test", choices=SPLITS)
        command.add_argument("--every", type=positive_int, default=1,
                             help="read every K-th image (default 1: the first N in a row); CIFAR-10's folders are "
                                  "in class order, so --every 20 spreads 500 images over its 10 classes")
        command.add_argument("--device", default="auto")
        command.add_argument("--batch-size", type=positive_int, default=500)
    knockout.add_argument("--ablation", default="mean", choices=("mean", "zero"),
                          help="replace a head's output by its mean at each token (default) or by zeros")

    means = commands.add_parser(
        "head-means", help="compute each head's mean output over training images, for mean-ablation, and keep it "
                           "in the weights folder",
        description=f"Average each head's output at each token over {heads.MEAN_IMAGES:,} training images spread "
                    f"evenly over the split, and write {heads.HEAD_MEANS_FILE} (fp16) beside the weights. "
                    "train.py writes it at the end of a run; this writes it for existing weights. One JSON line.")
    means.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    means.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    means.add_argument("--device", default="auto")

    importance = commands.add_parser(
        "head-importance", help="measure each head's importance and the pruning curves over test images, and keep "
                                "them in the weights folder for the app's Inside tab",
        description=f"Measure what `heads` prints (the accuracy with each head ablated, its importance, the pruning "
                    f"curves) over N images spread evenly over the split, with mean-ablation (the weights folder's "
                    f"{heads.HEAD_MEANS_FILE}, or means computed from training images where it has none), and write "
                    f"{heads.HEAD_IMPORTANCE_FILE} beside the weights: the app has no dataset, so it reads this file. "
                    "Run it once after training (it takes minutes, so train.py leaves it out). One JSON line.")
    importance.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    importance.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    importance.add_argument("--n", type=positive_int, default=heads.IMPORTANCE_IMAGES,
                            help=f"images, spread evenly over the split (default {heads.IMPORTANCE_IMAGES})")
    importance.add_argument("--split", default="test", choices=SPLITS)
    importance.add_argument("--device", default="auto")
    importance.add_argument("--batch-size", type=positive_int, default=500)

    graphs = commands.add_parser(
        "onnx", help="export a weights folder's model and training snapshots to ONNX, for the page that runs them",
        description="Export the model (model.onnx beside its weights, with its head means and temperature), its "
                    "relevance and patching graphs (relevance.onnx, patching_heads.onnx, patching_residual.onnx) and "
                    "each training snapshot in snapshots.json (snapshots/epoch-XXXX.onnx) to ONNX through torch.onnx's "
                    "exporter, with the checksum of the weights each was made from (vit_demo/onnx/export.py says "
                    "what the graphs take and give). One JSON line per file written.")
    graphs.add_argument("--model", action="append",
                        help="mnist, cifar10, or a path to a weights folder; may be given more than once (default: "
                             "both shipped models)")

    # What writing a Space's folder takes, for each kind of Space.
    bundle = argparse.ArgumentParser(add_help=False)
    bundle.add_argument("folder", metavar="DIR")
    bundle.add_argument("--force", action="store_true",
                        help="write into a non-empty folder this command did not write, replacing everything in it "
                             "but a .git folder")
    commands.add_parser(
        "space", parents=[bundle], help="write the folder a Hugging Face Space needs; deploy it with: hf upload "
                                        "USER/NAME DIR --repo-type space",
        description="Write into DIR what a Hugging Face Space needs and nothing else: app.py, the package, the "
                    "shipped weights and examples, requirements.txt (torch pinned to a release ZeroGPU supports), "
                    "README.md (the Space's front matter and a short card) and a .gitattributes that puts every "
                    "binary file through LFS/Xet (docs/spaces.md). DIR may be new, empty, or a folder this command "
                    "wrote before, which is rewritten whole (a .git folder in it is kept). One JSON line.")
    commands.add_parser(
        "static", parents=[bundle], help="write a static Hugging Face Space: the page runs the models itself; deploy "
                                         "it with: hf upload USER/NAME DIR --repo-type space",
        description="Write into DIR the app's page as a static site (sdk: static), the models run in the browser by "
                    "onnxruntime-web: index.html, its JS and CSS, the ONNX graphs (`python -m vit_demo onnx` makes "
                    "them), README.md with the front matter and a .gitattributes that puts every binary file through "
                    "LFS/Xet (docs/spaces.md). Try it with: python -m http.server --directory DIR. DIR may be new, "
                    "empty, or a folder this command wrote before, which is rewritten whole (a .git folder in it is "
                    "kept). One JSON line.")
    return parser


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


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


def model_and_split(args: argparse.Namespace, limit: int | None) -> tuple[Classifier, torch.Tensor, torch.Tensor]:
    """The model ``args.model`` and the first ``limit`` (None: all) images and labels of its dataset's split."""
    classifier = load_model(args.model, args.device)
    images, labels = load_split(classifier.info.dataset.name, args.data_dir, args.split)
    return classifier, images[:limit], labels[:limit]


def run_evaluate(args: argparse.Namespace) -> dict:
    classifier, images, labels = model_and_split(args, args.limit)
    dataset = classifier.info.dataset.name
    started = time.perf_counter()
    _, correct, n = evaluate(classifier.model, images, labels, args.batch_size)
    return {"model": args.model, "dataset": dataset, "split": args.split, "n": n, "correct": correct,
            "accuracy": correct / n, "seconds": round(time.perf_counter() - started, 2),
            "device": str(classifier.device)}


def run_faithfulness(args: argparse.Namespace) -> list[dict]:
    """One record per kind of map: mean deletion and insertion AUC over the first ``args.n`` images."""
    if args.n < 1:
        raise ValueError("--n must be at least 1")
    classifier, images, _ = model_and_split(args, args.n)
    dataset = classifier.info.dataset.name
    sums = {kind: [0.0, 0.0] for kind in MAP_KINDS}
    for index, start in enumerate(range(0, len(images), args.batch_size)):
        x = images[start : start + args.batch_size].to(classifier.device).float().div_(255)  # (B, C, H, W)
        for kind, result in faithfulness(classifier.model, x, dataset, seed=index,
                                         temperature=classifier.temperature).items():
            sums[kind][0] += float(result.deletion_auc.sum())
            sums[kind][1] += float(result.insertion_auc.sum())
    return [{"method": kind, "model": args.model, "n": len(images), "deletion_auc": round(deletion / len(images), 4),
             "insertion_auc": round(insertion / len(images), 4)} for kind, (deletion, insertion) in sums.items()]


def run_calibrate(args: argparse.Namespace) -> dict:
    """Fit and record the model's calibration; return the report, less its reliability bins."""
    folder = resolve_weights_folder(args.model)
    report = calibrate(folder, args.data_dir, resolve_device(args.device))
    summary = {key: value for key, value in report.items() if key not in ("before", "after")}
    for when in ("before", "after"):
        summary[when] = {key: report[when][key] for key in ("ece", "nll", "accuracy_overall")}
    return {"model": args.model, "file": str(shown_path(folder / CALIBRATION_FILE)), **summary}


def run_inside(args: argparse.Namespace) -> dict:
    """Write ``attention_distance.json`` into the model's weights folder; return what was written."""
    classifier, images, _ = model_and_split(args, args.n)
    distance = write_attention_distance(classifier.info.folder, classifier.model, images, args.split)
    return {"model": args.model, "file": str(shown_path(classifier.info.folder / ATTENTION_DISTANCE_FILE)),
            "images": len(images), "mean_attention_distance_px": np.round(distance.astype(float), 2).tolist()}


def heads_split(args: argparse.Namespace, split: str) -> tuple[Classifier, torch.Tensor, torch.Tensor]:
    """The model and its dataset's ``split`` (never downloaded: these commands study a model on data it knows)."""
    if not Path(args.data_dir).is_dir():
        raise DatasetNotFound(f"--data-dir {args.data_dir}: no such folder")
    classifier = load_model(args.model, args.device)
    images, labels = load_split(classifier.info.dataset.name, args.data_dir, split, download=False)
    return classifier, images, labels


def ablation_means(args: argparse.Namespace, classifier: Classifier) -> torch.Tensor:
    """The weights folder's head means; where it has none, computed for this run from training images (saying so)."""
    means = heads.read_head_means(classifier.info.folder, classifier.model)
    if means is None:
        print(f"note: {shown_path(classifier.info.folder)} has no {heads.HEAD_MEANS_FILE} for these weights; the "
              f"means are computed for this run (keep them: python -m vit_demo head-means --model {args.model} "
              f"--data-dir {args.data_dir})", file=sys.stderr)
        train, _ = load_split(classifier.info.dataset.name, args.data_dir, "train", download=False)
        means = heads.head_means(classifier.model, heads.mean_sample(train)).half().float()  # as the file keeps them
    return means


def run_heads(args: argparse.Namespace) -> list[dict]:
    """The baseline, each head's accuracy when it alone is ablated and its importance, and the pruning curves."""
    classifier, images, labels = heads_split(args, args.split)
    images, labels = images[:: args.every][: args.n], labels[:: args.every][: args.n]
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
    classifier, images, labels = heads_split(args, args.split)
    images, labels = images[:: args.every][: args.n], labels[:: args.every][: args.n]
    accuracies = heads.lens_accuracy(classifier.model, images, labels, args.batch_size)
    return [{"layer": layer, "accuracy": value} for layer, value in enumerate(accuracies, 1)]


def run_head_means(args: argparse.Namespace) -> dict:
    """Write the weights folder's head means; return what was written."""
    classifier, images, _ = heads_split(args, "train")
    picked = heads.mean_sample(images)
    heads.write_head_means(classifier.info.folder, classifier.model, picked)
    path = classifier.info.folder / heads.HEAD_MEANS_FILE
    return {"model": args.model, "file": str(shown_path(path)), "split": "train", "images": len(picked),
            "bytes": path.stat().st_size}


def run_head_importance(args: argparse.Namespace) -> dict:
    """Write the weights folder's head importance and pruning curves; return a summary of what was written."""
    classifier, images, labels = heads_split(args, args.split)
    picked = spread(args.n, len(images))
    record = heads.write_head_importance(classifier.info.folder, classifier.model, images[picked], labels[picked],
                                         ablation_means(args, classifier), args.split, args.batch_size)
    return {"model": args.model, "file": str(shown_path(classifier.info.folder / heads.HEAD_IMPORTANCE_FILE)),
            "split": args.split, "images": record["images"], "baseline": record["baseline"],
            "ablation": record["ablation"]}


def run_onnx(args: argparse.Namespace) -> list[dict]:
    """Write each model's ONNX graphs; one record per file written."""
    from vit_demo.onnx.export import write_onnx  # imports onnx and the exporter: only for this command

    records = []
    for name in args.model or ["mnist", "cifar10"]:
        records += [{"model": name, **record} for record in write_onnx(name)]
    return records


def run_export(args: argparse.Namespace) -> dict:
    """Write one view of ``args.file`` for a slide; return what was written."""
    classifier = load_model(args.model, args.device)
    layers, heads = classifier.model.config.depth, classifier.model.config.heads
    layer = layers if args.layer is None else args.layer
    if not 1 <= layer <= layers:
        raise ValueError(f"--layer must be 1 to {layers}")
    head = None  # the mean over heads
    if args.head != "mean":
        if not args.head.isdigit() or not 1 <= int(args.head) <= heads:
            raise ValueError(f"--head must be 1 to {heads}, or mean")
        head = int(args.head) - 1
    image = classifier.preprocess(args.file)
    prediction = classifier.predict_preprocessed([image], relevance_for=[args.label])[0]
    patches = explain.grid_size(prediction.attention) ** 2
    if args.patch is None:
        patch = explain.first_query_patch(explain.attention_rollout(prediction.attention))
    else:
        patch = args.patch
    if not 0 <= patch < patches:
        raise ValueError(f"--patch must be 0 to {patches - 1}")
    name = slides.slide_name(classifier.info.dataset.name, prediction.label, args.view, layer - 1, head,
                             prediction.relevance_label, patch)
    if args.view == slides.LAYERS_GIF:
        data = slides.layers_gif(prediction.input, prediction.attention, head)
    else:
        data = slides.png_bytes(slides.view_slide(args.view, prediction.input, prediction.attention, layer - 1, head,
                                                  prediction.relevance, patch, args.width))
    out = Path(args.out or name)
    atomic_write(out, lambda f: f.write(data))
    return {"file": args.file, "label": prediction.label, "view": args.view, "out": str(out), "bytes": len(data)}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "predict":
            classifier = load_model(args.model, args.device)
            return 1 if predict_files(classifier, args.files, args.top, args.batch_size) else 0
        if args.command == "faithfulness":
            records = run_faithfulness(args)
        elif args.command == "calibrate":
            records = [run_calibrate(args)]
        elif args.command == "inside":
            records = [run_inside(args)]
        elif args.command == "export":
            records = [run_export(args)]
        elif args.command == "heads":
            records = run_heads(args)
        elif args.command == "lens":
            records = run_lens(args)
        elif args.command == "head-means":
            records = [run_head_means(args)]
        elif args.command == "head-importance":
            records = [run_head_importance(args)]
        elif args.command == "onnx":
            records = run_onnx(args)
        elif args.command == "space":
            records = [write_space(args.folder, args.force)]
        elif args.command == "static":
            from vit_demo.deploy.static_space import write_static  # imports onnx and the app's views: only here

            records = [write_static(args.folder, args.force)]
        else:
            records = [run_evaluate(args)]
        for record in records:
            print(json.dumps(record))
        return 0
    except (WeightsError, DatasetNotFound, InputError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
