"""``train.py``: its arguments read, the processes set up (one, or several under ``torchrun`` with DDP), and the run
they ask for: supervised training (``loop``) or self-supervised pretraining (``pretrain``, with ``--pretrain``)."""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys

import torch
import torch.distributed as dist

from vit_demo.device import resolve_device
from vit_demo.training.loop import supervised
from vit_demo.training.options import PRETRAIN_FLAGS, build_parser
from vit_demo.training.pretrain import pretrain


def main(argv: list[str] | None = None) -> dict | None:
    """Parse ``train.py`` arguments and train; return the metrics on rank 0 (None on other ranks)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.pretrain and any(getattr(args, k) is not None for k in PRETRAIN_FLAGS):
        parser.error(f"{', '.join('--' + k.replace('_', '-') for k in PRETRAIN_FLAGS)} go with --pretrain")
    return train(args, command=shlex.join(["python", "train.py", *argv]))


def graph_step_fits(world_size: int, compile_mode: str | None) -> bool:
    """Whether the whole step can be one CUDA graph: one process, its --compile mode making no CUDA graphs of its
    own."""
    return world_size == 1 and compile_mode in (None, "default")


def graph_step_by_default(device: torch.device, world_size: int, compile_mode: str | None) -> bool:
    """Whether a run that names neither --graph-step nor --no-graph-step takes the whole step in one CUDA graph:
    wherever it fits on CUDA (the shipped photo model's run)."""
    return device.type == "cuda" and graph_step_fits(world_size, compile_mode)


def train(args: argparse.Namespace, command: str = "") -> dict | None:
    """Train as ``args`` says; ``command`` is recorded in metrics.json. Returns the metrics on rank 0."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = resolve_device(args.device)
    if args.graph_step is None:
        args.graph_step = graph_step_by_default(device, world_size, args.compile)
    if args.graph_step and not graph_step_fits(world_size, args.compile):
        raise SystemExit("--graph-step: one process only, and --compile in its default mode only (the others make "
                         "CUDA graphs of their own)")
    if world_size > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        if args.pretrain:
            return pretrain(args, command, device, world_size)
        return supervised(args, command, device, rank, world_size)
    finally:
        if dist.is_initialized():
            # The DDP wrapper, and with it its reducer's hold on the process group, lives in a reference cycle: freed
            # later by the garbage collector, at worst while the interpreter shuts down, after the group is gone. A
            # CPU run's second process once died there ("terminate called without an active exception"). Free it
            # now, while everything it holds is still there.
            gc.collect()
            dist.destroy_process_group()
