"""``python -m vit_demo predict|evaluate|calibrate|faithfulness|inside|export|heads|lens|head-means|head-importance|
onnx|space|static|import|hub``: the command line over the same functions as the app."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from vit_demo.arguments import int_in, positive_int
from vit_demo.classifier import load_model
from vit_demo.cli.commands import (predict_files, run_calibrate, run_evaluate, run_export, run_faithfulness,
                                   run_head_importance, run_head_means, run_heads, run_hub, run_import, run_inside,
                                   run_lens, run_onnx)
from vit_demo.data.datasets import SPLITS, DatasetNotFound
from vit_demo.data.preprocess import InputError
from vit_demo.deploy.space import write_space
from vit_demo.interpret import heads
from vit_demo.interpret.faithfulness import MAP_KINDS
from vit_demo.interpret.inside import DISTANCE_IMAGES
from vit_demo.pictures import slides
from vit_demo.weights import (FAITHFULNESS_FILE, GRAPH_WEIGHT_TYPES, HEAD_IMPORTANCE_FILE, HEAD_MEANS_FILE,
                              WeightsError)


def one(run: Callable[[argparse.Namespace], dict]) -> Callable[[argparse.Namespace], list[dict]]:
    """A command that prints one JSON line, as one that prints several."""
    return lambda args: [run(args)]


def write_static_folder(args: argparse.Namespace) -> dict:
    from vit_demo.deploy.static_space import write_static  # imports onnx and the app's views: only here
    from vit_demo.progress import Steps

    with Steps("static") as progress:  # (on stderr: stdout keeps the JSON line)
        return write_static(args.folder, args.force, args.model, progress)


def parents() -> dict[str, argparse.ArgumentParser]:
    """The options several commands share, each declared once: the model and its device, the dataset, its split, and
    the first N images of it (required: the heads' commands)."""
    found = {name: argparse.ArgumentParser(add_help=False) for name in ("model", "data", "split", "n")}
    found["model"].add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    found["model"].add_argument("--device", default="auto")
    found["data"].add_argument("--data-dir", required=True,
                               help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/), or the folder of pictures "
                                    "a folder:PATH model was trained on")
    found["split"].add_argument("--split", default="test", choices=SPLITS)
    found["n"].add_argument("--n", type=positive_int, required=True, help="the first N images of the split")
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vit_demo", description=(
        "The command line over the same functions as the app. Each command prints JSON lines; what it cannot use "
        "is said in one line (predict: in that file's JSON line), never a traceback. The long ones (import, onnx, "
        "static, calibrate) say each step on stderr as it begins: a bar on a terminal, a line each elsewhere. "
        "`python -m vit_demo COMMAND --help` says more."))
    commands = parser.add_subparsers(dest="command", required=True)
    shared = parents()
    model, data, split = shared["model"], shared["data"], shared["split"]

    predict = commands.add_parser("predict", parents=[model],
                                  help="classify image files; one JSON object per line per file")
    predict.add_argument("--top", type=positive_int, default=3, help="how many classes to list in 'top'")
    predict.add_argument("--batch-size", type=positive_int, default=256, help="files per forward pass")
    predict.add_argument("files", nargs="+", metavar="FILE")

    ev = commands.add_parser("evaluate", parents=[model, data, split],
                             help="accuracy on a dataset split; one JSON line")
    ev.add_argument("--limit", type=positive_int, metavar="N",
                    help="only N images, spread evenly over the split (CIFAR-10's folders keep it in class order)")
    ev.add_argument("--batch-size", type=positive_int, default=500)
    ev.set_defaults(run=one(run_evaluate))

    commands.add_parser(
        "calibrate", parents=[model, data],
        help="fit a weights folder's temperature (and its unfamiliar-image rule) and keep it there",
        description="Fit the temperature that calibrates the model's probabilities (Guo et al., 2017) on images it "
                    "did not train on: the training images its run held out, or for weights trained on the whole "
                    "training split a random half of the test split. Measure the expected calibration error and "
                    "negative log-likelihood before and after on images it was not fitted on, and write them to "
                    "calibration.json; the temperature goes into config.json. One JSON line.",
    ).set_defaults(run=one(run_calibrate))

    faith = commands.add_parser(
        "faithfulness", parents=[model, data, split],
        help=f"deletion and insertion AUC of each kind of map ({', '.join(MAP_KINDS)}); a JSON line each",
        description="Rank patches by each kind of map, remove them (deletion) or add them to a blank image "
                    "(insertion) 10%% at a time, and average the area under the predicted class's probability "
                    "over N images spread evenly over a split: lower deletion and higher insertion AUC = more faithful.")
    faith.add_argument("--n", type=positive_int, default=1000,
                       help="N images spread evenly over the split, every class its share (default: 1000)")
    faith.add_argument("--batch-size", type=positive_int, default=100)
    faith.add_argument("--keep", action="store_true",
                       help=f"keep the result in the weights folder ({FAITHFULNESS_FILE}): the page shows the most "
                            "faithful kind of map first")
    faith.set_defaults(run=run_faithfulness)

    inside = commands.add_parser(
        "inside", parents=[model, data, split],
        help="compute a weights folder's mean attention distance per layer and head, and keep it there")
    inside.add_argument("--n", type=positive_int, default=DISTANCE_IMAGES,
                        help=f"N images spread evenly over the split (default {DISTANCE_IMAGES})")
    inside.set_defaults(run=one(run_inside))

    export = commands.add_parser(
        "export", parents=[model],
        help="one image's view for slides: a PNG at least 1600 px wide, or a GIF through the layers",
        description="Draw one view of an image for a slide, as the app's export does, and print one JSON line.")
    export.add_argument("file", metavar="FILE")
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
    export.add_argument("--width", type=int_in(1, slides.MAX_SLIDE_WIDTH), default=slides.SLIDE_WIDTH,
                        help=f"pixels, for PNGs (default: {slides.SLIDE_WIDTH}, at most {slides.MAX_SLIDE_WIDTH})")
    export.set_defaults(run=one(run_export))

    # The heads' commands, over the first N images of a split (every K-th).
    over_images = argparse.ArgumentParser(add_help=False, parents=[model, data, split, shared["n"]])
    over_images.add_argument("--every", type=positive_int, default=1,
                             help="read every K-th image (default 1: the first N in a row); CIFAR-10's folders are "
                                  "in class order, so --every 20 spreads 500 images over its 10 classes")
    over_images.add_argument("--batch-size", type=positive_int, default=500)
    knockout = commands.add_parser(
        "heads", parents=[over_images],
        help="what each head is worth: accuracy with it switched off, its importance, pruning curves",
        description="Switch each attention head off in turn (mean-ablation: its output replaced by its mean over "
                    "training images, from the weights folder's head_means.safetensors; or zero-ablation) and "
                    "measure the accuracy; score each head's importance as the mean |d loss / d gate| of a gate on "
                    "its output (Michel et al., 2019); and remove heads cumulatively, most important first and in "
                    f"{heads.RANDOM_ORDERS} seeded random orders. JSON lines: the baseline, one per head (1-based "
                    "layer and head), then the two curves (accuracy after removing 0, 1, ..., all heads).")
    knockout.add_argument("--ablation", default="mean", choices=("mean", "zero"),
                          help="replace a head's output by its mean at each token (default) or by zeros")
    knockout.set_defaults(run=run_heads)
    commands.add_parser(
        "lens", parents=[over_images],
        help="the logit lens: accuracy of [CLS] read after each layer, one JSON line per layer",
        description="Apply the final norm and head to [CLS] after each layer (the logit lens, nostalgebraist 2020) "
                    "and print the accuracy of what it reads, per layer (1-based); the last is the model's own.",
    ).set_defaults(run=run_lens)

    commands.add_parser(
        "head-means", parents=[model, data],
        help="compute each head's mean output over training images, for mean-ablation, and keep it in the weights "
             "folder",
        description=f"Average each head's output at each token over {heads.MEAN_IMAGES:,} training images spread "
                    f"evenly over the split, and write {HEAD_MEANS_FILE} (fp16) beside the weights. "
                    "train.py writes it at the end of a run; this writes it for existing weights. One JSON line.",
    ).set_defaults(run=one(run_head_means))

    importance = commands.add_parser(
        "head-importance", parents=[model, data, split],
        help="measure each head's importance and the pruning curves over test images, and keep them in the weights "
             "folder for the app's Inside tab",
        description=f"Measure what `heads` prints (the accuracy with each head ablated, its importance, the pruning "
                    f"curves) over N images spread evenly over the split, with mean-ablation (the weights folder's "
                    f"{HEAD_MEANS_FILE}, or means computed from training images where it has none), and write "
                    f"{HEAD_IMPORTANCE_FILE} beside the weights: the app has no dataset, so it reads this file. "
                    "Run it once after training (it takes minutes, so train.py leaves it out). One JSON line.")
    importance.add_argument("--n", type=positive_int, default=heads.IMPORTANCE_IMAGES,
                            help=f"images, spread evenly over the split (default {heads.IMPORTANCE_IMAGES})")
    importance.add_argument("--batch-size", type=positive_int, default=500)
    importance.set_defaults(run=one(run_head_importance))

    graphs = commands.add_parser(
        "onnx", help="export a weights folder's model and training snapshots to ONNX, for the page that runs them",
        description="Export a weights folder's graphs for the page (vit_demo/onnx/export.py says which, and what each "
                    "takes and gives), with the checksum of the weights each was made from. One JSON line a file.")
    graphs.add_argument("--model", action="append", help="mnist, cifar10, or a path to a weights folder; may be "
                                                         "given more than once (default: both shipped models)")
    graphs.set_defaults(run=run_onnx)

    # What writing a Space's folder takes, for each kind of Space.
    bundle = argparse.ArgumentParser(add_help=False)
    bundle.add_argument("folder", metavar="DIR")
    bundle.add_argument("--force", action="store_true",
                        help="write into a non-empty folder this command did not write, replacing everything in it "
                             "but a .git folder")
    bundle.add_argument("--model", action="append", default=[], metavar="MODEL_DIR",
                        help="a weights folder to explain beside the shipped models, in a tab of its own (`python -m "
                             "vit_demo import` writes one, with its graphs); may be given more than once")
    commands.add_parser(
        "space", parents=[bundle], help="write the folder a Hugging Face Space needs; deploy it with: hf upload "
                                        "USER/NAME DIR --repo-type space",
        description="Write into DIR what a Hugging Face Space needs and nothing else: app.py, the package, the "
                    "shipped weights and examples, requirements.txt (torch pinned to a release ZeroGPU supports), "
                    "README.md (the Space's front matter and a short card) and a .gitattributes that puts every "
                    "binary file through LFS/Xet (docs/spaces.md). DIR may be new, empty, or a folder this command "
                    "wrote before, which is rewritten whole (a .git folder in it is kept). One JSON line.",
    ).set_defaults(run=one(lambda args: write_space(args.folder, args.force, args.model)))
    static = commands.add_parser(
        "static", parents=[bundle], help="write a static Hugging Face Space: the page runs the models itself; deploy "
                                         "it with: hf upload USER/NAME DIR --repo-type space",
        description="Write into DIR the app's page as a static site (sdk: static), the models run in the browser by "
                    "onnxruntime-web: index.html, its JS and CSS, the ONNX graphs (`python -m vit_demo onnx` makes "
                    "them), README.md with the front matter and a .gitattributes that puts every binary file through "
                    "LFS/Xet (docs/spaces.md). Try it with: python -m http.server --directory DIR. DIR may be new, "
                    "empty, or a folder this command wrote before, which is rewritten whole (a .git folder in it is "
                    "kept). One JSON line.",
    )
    static.set_defaults(run=one(write_static_folder))

    imports = commands.add_parser(
        "import", help="a pretrained ViT from timm or Hugging Face as a weights folder (docs/import.md)",
        description="Write into DIR a weights folder that --model takes as it takes ours: a plain ViT from timm "
                    "(timm:NAME, its weights downloaded as timm does, or --checkpoint FILE) or Hugging Face (hf:REPO_ID, "
                    "downloaded, or hf:FOLDER, what save_pretrained wrote), with its own classes and preprocessing, "
                    "and the page's ONNX graphs (as python -m vit_demo onnx --model DIR writes them; a model without "
                    "a head has none). Swin, hybrids and other models that are not plain ViTs are refused. One JSON "
                    "line.")
    imports.add_argument("source", metavar="SOURCE", help="timm:NAME, hf:REPO_ID or hf:FOLDER")
    imports.add_argument("--out", required=True, metavar="DIR", help="the weights folder to write (new or empty)")
    imports.add_argument("--checkpoint", metavar="FILE",
                         help="timm only: its weights from a local state dict (.safetensors, .pth, .bin), offline")
    imports.add_argument("--image-size", type=positive_int, metavar="PIXELS",
                         help="run the model at this image size (a multiple of its patch size): its position "
                              "embeddings resampled, bicubic, as timm does")
    imports.add_argument("--force", action="store_true", help="write into a folder that already holds files")
    imports.add_argument("--graph-weights", choices=GRAPH_WEIGHT_TYPES, default=GRAPH_WEIGHT_TYPES[0],
                         help="how the page's graphs keep the weights: as they are (default), rounded to float16 (half "
                              "the bytes to download) or the weight matrices to int8 (a quarter); computed in float32 "
                              "either way (docs/import.md measures the answers' change)")
    imports.add_argument("--no-graphs", dest="graphs", action="store_false",
                         help="leave the page's ONNX graphs out (for ViT-Ti at 224 pixels they take some four minutes "
                              "to export: docs/import.md); python -m vit_demo onnx --model DIR writes them later")
    imports.set_defaults(run=one(run_import))

    hub = commands.add_parser(
        "hub", help="a weights folder as a timm checkpoint and Hugging Face Hub model folder, with a model card "
                    "(docs/import.md)",
        description="Write into OUT the weights folder DIR (mnist, cifar10, or a path) as timm's hf-hub: and "
                    "local-dir: loaders read it: config.json (timm's architecture, model_args, pretrained_cfg with "
                    "our mean and std, label_names), model.safetensors (timm's names) and README.md (a model card "
                    "with the measured results). Upload it with: hf upload USER/NAME OUT. One JSON line.")
    hub.add_argument("folder", metavar="DIR", help="mnist, cifar10, or a path to a weights folder")
    hub.add_argument("out", metavar="OUT", help="the folder to write (new or empty)")
    hub.add_argument("--repo", default="USER/NAME", help="the Hub repository it will be uploaded to, for the card's "
                                                         "code (default: USER/NAME)")
    hub.add_argument("--project", metavar="URL", help="where this project lives, linked from the card")
    hub.add_argument("--force", action="store_true", help="write into a folder that already holds files")
    hub.set_defaults(run=one(run_hub))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "predict":  # a line per file as it is read, and an exit status that says if any failed
            classifier = load_model(args.model, args.device)
            return 1 if predict_files(classifier, args.files, args.top, args.batch_size) else 0
        for record in args.run(args):
            print(json.dumps(record))
        return 0
    except (WeightsError, DatasetNotFound, InputError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
