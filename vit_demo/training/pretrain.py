"""Self-supervised pretraining, ``train.py --pretrain mae``: a masked autoencoder (vit_demo/training/mae.py) learns
from the training images alone, no labels, and leaves an encoder that ``train.py --init-from`` fine-tunes.

The loop is the supervised one's, from vit_demo/training/loop.py: the same data (the calibration hold-out is left
out here too, so that it stays unseen until the fine-tuned model is calibrated on it), the same per-epoch seeding, so
that ``--resume`` continues exactly, the same checkpoints, snapshots, optimiser (AdamW, warmup and cosine) and step
(``--compile`` included). Each epoch ends with the reconstruction loss on 2,000 test images under fixed masks, and the
run with a linear probe of the encoder's features, against the same probe on the encoder as initialised.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save as save_safetensors
from torch import nn
from tqdm import tqdm

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.data.augment import AUGMENTATIONS
from vit_demo.data.datasets import dataset_spec, spread
from vit_demo.device import device_name
from vit_demo.model import VisionTransformer
from vit_demo.pictures.figures import reconstruction_figure
from vit_demo.training.evaluation import linear_probe
from vit_demo.training.loop import CHECKPOINT_FILE, epoch_draws, resume_from, subset, training_data, write_checkpoint
from vit_demo.training.mae import MaskedAutoencoder
from vit_demo.training.options import pretrain_recipe_from_args
from vit_demo.training.step import TrainStep, make_optimizer, make_schedule
from vit_demo.weights import (MAE_DECODER_FILE, METRICS_FILE, RECONSTRUCTIONS_FILE, save_snapshot, save_weights,
                              snapshot_epochs, update_config, write_snapshot_index)

SHOWN_IMAGES = 8  # test images in reconstructions.png
PROBE_IMAGES = 10_000  # training images the linear probe at the end of a run fits on (at most)
EVAL_IMAGES = 2_000  # test images whose reconstruction loss is measured after every epoch (at most)


class MAEStep(TrainStep):
    """The training step for the MAE: the batch's second tensor is the masking noise (B, N), not targets; there is no
    accuracy to count (its sums stay 0)."""

    def __init__(self, mae: nn.Module, optimizer: torch.optim.Optimizer, scheduler, device: torch.device,
                 compile_mode: str | None = None, graph: bool = False) -> None:
        super().__init__(mae, optimizer, scheduler, 0.0, device, compile_mode, graph)

    def _loss(self, x: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            loss, _, _ = self.model(x, noise)  # the loss is computed in fp32 (MaskedAutoencoder.forward)
        none = torch.zeros((), device=x.device)
        return loss.float(), none, none


def masking_noise(images: int, patches: int, seed: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Fixed masks for evaluation: noise (images, patches) from ``seed``, the same on every device."""
    return torch.rand(images, patches, generator=torch.Generator().manual_seed(seed)).to(device)


@torch.no_grad()
def reconstruction_loss(mae: MaskedAutoencoder, images: torch.Tensor, seed: int, batch_size: int = 500) -> float:
    """The MAE's loss on uint8 images (N, C, H, W), each under a mask drawn from ``seed``: the same masks every epoch,
    so that the numbers of different epochs compare."""
    device = next(mae.parameters()).device
    noise = masking_noise(len(images), mae.encoder.config.grid_size**2, seed, device)  # (N, patches)
    was_training = mae.training
    mae.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    for start in range(0, len(images), batch_size):
        x = images[start : start + batch_size].to(device).float().div_(255)  # (B, C, H, W)
        loss, _, _ = mae(x, noise[start : start + batch_size])
        total += loss.double() * len(x)  # every image hides as many patches: the mean of means is the mean
    mae.train(was_training)
    return total.item() / max(1, len(images))


def reconstructions(mae: MaskedAutoencoder, images: torch.Tensor, seed: int, title: str):
    """The picture of what the MAE fills in on uint8 images (N, C, H, W), under the evaluation's fixed masks."""
    device = next(mae.parameters()).device
    was_training = mae.training
    mae.eval()
    x = images.to(device).float().div(255)  # (N, C, H, W)
    filled, hidden = mae.reconstruct(x, masking_noise(len(x), mae.encoder.config.grid_size**2, seed, device))
    mae.train(was_training)
    as_numpy = [t.permute(0, 2, 3, 1).float().cpu().numpy() for t in (x, hidden, filled)]  # each (N, H, W, C)
    return reconstruction_figure(*as_numpy, title)


def pretrain(args: argparse.Namespace, command: str, device: torch.device, world_size: int) -> dict:
    """Pretrain as ``args`` says (``train.py --pretrain mae ...``); write the encoder as a weights folder in --out
    (``config.json`` with a ``pretrained`` record, ``model.safetensors``), the decoder beside it, snapshots of the
    whole MAE and ``metrics.json``. Returns the metrics."""
    if world_size > 1:
        raise SystemExit("--pretrain runs in one process: start it with python, not torchrun")
    recipe, vit = pretrain_recipe_from_args(args)  # (first: it refuses a dataset without a pretraining recipe)
    spec = dataset_spec(args.dataset)
    name = f"{spec.name}-{args.pretrain}"
    out = args.out or Path("runs") / name
    checkpoint_path = (args.checkpoint_dir or Path("runs") / f"{name}-checkpoint") / CHECKPOINT_FILE

    (train_x, train_y), (test_x, test_y), _, _ = training_data(args, spec, device)
    eval_x = subset(test_x, test_y, EVAL_IMAGES, args.seed + 4)[0]  # a random share: the split is sorted by class
    batch = max(1, min(recipe.batch_size, len(train_x)))
    steps_per_epoch = len(train_x) // batch  # full batches only, as in supervised training
    torch.manual_seed(args.seed)
    encoder = VisionTransformer(vit)
    mae = MaskedAutoencoder(encoder, recipe.mask_ratio, recipe.decoder_dim, recipe.decoder_depth,
                            recipe.decoder_heads).to(device)
    patches = vit.grid_size**2
    optimizer = make_optimizer(mae, recipe, device, graph=args.graph_step)
    warmup_steps, total_steps = round(recipe.warmup_epochs * steps_per_epoch), recipe.epochs * steps_per_epoch
    scheduler = make_schedule(optimizer, warmup_steps, total_steps, device, graph=args.graph_step)
    settings = {k: v for k, v in dataclasses.asdict(recipe).items() if k.startswith(("mask", "decoder"))}
    identity = {"dataset": spec.name, "vit": vit.to_dict(), "pretrain": {"method": args.pretrain, **settings}}
    start_epoch, history, elapsed_before = 0, [], 0.0
    if args.resume:
        start_epoch, history, elapsed_before = resume_from(checkpoint_path, device, identity, args.graph_step, mae,
                                                           optimizer, scheduler)
    step = MAEStep(mae, optimizer, scheduler, device, args.compile, graph=args.graph_step)
    refresh_every = max(1, steps_per_epoch // 10)
    snapshots = snapshot_epochs(recipe.epochs, args.snapshots)
    print(f"pretraining ({args.pretrain}, mask ratio {recipe.mask_ratio}) on {spec.name}: "
          f"{sum(p.numel() for p in encoder.parameters()):,} encoder and "
          f"{sum(p.numel() for p in mae.decoder.parameters()):,} decoder parameters, {len(train_x):,} train / "
          f"{len(test_x):,} test images, device {device}", file=sys.stderr)

    started = time.perf_counter()
    for epoch in range(start_epoch, recipe.epochs):
        generator, order = epoch_draws(args.seed, epoch, 0, train_x.device, len(train_x))
        mae.train()
        step.sums.zero_()
        epoch_started = time.perf_counter()
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{recipe.epochs}", disable=args.no_progress,
                   leave=False, file=sys.stderr)
        for i in bar:
            idx = order[i * batch : (i + 1) * batch]
            x = AUGMENTATIONS[spec.recipe](train_x[idx].float().div_(255), generator)  # (B, C, H, W), crop and flip
            step(x, torch.rand(len(idx), patches, generator=generator, device=train_x.device))  # noise (B, N)
            if not bar.disable and (i + 1) % refresh_every == 0:
                bar.set_postfix(loss=f"{step.sums[0].item() / ((i + 1) * batch):.4f}")
        bar.close()
        loss_sum = step.sums[0].item()  # waits for the epoch's last step
        train_seconds = time.perf_counter() - epoch_started
        history.append({
            "epoch": epoch + 1,
            "train_loss": loss_sum / (steps_per_epoch * batch),
            "test_loss": reconstruction_loss(mae, eval_x, args.seed),
            "lr": scheduler.get_last_lr()[0],
            "train_images_per_second": round(steps_per_epoch * batch / train_seconds, 1),
        })
        h = history[-1]
        print(f"epoch {epoch + 1}/{recipe.epochs}: train loss {h['train_loss']:.4f} | test loss {h['test_loss']:.4f}"
              f" | {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
        if epoch + 1 in snapshots:  # before the checkpoint: a run resumed after it never lacks the snapshot
            save_snapshot(out, mae, epoch + 1)
        write_checkpoint(checkpoint_path, identity, args.graph_step, history,
                         elapsed_before + time.perf_counter() - started, mae, optimizer, scheduler)

    wall = elapsed_before + time.perf_counter() - started
    save_weights(out, encoder, spec)
    blob = save_safetensors({k: v.detach().cpu().contiguous() for k, v in mae.decoder.state_dict().items()})
    atomic_write(out / MAE_DECODER_FILE, lambda f: f.write(blob))
    update_config(out, pretrained={**identity["pretrain"], "epochs": recipe.epochs,
                                   "note": "an encoder for train.py --init-from; its head is untrained"})
    if snapshots:
        write_snapshot_index(out, history, measure="test_loss")
    shown = spread(SHOWN_IMAGES, len(eval_x))
    picture = reconstructions(mae, eval_x[shown.to(eval_x.device)], args.seed + 5, f"MAE after {recipe.epochs} "
                              f"epoch{'s' * (recipe.epochs != 1)}: {recipe.mask_ratio:.0%} of the patches hidden")
    atomic_write(out / RECONSTRUCTIONS_FILE, lambda f: picture.save(f, format="png"))
    # What the pretraining bought: a linear probe on the encoder's features, and on the same encoder as initialised.
    probe_train = subset(train_x, train_y, PROBE_IMAGES, args.seed + 3)
    torch.manual_seed(args.seed)
    initial = VisionTransformer(vit).to(device)  # the run's encoder before training: the same seed, the same draws
    probe = {"pretrained": linear_probe(encoder, probe_train, (test_x, test_y)),
             "random_init": linear_probe(initial, probe_train, (test_x, test_y)),
             "train_images": len(probe_train[0]), "test_images": len(test_x)}
    metrics = {
        "dataset": spec.name,
        "pretrain": args.pretrain,
        "test_loss": history[-1]["test_loss"] if history else None,
        "test_loss_images": len(eval_x),
        "linear_probe": probe,
        "train_images": len(train_x),
        "epochs": recipe.epochs,
        "wall_time_s": round(wall, 1),
        "seconds_per_epoch": round(wall / max(1, recipe.epochs), 1),
        "train_images_per_second": history[-1]["train_images_per_second"] if history else None,
        "device": str(device),
        "device_name": device_name(device),
        "encoder_parameters": sum(p.numel() for p in encoder.parameters()),
        "decoder_parameters": sum(p.numel() for p in mae.decoder.parameters()),
        "recipe": dataclasses.asdict(recipe),
        "seed": args.seed,
        "torch": torch.__version__,
        "command": command,
        "history": history,
    }
    atomic_write_text(out / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
    print(json.dumps({k: metrics[k] for k in ("dataset", "pretrain", "test_loss", "linear_probe", "epochs",
                                              "wall_time_s")}))
    return metrics
