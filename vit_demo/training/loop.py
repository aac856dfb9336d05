"""The training loop behind ``train.py``: one process, or several under ``torchrun`` with DDP."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.data import outliers, outside_photos, sketches
from vit_demo.data.datasets import (DATASETS, DatasetNotFound, DatasetSpec, dataset_spec, image_folder_record,
                                    load_split)
from vit_demo.device import device_name
from vit_demo.interpret.heads import mean_sample, write_head_means
from vit_demo.interpret import unfamiliar
from vit_demo.interpret.inside import write_attention_distance
from vit_demo.model import VisionTransformer
from vit_demo.pictures.figures import training_curves
from vit_demo.training.calibrate import calibrate, held_out, holdout_indices
from vit_demo.training.evaluation import evaluate
from vit_demo.training.options import recipe_from_args
from vit_demo.training.recipes import Recipe
from vit_demo.training.step import (GRAPH_CHUNK_BATCHES, NO_CLASS, TrainStep, make_optimizer, make_schedule,
                                    train_steps)
from vit_demo.weights import (CURVES_FILE, METRICS_FILE, WEIGHTS_ROOT, WeightsError, carry_snapshots,
                              initialise_from, read_metrics, read_weights_info, resolve_weights_folder, save_snapshot,
                              save_weights, shown_path, snapshot_epochs, write_snapshot_index)

CHECKPOINT_FILE = "checkpoint.pt"
# The seeds of the drawings a recipe trains on (Recipe.canvas_digits, outlier_drawings), apart from the ones the
# unfamiliar rule is fitted and measured with (interpret/unfamiliar.py's SEEDS): its measures stay on drawings never
# trained on. A run's --seed moves them by 1,000 each.
DRAWING_SEEDS = {"canvas digits": 61, "non-digits": 62}
PHOTO_OUTLIER_SEED = 64  # the pictures of no class a photo recipe trains on (Recipe.outlier_photos), moved likewise
# What metrics.json keeps of the run a fine-tune continues (the rest, its history, carries on in the fine-tune's).
CONTINUED_FIELDS = ("command", "epochs", "train_images", "wall_time_s", "device_name", "test_accuracy", "recipe")


def subset(images: torch.Tensor, labels: torch.Tensor, limit: int | None, seed: int):
    if limit is None or limit >= len(images):
        return images, labels
    keep = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))[:limit]
    return images[keep], labels[keep]


def drawings(recipe: Recipe, spec: DatasetSpec, train_x: torch.Tensor, train_y: torch.Tensor, seed: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The drawings ``recipe`` trains on besides the training images (uint8 (N, 1, 28, 28), labels (N,)): uint8
    (M, 1, 28, 28) and labels (M,), NO_CLASS for a drawing of no digit (data/sketches.py)."""
    if spec.name != "mnist":
        raise SystemExit("train.py: error: --canvas-digits and --outlier-drawings are drawings, for mnist only")
    found_x, found_y = [], []
    if recipe.canvas_digits:
        pick = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(seed))[: recipe.canvas_digits]
        found_x.append(sketches.canvas_digits(train_x[pick], DRAWING_SEEDS["canvas digits"] + 1000 * seed))
        found_y.append(train_y[pick])
    if recipe.outlier_drawings:
        drawn, _ = sketches.drawing_set("non-digits", recipe.outlier_drawings,
                                        DRAWING_SEEDS["non-digits"] + 1000 * seed, recipe.outlier_kinds)
        found_x.append(drawn)
        found_y.append(torch.full((len(drawn),), NO_CLASS, dtype=train_y.dtype))
    return torch.cat(found_x).mul(255).round().to(torch.uint8), torch.cat(found_y)


def photo_outliers(recipe: Recipe, spec: DatasetSpec, train_x: torch.Tensor, seed: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The pictures of no class ``recipe`` trains on besides the training photos (uint8 (N, 3, 32, 32)): half made
    in code of the photos (data/outliers.py), half random crops of the outside pictures the unfamiliar rule learns
    from (never those it is chosen or reported on), drawn with a seed of their own; uint8 (M, 3, 32, 32) and labels
    (M,) all NO_CLASS."""
    if spec.name != "cifar10":
        raise SystemExit("train.py: error: --outlier-photos are photos of no class, for cifar10 only")
    rng, count = np.random.default_rng(PHOTO_OUTLIER_SEED + 1000 * seed), recipe.outlier_photos
    per_kind = -(-(count // 2) // len(outliers.KINDS))  # (rounded up)
    source = train_x[torch.randperm(len(train_x), generator=torch.Generator().manual_seed(seed))][: 3 * per_kind]
    made = outliers.outliers(source, per_kind, PHOTO_OUTLIER_SEED + 1000 * seed)[: count // 2]
    try:
        outside = unfamiliar.outside_pictures()
    except outside_photos.OutsidePhotosMissing as exc:
        raise SystemExit(f"train.py: error: --outlier-photos: {exc}") from None
    crops, wanted = [], count - len(made)
    while len(crops) < wanted:  # each draw: 150 crops of each whole picture, in a random order
        drawn = outside.crops(rng)
        crops += [drawn[i] for i in rng.permutation(len(drawn))]
    _, cropped = unfamiliar.photos_of(crops[:wanted])  # (wanted, 3, 32, 32) in [0, 1]
    found = torch.cat([made, cropped.mul(255).round().to(torch.uint8)])
    return found, torch.full((len(found),), NO_CLASS, dtype=torch.int64)


def training_dataset(args: argparse.Namespace) -> DatasetSpec:
    """The dataset --dataset names; for a folder of one's own pictures, read and measured here (cached), the files
    skipped said in a line. A folder that cannot be used is refused in a line, with exit status 2 (as argparse's)."""
    try:
        spec = dataset_spec(args.dataset)
        skipped = image_folder_record(spec)["skipped"] if spec.root is not None else []
    except (DatasetNotFound, ValueError) as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if skipped:
        print(f"skipped {len(skipped)} file{'s' if len(skipped) > 1 else ''} of {shown_path(spec.root)} that "
              f"cannot be used (metrics.json lists them), the first: {skipped[0]}", file=sys.stderr)
    return spec


def data_dir_of(spec: DatasetSpec, args: argparse.Namespace) -> Path:
    """Where ``spec``'s images are: a folder dataset's own folder, else --data-dir."""
    return spec.root if spec.root is not None else Path(args.data_dir)


def default_folder(spec: DatasetSpec, under: Path) -> Path:
    """``under/<name>`` for a run's output (weights/, runs/); a folder dataset may not take a shipped model's name."""
    if spec.root is not None and spec.folder_name in DATASETS:
        raise SystemExit(f"train.py: error: {under / spec.folder_name} is the shipped {spec.folder_name} model's "
                         "name: give --out and --checkpoint-dir")
    return under / spec.folder_name


def training_data(args: argparse.Namespace, spec: DatasetSpec, device: torch.device,
                  recipe: Recipe | None = None):
    """The run's images, uint8 (N, C, H, W) with int64 labels (N,): the training images less the calibration hold-out,
    limited by --train-limit, with the drawings ``recipe`` asks for after them; the test images, limited by
    --test-limit; the held-out ones; and how many of the first are the dataset's own, before the drawings. On CUDA the
    first two move to the GPU (uint8 images are small enough to live there)."""
    try:
        train_x, train_y = load_split(spec, data_dir_of(spec, args), "train")
        test = load_split(spec, data_dir_of(spec, args), "test")
    except (DatasetNotFound, ValueError) as exc:  # none, none to download, or damaged: said in a line
        raise SystemExit(f"train.py: error: {exc}") from None
    trained_on, held = holdout_indices(len(train_x), args.calibration_images, args.seed)
    calibration_set = train_x[held], train_y[held]  # never trained on: the temperature is fitted on it
    train_x, train_y = subset(train_x[trained_on], train_y[trained_on], args.train_limit, args.seed)
    own = len(train_x)
    if recipe is not None and (recipe.canvas_digits or recipe.outlier_drawings):
        drawn_x, drawn_y = drawings(recipe, spec, train_x, train_y, args.seed)
        train_x, train_y = torch.cat([train_x, drawn_x]), torch.cat([train_y, drawn_y])
    if recipe is not None and recipe.outlier_photos:
        made_x, made_y = photo_outliers(recipe, spec, train_x, args.seed)
        train_x, train_y = torch.cat([train_x, made_x]), torch.cat([train_y, made_y.to(train_y.dtype)])
    test_x, test_y = subset(*test, args.test_limit, args.seed + 1)
    if device.type == "cuda":
        train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    return (train_x, train_y), (test_x, test_y), calibration_set, own


def continued_record(folder: Path | None, dataset: str) -> dict | None:
    """The record (metrics.json) of the model that --init-from ``folder`` fine-tunes, whose history and snapshots this
    run carries on; None where there is none to carry on: no --init-from, or a pretraining run's encoder."""
    if folder is None:
        return None
    try:
        info, _ = read_weights_info(resolve_weights_folder(folder))
    except WeightsError as exc:
        raise SystemExit(f"--init-from: {exc}") from None
    if info.pretrained is not None or info.dataset is None or info.dataset.name != dataset:
        return None
    return read_metrics(folder) or {"epochs": 0, "history": []}


def epoch_draws(seed: int, epoch: int, rank: int, device: torch.device, images: int
                ) -> tuple[torch.Generator, torch.Tensor]:
    """An epoch's random numbers: the device generator (augmentation, MixUp/CutMix, the MAE's masks) and the order
    of the ``images`` training images (on ``device``). Seeding from (seed, epoch, rank), torch's global generators
    too (stochastic depth draws from them), makes a resumed run repeat exactly what an unbroken one does."""
    epoch_seed = seed * 100_003 + epoch * 101 + rank
    torch.manual_seed(epoch_seed)
    order = torch.randperm(images, generator=torch.Generator().manual_seed(seed * 7919 + epoch))
    return torch.Generator(device).manual_seed(epoch_seed), order.to(device)


def resume_from(path: Path, device: torch.device, identity: dict, graph_step: bool, model: nn.Module,
                optimizer: torch.optim.Optimizer, scheduler) -> tuple[int, list[dict], float]:
    """Load a checkpoint into the model, optimizer and schedule; return its epoch, history and elapsed seconds.
    ``identity`` (dataset, architecture, pretraining) must be the checkpoint's own, and so must --graph-step."""
    if not path.is_file():
        raise SystemExit(f"--resume: no checkpoint at {path}")
    ckpt = torch.load(path, map_location=device, weights_only=True)
    if any(ckpt.get(key) != value for key, value in identity.items()):
        raise SystemExit(f"--resume: {path} was made with another dataset, architecture or pretraining")
    if ckpt.get("graph_step", False) != graph_step:  # its optimizer and schedule keep other state
        made_with = "--graph-step" if ckpt.get("graph_step", False) else "--no-graph-step"
        raise SystemExit(f"--resume: {path} was made with {made_with}; resume it with {made_with}")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    print(f"resumed from {path} after epoch {ckpt['epoch']}", file=sys.stderr)
    return ckpt["epoch"], ckpt["history"], ckpt["elapsed_s"]


def write_checkpoint(path: Path, identity: dict, graph_step: bool, history: list[dict], elapsed_s: float,
                     model: nn.Module, optimizer: torch.optim.Optimizer, scheduler) -> None:
    """What --resume needs to carry on after the last epoch in ``history``, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {**identity, "graph_step": graph_step, "epoch": len(history), "history": history,
             "elapsed_s": elapsed_s, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict()}
    atomic_write(path, lambda f: torch.save(state, f))


def _all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    if not dist.is_initialized():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def supervised(args: argparse.Namespace, command: str, device: torch.device, rank: int, world_size: int
               ) -> dict | None:
    """The supervised run ``args`` asks for, in this process (of ``world_size``, DDP set up); the metrics on rank 0."""
    is_main = rank == 0
    spec = training_dataset(args)
    recipe = recipe_from_args(args, spec)
    out = args.out or default_folder(spec, WEIGHTS_ROOT)
    checkpoint_path = (args.checkpoint_dir or default_folder(spec, Path("runs"))) / CHECKPOINT_FILE

    (train_x, train_y), (test_x, test_y), calibration_set, own = training_data(args, spec, device, recipe)
    held = len(calibration_set[0])
    # Each process takes an equal share so that all of them run the same number of steps. Every batch is
    # full (the last partial one is dropped), so shapes never change: what torch.compile and CUDA graphs need.
    per_rank = len(train_x) // world_size
    rank_batch = max(1, min(recipe.batch_size // world_size, per_rank))
    steps_per_epoch = per_rank // rank_batch
    test_shard = slice(rank * len(test_x) // world_size, (rank + 1) * len(test_x) // world_size)

    torch.manual_seed(args.seed)
    model = VisionTransformer(recipe.vit).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    optimizer = make_optimizer(model, recipe, device, graph=args.graph_step)
    warmup_steps, total_steps = round(recipe.warmup_epochs * steps_per_epoch), recipe.epochs * steps_per_epoch
    scheduler = make_schedule(optimizer, warmup_steps, total_steps, device, graph=args.graph_step)
    identity = {"dataset": spec.name, "vit": recipe.vit.to_dict(), "pretrain": None}
    continued = continued_record(args.init_from, spec.name)
    first_epoch = continued["epochs"] if continued else 0  # a fine-tune's epochs come after the run's it continues
    start_epoch, history, elapsed_before = 0, [], 0.0
    if args.resume:
        start_epoch, history, elapsed_before = resume_from(checkpoint_path, device, identity, args.graph_step, model,
                                                           optimizer, scheduler)
    elif args.init_from:  # a pretrained encoder (train.py --pretrain), all but the head; or a model to fine-tune
        try:
            copied = initialise_from(model, args.init_from, head=continued is not None)
        except WeightsError as exc:
            raise SystemExit(f"--init-from: {exc}") from exc
        if is_main:
            what = f"the model trained for {first_epoch} epochs" if continued else "pretrained tensors"
            print(f"started from {len(copied)} tensors of {what} in {shown_path(args.init_from)}", file=sys.stderr)
            if continued:
                carry_snapshots(resolve_weights_folder(args.init_from), out)
    train_model = DistributedDataParallel(model) if world_size > 1 else model
    train_step = TrainStep(train_model, optimizer, scheduler, recipe.label_smoothing, device, args.compile,
                           graph=args.graph_step)
    chunk_batches = GRAPH_CHUNK_BATCHES if args.graph_step else 1
    refresh_every = max(1, steps_per_epoch // 10)  # the progress bar's loss: ten host syncs an epoch
    snapshots = [] if continued else snapshot_epochs(recipe.epochs, args.snapshots)  # a fine-tune keeps the run's
    if is_main:
        print(f"training {spec.name}: {n_params:,} parameters, {len(train_x):,} train / {len(test_x):,} test images, "
              f"device {device}, {world_size} process(es)", file=sys.stderr)

    started = time.perf_counter()
    for epoch in range(start_epoch, recipe.epochs):
        generator, order = epoch_draws(args.seed, epoch, rank, train_x.device, len(train_x))
        mine = order[rank * per_rank : (rank + 1) * per_rank]
        train_model.train()
        train_step.sums.zero_()
        epoch_started = time.perf_counter()
        bar = tqdm(total=steps_per_epoch, desc=f"epoch {epoch + 1}/{recipe.epochs}",
                   disable=not is_main or args.no_progress, leave=False, file=sys.stderr)
        steps = train_steps(train_step, train_x, train_y, mine[: steps_per_epoch * rank_batch], recipe, spec,
                            generator, rank_batch, chunk_batches)
        for step, _ in enumerate(steps):
            bar.update()
            if not bar.disable and (step + 1) % refresh_every == 0:
                loss_sum, correct, labelled = train_step.sums.tolist()
                seen = (step + 1) * rank_batch
                bar.set_postfix(loss=f"{loss_sum / seen:.4f}", acc=f"{correct / max(1.0, labelled):.4f}")
        bar.close()
        loss_sum, correct, labelled = train_step.sums.tolist()  # waits for the epoch's last step: its one host sync
        train_seconds = time.perf_counter() - epoch_started
        test_loss, test_correct, test_n = evaluate(model, test_x[test_shard], test_y[test_shard])
        loss_sum, correct, labelled, seen, test_loss, test_correct, test_n = _all_reduce_sum(
            [loss_sum, correct, labelled, steps_per_epoch * rank_batch, test_loss, test_correct, test_n], device)
        history.append({
            "epoch": first_epoch + epoch + 1,
            "train_loss": loss_sum / seen,
            "train_accuracy": correct / max(1.0, labelled),
            "test_loss": test_loss / test_n,
            "test_accuracy": test_correct / test_n,
            "lr": scheduler.get_last_lr()[0],
            "train_images_per_second": round(seen / train_seconds, 1),
        })
        if is_main:
            h = history[-1]
            print(f"epoch {epoch + 1}/{recipe.epochs}: train loss {h['train_loss']:.4f} acc {h['train_accuracy']:.4f}"
                  f" | test loss {h['test_loss']:.4f} acc {h['test_accuracy']:.4f}"
                  f" | {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
            if epoch + 1 in snapshots:  # before the checkpoint: a run resumed after it never lacks the snapshot
                save_snapshot(out, model, epoch + 1)
            write_checkpoint(checkpoint_path, identity, args.graph_step, history,
                             elapsed_before + time.perf_counter() - started, model, optimizer, scheduler)

    if not is_main:
        return None
    wall = elapsed_before + time.perf_counter() - started
    metrics = {
        "dataset": spec.name,
        "test_accuracy": history[-1]["test_accuracy"],
        "test_images": len(test_x),
        "train_images": len(train_x),
        "epochs": first_epoch + recipe.epochs,
        "wall_time_s": round(wall, 1),
        "seconds_per_epoch": round(wall / max(1, recipe.epochs), 1),
        "train_images_per_second": history[-1]["train_images_per_second"],
        "device": str(device),
        "device_name": device_name(device),
        "processes": world_size,
        "parameters": n_params,
        **({"image_folder": image_folder_record(spec)} if spec.root is not None else {}),
        "calibration_holdout": {"images": held, "seed": args.seed} if held else None,
        "init_from": str(shown_path(args.init_from)) if args.init_from else None,
        "continues": {k: continued.get(k) for k in CONTINUED_FIELDS} if continued else None,
        "recipe": {k: v for k, v in dataclasses.asdict(recipe).items() if k != "vit"},
        "seed": args.seed,
        "torch": torch.__version__,
        "command": command,
        "history": (continued.get("history", []) if continued else []) + history,
    }
    save_weights(out, model, spec)
    write_attention_distance(out, model, test_x, "test")  # for the app's inside-the-model view
    # For mean-ablation of heads (heads/knockout.py): over the dataset's own training images, as `python -m vit_demo
    # head-means` takes them, not over the drawings a recipe adds after them (training_data).
    write_head_means(out, model, mean_sample(train_x[:own]))
    if snapshots:
        write_snapshot_index(out, history)
    atomic_write_text(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    if held:
        calibrate(out, data_dir_of(spec, args), device,
                  held_out(calibration_set, (test_x.cpu(), test_y.cpu()), args.seed))
    title = f"ViT on {spec.folder_name}: {100 * metrics['test_accuracy']:.2f}% test accuracy"
    curves = training_curves(metrics["history"], title)
    atomic_write(out / CURVES_FILE, lambda f: curves.save(f, format="png"))
    print(json.dumps({k: metrics[k] for k in ("dataset", "test_accuracy", "epochs", "wall_time_s", "parameters")}))
    return metrics
