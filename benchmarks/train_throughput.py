"""Steady-state training speed of a recipe's model on this machine: images/s, eager against compiled and graphed.

    python benchmarks/train_throughput.py [--dataset cifar10] [--device auto] [--batch-size 128 256]
                                          [--modes eager default reduce-overhead graph graph-compiled]
                                          [--steps 50] [--warmup 10]

Each row times train.py's own step on random uint8 images held on the device: the batches made as training
makes them (crop and flip, per-image TrivialAugment, random erasing, MixUp/CutMix) and one TrainStep per batch
(forward, loss, backward, AdamW, schedule). Modes: eager, a torch.compile mode (default, reduce-overhead,
max-autotune), or train.py --graph-step: the whole step in one CUDA graph and the batches made up to 64 at a time
("graph"; "graph-compiled" compiles the model inside the graph, as --graph-step --compile). The warm-up steps,
compilation and capture among them, are timed apart and printed as "first steps s". On CUDA more steps run with
torch's sync debug mode set to raise, to show that a step never makes the host wait for the GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vit_demo.data.datasets import dataset_spec  # noqa: E402
from vit_demo.device import resolve_device  # noqa: E402
from vit_demo.model import VisionTransformer  # noqa: E402
from vit_demo.training.options import COMPILE_MODES  # noqa: E402
from vit_demo.training.recipes import RECIPES  # noqa: E402
from vit_demo.training.step import (GRAPH_CHUNK_BATCHES, GRAPH_WARMUP_STEPS, TrainStep, make_optimizer,  # noqa: E402
                                    make_schedule, train_steps)

GRAPH_MODES = {"graph": None, "graph-compiled": "default"}  # --graph-step's modes: the compile mode inside the graph


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
        graph = mode in GRAPH_MODES
        optimizer = make_optimizer(model, self.recipe, device, graph=graph)
        # The recipe's schedule, a billion steps long: the learning rate stays at its peak.
        scheduler = make_schedule(optimizer, 0, 10**9, device, graph=graph)
        self.step = TrainStep(model, optimizer, scheduler, self.recipe.label_smoothing, device,
                              GRAPH_MODES[mode] if graph else (None if mode == "eager" else mode), graph=graph)
        self.chunk_batches = GRAPH_CHUNK_BATCHES if graph else 1
        self.generator = torch.Generator(device).manual_seed(0)

    def run(self, steps: int) -> None:
        """Queue ``steps`` training steps, their batches made as train.py makes them; nothing here waits for the
        device (but a CUDA graph's capture)."""
        order = torch.randint(0, len(self.images), (steps * self.batch_size,), device=self.device,
                              generator=self.generator)
        for _ in train_steps(self.step, self.images, self.labels, order, self.recipe, self.spec, self.generator,
                             self.batch_size, self.chunk_batches):
            pass

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


def host_syncs_in_a_step(dataset: str, device: torch.device, batch_size: int, mode: str) -> str:
    """Steps under torch.cuda's sync debug mode 'error' (after the warm-up, and a graph's capture): any host sync
    in them raises."""
    loop = Loop(dataset, device, batch_size, mode)
    loop.seconds(GRAPH_WARMUP_STEPS + 1)  # warmed up (and captured)
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
    parser.add_argument("--modes", nargs="+", default=None, choices=["eager", *COMPILE_MODES, *GRAPH_MODES],
                        help="eager, torch.compile modes and --graph-step's (default: eager default graph, plus "
                             "reduce-overhead on CUDA)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per row")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation included)")
    args = parser.parse_args()
    device = resolve_device(args.device)
    modes = args.modes or ["eager", "default", "graph"] + (["reduce-overhead"] if device.type == "cuda" else [])
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
        for mode in ("eager", *(mode for mode in modes if mode in GRAPH_MODES)):
            print(f"host syncs in a {mode} training step: "
                  f"{host_syncs_in_a_step(args.dataset, device, args.batch_size[0], mode)}")


if __name__ == "__main__":
    main()
