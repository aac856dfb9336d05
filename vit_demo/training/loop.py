"""The training loop behind ``train.py``: one process, or several under ``torchrun`` with DDP."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.data.datasets import dataset_spec, load_split
from vit_demo.device import resolve_device
from vit_demo.interpret.heads import mean_sample, write_head_means
from vit_demo.interpret.inside import DISTANCE_IMAGES, write_attention_distance
from vit_demo.model import VisionTransformer
from vit_demo.pictures.figures import training_curves
from vit_demo.training.calibrate import HOLDOUT_IMAGES, HOLDOUT_SHARE, calibrate, held_out, holdout_indices
from vit_demo.training.evaluation import evaluate
from vit_demo.training.recipes import RECIPES, Recipe
from vit_demo.training.step import DeviceSchedule, TrainStep, host_schedule, make_optimizer, train_steps
from vit_demo.weights import (CURVES_FILE, METRICS_FILE, WEIGHTS_ROOT, save_snapshot, save_weights, snapshot_epochs,
                              write_snapshot_index)

CHECKPOINT_FILE = "checkpoint.pt"
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
GRAPH_CHUNK_BATCHES = 64  # with --graph-step, batches augmented at once (8,192 CIFAR-10 images at batch 128)


# The command-line flags that override a recipe: field -> (type, help). Each field's flag is --field-name.
RECIPE_FLAGS = {
    "epochs": (int, None),
    "batch_size": (int, "global batch size (split across torchrun processes)"),
    "lr": (float, None),
    "weight_decay": (float, None),
    "warmup_epochs": (float, None),
    "label_smoothing": (float, None),
    "trivial_augment": (bool, "TrivialAugment, per image, on top of the crop/flip or affine augmentation"),
    "auto_augment": (bool, "AutoAugment's CIFAR-10 policy, per image, in place of TrivialAugment"),
    "random_erasing": (float, "each image's chance of a random erased rectangle (0: off)"),
    "mix_prob": (float, "each batch's chance of MixUp or CutMix"),
    "mixup_alpha": (float, "MixUp strength (0 turns it off)"),
    "cutmix_alpha": (float, "CutMix strength (0 turns it off)"),
}
ARCHITECTURE_FLAGS = {
    "patch_size": (int, "override the patch size (must divide the image size)"),
    "dim": (int, "override the model width"),
    "depth": (int, "override the number of encoder blocks"),
    "heads": (int, "override the number of attention heads"),
    "mlp_dim": (int, "override the MLP hidden width"),
    "drop_path": (float, "stochastic depth: the last block's skip rate (0: off)"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Train the ViT on MNIST or CIFAR-10 and write a weights folder "
        "(config.json, model.safetensors, metrics.json, training_curves.png).",
    )
    p.add_argument("--dataset", required=True, choices=sorted(RECIPES))
    p.add_argument("--data-dir", default="data", help="dataset root; downloaded there if not found (default: data)")
    p.add_argument("--out", type=Path, help="weights folder to write (default: weights/<dataset>)")
    p.add_argument("--checkpoint-dir", type=Path, help="where resumable checkpoints go (default: runs/<dataset>)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    for field, (kind, help) in {**RECIPE_FLAGS, **ARCHITECTURE_FLAGS}.items():
        flag = "--" + field.replace("_", "-")
        if kind is bool:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help)
        else:
            p.add_argument(flag, type=kind, help=help)
    p.add_argument("--train-limit", type=int, help="train on a random subset of this many images")
    p.add_argument("--test-limit", type=int, help="evaluate on a random subset of this many images")
    p.add_argument("--calibration-images", type=int, default=HOLDOUT_IMAGES,
                   help=f"training images held out of training, to fit the temperature that calibrates the model's "
                        f"probabilities at the end of the run (default: {HOLDOUT_IMAGES:,}, at most "
                        f"{HOLDOUT_SHARE:.0%}% of the split; 0: none, and python -m vit_demo calibrate fits it later "
                        "on half the test split)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:1, mps")
    p.add_argument("--compile", nargs="?", const="default", choices=COMPILE_MODES,
                   help="torch.compile the training forward pass and loss; 'reduce-overhead' adds CUDA graphs "
                        "(benchmarks/train_throughput.py says which is fastest on your GPU)")
    p.add_argument("--graph-step", action="store_true",
                   help="the whole step (forward, loss, backward, AdamW, schedule) in one CUDA graph, and the batches "
                        f"augmented {GRAPH_CHUNK_BATCHES} at a time; on a CPU the same step runs eagerly "
                        "(docs/training.md; with --compile, the model inside the graph is compiled)")
    p.add_argument("--snapshots", type=int, default=6,
                   help="keep the model (fp16) after this many epochs on a log scale, for the app's training "
                        "slider (default: 6; 0: none)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (one summary line per epoch)")
    return p


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    recipe = RECIPES[args.dataset]
    arch = {k: getattr(args, k) for k in ARCHITECTURE_FLAGS if getattr(args, k) is not None}
    hyper = {k: getattr(args, k) for k in RECIPE_FLAGS if getattr(args, k) is not None}
    if hyper.get("auto_augment"):  # in place of the recipe's TrivialAugment, unless that is asked for too
        hyper.setdefault("trivial_augment", False)
    return dataclasses.replace(recipe, vit=dataclasses.replace(recipe.vit, **arch), **hyper)


def _subset(images: torch.Tensor, labels: torch.Tensor, limit: int | None, seed: int):
    if limit is None or limit >= len(images):
        return images, labels
    keep = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))[:limit]
    return images[keep], labels[keep]


def _all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    if not dist.is_initialized():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def main(argv: list[str] | None = None) -> dict | None:
    """Parse ``train.py`` arguments and train; return the metrics on rank 0 (None on other ranks)."""
    argv = sys.argv[1:] if argv is None else argv
    return train(build_parser().parse_args(argv), command=shlex.join(["python", "train.py", *argv]))


def train(args: argparse.Namespace, command: str = "") -> dict | None:
    """Train as ``args`` says; ``command`` is recorded in metrics.json. Returns the metrics on rank 0."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = resolve_device(args.device)
    if args.graph_step and (world_size > 1 or args.compile not in (None, "default")):
        raise SystemExit("--graph-step: one process only, and --compile in its default mode only (the others make "
                         "CUDA graphs of their own)")
    if world_size > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        return _train(args, command, device, rank, world_size)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _train(args: argparse.Namespace, command: str, device: torch.device, rank: int, world_size: int) -> dict | None:
    is_main = rank == 0
    spec = dataset_spec(args.dataset)
    recipe = recipe_from_args(args)
    out = args.out or WEIGHTS_ROOT / spec.name
    checkpoint_path = (args.checkpoint_dir or Path("runs") / spec.name) / CHECKPOINT_FILE

    train_x, train_y = load_split(spec.name, args.data_dir, "train")
    trained_on, held = holdout_indices(len(train_x), args.calibration_images, args.seed)
    calibration_set = train_x[held], train_y[held]  # never trained on: the temperature is fitted on it
    train_x, train_y = _subset(train_x[trained_on], train_y[trained_on], args.train_limit, args.seed)
    test_x, test_y = _subset(*load_split(spec.name, args.data_dir, "test"), args.test_limit, args.seed + 1)
    if device.type == "cuda":  # uint8 images are small enough to live on the GPU
        train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
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
    scheduler = DeviceSchedule(optimizer, warmup_steps, total_steps, device) if args.graph_step \
        else host_schedule(optimizer, warmup_steps, total_steps)
    start_epoch, history, elapsed_before = 0, [], 0.0
    if args.resume:
        if not checkpoint_path.is_file():
            raise SystemExit(f"--resume: no checkpoint at {checkpoint_path}")
        ckpt = torch.load(checkpoint_path, map_location=device, weights_only=True)
        if ckpt["vit"] != recipe.vit.to_dict() or ckpt["dataset"] != spec.name:
            raise SystemExit(f"--resume: {checkpoint_path} was made with another dataset or architecture")
        if ckpt.get("graph_step", False) != args.graph_step:  # its optimizer and schedule keep other state
            raise SystemExit(f"--resume: {checkpoint_path} was made {'with' if ckpt.get('graph_step') else 'without'}"
                             " --graph-step; resume it the same way")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start_epoch, history, elapsed_before = ckpt["epoch"], ckpt["history"], ckpt["elapsed_s"]
        if is_main:
            print(f"resumed from {checkpoint_path} after epoch {start_epoch}", file=sys.stderr)
    train_model = DistributedDataParallel(model) if world_size > 1 else model
    train_step = TrainStep(train_model, optimizer, scheduler, recipe.label_smoothing, device, args.compile,
                           graph=args.graph_step)
    chunk_batches = GRAPH_CHUNK_BATCHES if args.graph_step else 1
    refresh_every = max(1, steps_per_epoch // 10)  # the progress bar's loss: ten host syncs an epoch
    snapshots = snapshot_epochs(recipe.epochs, args.snapshots)
    if is_main:
        print(f"training {spec.name}: {n_params:,} parameters, {len(train_x):,} train / {len(test_x):,} test images, "
              f"device {device}, {world_size} process(es)", file=sys.stderr)

    started = time.perf_counter()
    for epoch in range(start_epoch, recipe.epochs):
        # Seeding from (seed, epoch, rank) makes a resumed run repeat exactly what an unbroken one does.
        epoch_seed = args.seed * 100_003 + epoch * 101 + rank
        torch.manual_seed(epoch_seed)  # stochastic depth draws from the global generators
        generator = torch.Generator(device).manual_seed(epoch_seed)  # augmentation and MixUp/CutMix, on the device
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(args.seed * 7919 + epoch))
        mine = order[rank * per_rank : (rank + 1) * per_rank].to(train_x.device)
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
                loss_sum, correct = train_step.sums.tolist()
                seen = (step + 1) * rank_batch
                bar.set_postfix(loss=f"{loss_sum / seen:.4f}", acc=f"{correct / seen:.4f}")
        bar.close()
        loss_sum, correct = train_step.sums.tolist()  # waits for the epoch's last step: its one host sync
        train_seconds = time.perf_counter() - epoch_started
        test_loss, test_correct, test_n = evaluate(model, test_x[test_shard], test_y[test_shard])
        loss_sum, correct, seen, test_loss, test_correct, test_n = _all_reduce_sum(
            [loss_sum, correct, steps_per_epoch * rank_batch, test_loss, test_correct, test_n], device)
        history.append({
            "epoch": epoch + 1,
            "train_loss": loss_sum / seen,
            "train_accuracy": correct / seen,
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
            checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
            state = {"dataset": spec.name, "vit": recipe.vit.to_dict(), "graph_step": args.graph_step,
                     "epoch": epoch + 1, "history": history,
                     "elapsed_s": elapsed_before + time.perf_counter() - started, "model": model.state_dict(),
                     "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
            if epoch + 1 in snapshots:  # before the checkpoint: a run resumed after it never lacks the snapshot
                save_snapshot(out, model, epoch + 1)
            atomic_write(checkpoint_path, lambda f: torch.save(state, f))

    if not is_main:
        return None
    wall = elapsed_before + time.perf_counter() - started
    metrics = {
        "dataset": spec.name,
        "test_accuracy": history[-1]["test_accuracy"],
        "test_images": len(test_x),
        "train_images": len(train_x),
        "epochs": recipe.epochs,
        "wall_time_s": round(wall, 1),
        "seconds_per_epoch": round(wall / max(1, recipe.epochs), 1),
        "train_images_per_second": history[-1]["train_images_per_second"],
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)",
        "processes": world_size,
        "parameters": n_params,
        "calibration_holdout": {"images": len(held), "seed": args.seed} if len(held) else None,
        "recipe": {k: v for k, v in dataclasses.asdict(recipe).items() if k != "vit"},
        "seed": args.seed,
        "torch": torch.__version__,
        "command": command,
        "history": history,
    }
    save_weights(out, model, spec)
    write_attention_distance(out, model, test_x[:DISTANCE_IMAGES], "test")  # for the app's inside-the-model view
    write_head_means(out, model, mean_sample(train_x))  # for mean-ablation of heads (heads/knockout.py)
    if snapshots:
        write_snapshot_index(out, history)
    atomic_write_text(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    if len(held):
        calibrate(out, args.data_dir, device, held_out(calibration_set, (test_x.cpu(), test_y.cpu()), args.seed))
    curves = training_curves(history, f"ViT on {spec.name}: {100 * metrics['test_accuracy']:.2f}% test accuracy")
    atomic_write(out / CURVES_FILE, lambda f: curves.save(f, format="png"))
    print(json.dumps({k: metrics[k] for k in ("dataset", "test_accuracy", "epochs", "wall_time_s", "parameters")}))
    return metrics
