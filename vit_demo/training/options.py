"""The ``train.py`` command line: its flags, and the recipe they make from a dataset's own."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path

from vit_demo.arguments import float_in, int_in
from vit_demo.data.datasets import DATASETS, FOLDER_PREFIX, DatasetSpec
from vit_demo.data.sketches import KIND_HALVES
from vit_demo.model import ViTConfig
from vit_demo.training.calibrate import HOLDOUT_IMAGES, HOLDOUT_SHARE
from vit_demo.training.recipes import (PRETRAIN_METHODS, PRETRAIN_RECIPES, RECIPES, PretrainRecipe, Recipe,
                                      recipe_for)
from vit_demo.training.step import GRAPH_CHUNK_BATCHES

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


# The command-line flags that override a recipe, each a field of Recipe, PretrainRecipe or ViTConfig: its flag is
# --field-name, its type the field's. SHARED_FLAGS also set a pretraining run's optimisation; the other recipe flags
# (augmentation, label smoothing) do not.
RECIPE_FLAGS = tuple(f.name for f in dataclasses.fields(Recipe) if f.name != "vit")
SHARED_FLAGS = ("epochs", "batch_size", "lr", "weight_decay", "warmup_epochs")
PRETRAIN_FLAGS = tuple(f.name for f in dataclasses.fields(PretrainRecipe) if f.name not in SHARED_FLAGS)  # mae's own
ARCHITECTURE_FLAGS = ("patch_size", "dim", "depth", "heads", "mlp_dim", "drop_path")
FLAG_TYPES = {**typing.get_type_hints(ViTConfig), **typing.get_type_hints(PretrainRecipe),
              **typing.get_type_hints(Recipe)}
# What a flag may be, where it is not a whole number from 1 (the int fields) or a number from 0 (the float ones).
FLAG_RANGES = {"label_smoothing": float_in(0, 1), "random_erasing": float_in(0, 1), "mix_prob": float_in(0, 1),
               "drop_path": float_in(0, 1), "mask_ratio": float_in(0, 0.99), "outlier_weight": float_in(0, 1)}
FLAG_HELP = {  # what a flag's name does not say
    "batch_size": "global batch size (split across torchrun processes)",
    "augment": "the dataset's own augmentation (digits: rotation, shift, scale, shear, stroke width; photos: crop "
               "and flip); --no-augment trains on the images as they are",
    "trivial_augment": "TrivialAugment, per image, on top of the crop/flip or affine augmentation",
    "auto_augment": "AutoAugment's CIFAR-10 policy, per image, in place of TrivialAugment",
    "random_erasing": "each image's chance of a random erased rectangle (0: off)",
    "mix_prob": "each batch's chance of MixUp or CutMix",
    "mixup_alpha": "MixUp strength (0 turns it off)",
    "cutmix_alpha": "CutMix strength (0 turns it off)",
    "canvas_digits": "mnist: this many training digits also written on the app's canvas and read back as the app "
                     "reads a drawing, trained on beside MNIST's own",
    "outlier_drawings": "mnist: this many drawings of no digit (letters, doodles, shapes...) trained towards the "
                        "uniform distribution (outlier exposure; docs/calibration.md)",
    "outlier_weight": "their loss's weight against a digit's or a photo's (default: 0.5)",
    "outlier_kinds": "the kinds they are drawn from (default: every): every other kind, even or odd, leaves the "
                     "rest to measure on",
    "outlier_photos": "photos: this many pictures of no class trained towards the uniform distribution (outlier "
                      "exposure): half made in code, half crops of the third of Debian's wallpapers and the sample "
                      "photos that the unfamiliar rule learns from (docs/calibration.md)",
    "mask_ratio": "--pretrain mae: share of each image's patches hidden from the encoder (recipe: 0.75)",
    "decoder_dim": "--pretrain mae: the decoder's width",
    "decoder_depth": "--pretrain mae: the decoder's blocks",
    "decoder_heads": "--pretrain mae: the decoder's attention heads",
    "patch_size": "override the patch size (must divide the image size)",
    "dim": "override the model width",
    "depth": "override the number of encoder blocks",
    "heads": "override the number of attention heads",
    "mlp_dim": "override the MLP hidden width",
    "drop_path": "stochastic depth: the last block's skip rate (0: off)",
}


def dataset_name(name: str) -> str:
    """--dataset's argument, checked by its form (a folder is read when the run starts)."""
    if name in DATASETS or (name.startswith(FOLDER_PREFIX) and len(name) > len(FOLDER_PREFIX)):
        return name
    raise argparse.ArgumentTypeError(f"{name!r}: choose from {', '.join(sorted(DATASETS))} or {FOLDER_PREFIX}PATH")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Train the ViT on MNIST, CIFAR-10 or a folder of your own pictures and write a weights folder "
        "(config.json, model.safetensors, metrics.json, training_curves.png).",
    )
    p.add_argument("--dataset", required=True, type=dataset_name, metavar="{mnist,cifar10,folder:PATH}",
                   help="folder:PATH: your own pictures, PATH/<class>/* (10%% of each class held out to test on) or "
                        "PATH/train/<class>/* and PATH/test/<class>/*, trained with the cifar10 recipe")
    p.add_argument("--data-dir", default="data", help="mnist's and cifar10's root; downloaded there if not found "
                                                      "(default: data)")
    p.add_argument("--out", type=Path, help="weights folder to write (default: weights/<dataset or PATH's name>)")
    p.add_argument("--checkpoint-dir", type=Path,
                   help="where resumable checkpoints go (default: runs/<dataset or PATH's name>)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    p.add_argument("--pretrain", choices=PRETRAIN_METHODS,
                   help="self-supervised pretraining instead (mae: a masked autoencoder), no labels used: writes the "
                        "encoder to --out (default: runs/<dataset>-mae) for --init-from (docs/training.md)")
    p.add_argument("--init-from", type=Path, metavar="FOLDER",
                   help="start from the encoder that train.py --pretrain wrote in FOLDER (the head starts fresh), or "
                        "fine-tune the model trained on this dataset in FOLDER: its record and snapshots carry on")
    for field in (*RECIPE_FLAGS, *PRETRAIN_FLAGS, *ARCHITECTURE_FLAGS):
        flag, kind, help = "--" + field.replace("_", "-"), FLAG_TYPES[field], FLAG_HELP.get(field)
        if kind is bool:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help)
        elif field == "outlier_kinds":
            p.add_argument(flag, choices=KIND_HALVES, help=help)
        else:
            p.add_argument(flag, type=FLAG_RANGES.get(field, int_in(1) if kind is int else float_in(0)), help=help)
    p.add_argument("--train-limit", type=int_in(1), help="train on a random subset of this many images")
    p.add_argument("--test-limit", type=int_in(1), help="evaluate on a random subset of this many images")
    p.add_argument("--calibration-images", type=int_in(0), default=HOLDOUT_IMAGES,
                   help=f"training images held out of training, to fit the temperature that calibrates the model's "
                        f"probabilities at the end of the run (default: {HOLDOUT_IMAGES:,}, at most "
                        f"{HOLDOUT_SHARE:.0%}% of the split; 0: none, and python -m vit_demo calibrate fits it later "
                        "on half the test split)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:1, mps")
    p.add_argument("--compile", nargs="?", const="default", choices=COMPILE_MODES,
                   help="torch.compile the training forward pass and loss; 'reduce-overhead' adds CUDA graphs "
                        "(benchmarks/train_throughput.py says which is fastest on your GPU)")
    p.add_argument("--graph-step", action=argparse.BooleanOptionalAction,
                   help="the whole step (forward, loss, backward, AdamW, schedule) in one CUDA graph, and the batches "
                        f"augmented {GRAPH_CHUNK_BATCHES} at a time; on a CPU the same step runs eagerly "
                        "(docs/training.md; with --compile, the model inside the graph is compiled). Default: on "
                        "for one CUDA process unless --compile reduce-overhead, off otherwise")
    p.add_argument("--snapshots", type=int_in(0), default=6,
                   help="keep the model (fp16) after this many epochs on a log scale, for the app's training "
                        "slider (default: 6; 0: none)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (one summary line per epoch)")
    return p


def architecture(vit: ViTConfig, **changes: int | float) -> ViTConfig:
    """``vit`` with the architecture flags' changes; one that cannot be built (--heads 5 of width 64) is said in a
    line."""
    try:
        return dataclasses.replace(vit, **changes)
    except ValueError as exc:
        raise SystemExit(f"train.py: error: {exc}") from None


def recipe_from_args(args: argparse.Namespace, spec: DatasetSpec | None = None) -> Recipe:
    """The recipe of ``spec`` (default: the dataset --dataset names, mnist or cifar10) with the flags' overrides."""
    recipe = recipe_for(spec) if spec is not None else RECIPES[args.dataset]
    arch = {k: getattr(args, k) for k in ARCHITECTURE_FLAGS if getattr(args, k) is not None}
    hyper = {k: getattr(args, k) for k in RECIPE_FLAGS if getattr(args, k) is not None}
    if hyper.get("auto_augment"):  # in place of the recipe's TrivialAugment, unless that is asked for too
        hyper.setdefault("trivial_augment", False)
    try:
        return dataclasses.replace(recipe, vit=architecture(recipe.vit, **arch), **hyper)
    except ValueError as exc:  # a recipe that cannot be (drawings of no digit mixed by MixUp): said in a line
        raise SystemExit(f"train.py: error: {exc}") from None


def pretrain_recipe_from_args(args: argparse.Namespace) -> tuple[PretrainRecipe, ViTConfig]:
    """The pretraining recipe with the flags' overrides, and the encoder: the dataset's recipe's ViT with the
    architecture flags, without stochastic depth unless --drop-path asks for it (fine-tuning adds its own)."""
    if args.dataset not in PRETRAIN_RECIPES:
        raise SystemExit(f"--pretrain: no pretraining recipe for {args.dataset} (there is one for "
                         f"{', '.join(sorted(PRETRAIN_RECIPES))})")
    unused = [k for k in RECIPE_FLAGS if k not in SHARED_FLAGS and getattr(args, k) is not None]
    if unused or args.init_from:
        flags = [f"--{k.replace('_', '-')}" for k in unused] + (["--init-from"] if args.init_from else [])
        raise SystemExit(f"--pretrain: {', '.join(flags)} belong to supervised training, not to pretraining")
    hyper = {k: getattr(args, k) for k in (*SHARED_FLAGS, *PRETRAIN_FLAGS) if getattr(args, k) is not None}
    arch = {k: getattr(args, k) for k in ARCHITECTURE_FLAGS if getattr(args, k) is not None}
    vit = architecture(RECIPES[args.dataset].vit, **{"drop_path": 0.0, **arch})
    return dataclasses.replace(PRETRAIN_RECIPES[args.dataset], **hyper), vit
