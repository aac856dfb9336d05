"""Steady-state training speed of a recipe's model on this machine: images/s, eager against compiled.

    python benchmarks/train_throughput.py [--dataset cifar10] [--device auto] [--batch-size 128 256]
                                          [--modes eager default reduce-overhead] [--steps 50] [--warmup 10]

Each row times train.py's own step on random uint8 images held on the device: the batch made as training
makes it (crop and flip, per-image TrivialAugment, random erasing, MixUp/CutMix) and one TrainStep
(forward, loss, backward, AdamW, schedule). The warm-up steps, torch.compile's compilation among them,
are timed apart and printed as "first steps s". On CUDA one more eager step runs with torch's sync
debug mode set to raise, to show that a step never makes the host wait for the GPU.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vit_demo.data.datasets import dataset_spec  # noqa: E402
from vit_demo.device import resolve_device  # noqa: E402
from vit_demo.model import VisionTransformer  # noqa: E402
from vit_demo.training.loop import TrainStep, make_optimizer, training_batch  # noqa: E402
from vit_demo.training.recipes import RECIPES  # noqa: E402


class Loop:
    """train.py's training step for a recipe's model on random uint8 images held on ``device``."""

    def __init__(self, dataset: str, device: torch.device, batch_size: int, mode: str) -> None:
        self.spec, self.recipe, self.device, self.batch_size = dataset_spec(dataset), RECIPES[dataset], device, batch_size
        torch.manual_seed(0)
        size = (max(4096, batch_size * 8), self.spec.channels, self.spec.image_size, self.spec.image_size)
        self.images = torch.randint(0, 256, size, dtype=torch.uint8, device=device)  # (N, C, H, W)
        self.labels = torch.randint(0, len(self.spec.classes), (len(self.images),), device=device)
        model = VisionTransformer(self.recipe.vit).to(device).train()
        self.parameters = sum(p.numel() for p in model.parameters())
        optimizer = make_optimizer(model, self.recipe, device)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        self.step = TrainStep(model, optimizer, scheduler, self.recipe.label_smoothing, device,
                              None if mode == "eager" else mode)
        self.generator, self.rng = torch.Generator(device).manual_seed(0), random.Random(0)

    def run(self, steps: int) -> None:
        """Queue ``steps`` training steps; nothing here waits for the device."""
        for _ in range(steps):
            idx = torch.randint(0, len(self.images), (self.batch_size,), device=self.device, generator=self.generator)
            self.step(*training_batch(self.images[idx], self.labels[idx], self.recipe, self.spec, self.generator,
                                      self.rng))

    def seconds(self, steps: int) -> float:
        """Wall time of ``steps`` steps, up to the last one's end on the device."""
        started = time.perf_counter()
        self.run(steps)
        self.step.sums.tolist()  # waits for the last step
        return time.perf_counter() - started


def measure(dataset: str, device: torch.device, batch_size: int, mode: str, steps: int, warmup: int) -> dict:
    loop = Loop(dataset, device, batch_size, mode)
    first = loop.seconds(warmup)
    seconds = loop.seconds(steps)
    return {"batch": batch_size, "mode": mode, "first_s": first, "images_per_s": steps * batch_size / seconds,
            "step_ms": 1000 * seconds / steps, "parameters": loop.parameters}


def host_syncs_in_a_step(dataset: str, device: torch.device, batch_size: int) -> str:
    """Eager steps under torch.cuda's sync debug mode 'error': any host sync in them raises."""
    loop = Loop(dataset, device, batch_size, "eager")
    loop.seconds(2)  # warmed up
    torch.cuda.set_sync_debug_mode("error")
    try:
        loop.run(8)  # mixed and unmixed batches among them
        return "none"
    except RuntimeError as exc:
        return f"a sync: {exc}"
    finally:
        torch.cuda.set_sync_debug_mode("default")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="cifar10", choices=sorted(RECIPES))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--modes", nargs="+", default=None,
                        help="eager and torch.compile modes (default: eager default, plus reduce-overhead on CUDA)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per row")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation included)")
    args = parser.parse_args()
    device = resolve_device(args.device)
    modes = args.modes or ["eager", "default"] + (["reduce-overhead"] if device.type == "cuda" else [])
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    recipe = RECIPES[args.dataset]
    epoch_images = 50_000 if args.dataset == "cifar10" else 60_000

    rows = [measure(args.dataset, device, batch, mode, args.steps, args.warmup)
            for batch in args.batch_size for mode in modes]
    print(f"{args.dataset} recipe model ({rows[0]['parameters']:,} parameters), device {device} ({name}), "
          f"torch {torch.__version__}, {args.steps} timed steps after {args.warmup} warm-up steps")
    print(f"| batch | loop | training images/s | ms per step | first {args.warmup} steps s "
          f"| {recipe.epochs} epochs of {epoch_images:,} images |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in rows:
        minutes = recipe.epochs * epoch_images / r["images_per_s"] / 60
        print(f"| {r['batch']} | {r['mode']} | {r['images_per_s']:,.0f} | {r['step_ms']:.1f} | {r['first_s']:.1f} "
              f"| {minutes:,.1f} min |")
    if device.type == "cuda":
        print(f"host syncs in an eager training step: {host_syncs_in_a_step(args.dataset, device, args.batch_size[0])}")


if __name__ == "__main__":
    main()
