"""Head importance (Michel, Levy & Neubig, 2019, "Are Sixteen Heads Really Better than One?"): a gate xi = 1
multiplies each head's output; a head's importance is the mean over images of |d loss / d xi|. The pruning curves
that test it remove heads most important first, against random orders. Measured over a dataset when the weights are
made, and kept in the weights folder (``HEAD_IMPORTANCE_FILE``) for the app, which has no dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from vit_demo.atomic import atomic_write_text
from vit_demo.interpret.heads.edits import Off, ablation, head_mask, model_input
from vit_demo.model import Edits, VisionTransformer
from vit_demo.weights import CONFIG_FILE, HEAD_IMPORTANCE_FILE, weights_sha256

RANDOM_ORDERS = 5  # seeded random orders the random pruning curve averages
IMPORTANCE_IMAGES = 1000  # test images the importance file is measured over


def head_importance(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor,
                    batch_size: int = 250) -> torch.Tensor:
    """Michel et al. (2019): a gate xi (= 1) on each head's output; importance = the mean over images of
    |d cross-entropy / d xi|, (L, H). One forward and backward pass per batch; the per-image gradients come from
    one gate per image and head."""
    c = model.config
    device = next(model.parameters()).device
    total = torch.zeros(c.depth, c.heads, dtype=torch.float64, device=device)
    for start in range(0, len(images), batch_size):
        x = model_input(model, images[start : start + batch_size])  # (B, C, H, W)
        y = labels[start : start + batch_size].to(device)
        gates = torch.ones(len(x), c.depth, c.heads, device=device, requires_grad=True)  # (B, L, H)
        with torch.enable_grad():
            logits = model.forward_activations(x, edits=Edits(gates=gates)).logits  # (B, classes)
            loss = F.cross_entropy(logits.float(), y, reduction="sum")  # image b's loss depends on its gates only
            (grad,) = torch.autograd.grad(loss, gates)  # (B, L, H)
        total += grad.abs().sum(0).double()
    return (total / len(images)).float().cpu()


@torch.no_grad()
def accuracy(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor, off: Off = (),
             means: torch.Tensor | None = None, batch_size: int = 500) -> float:
    """Accuracy on ``images`` with the heads in ``off`` ablated (to ``means``, or zeros where None)."""
    mask = head_mask(model, off)
    correct = 0
    for start in range(0, len(images), batch_size):
        x = images[start : start + batch_size]
        if mask.any():
            edits = ablation(model, mask, means, len(x))
            logits = model.forward_activations(model_input(model, x), edits=edits).logits  # (B, classes)
        else:
            logits = model(model_input(model, x))  # (B, classes): the plain fast path
        correct += int((logits.argmax(-1).cpu() == labels[start : start + batch_size]).sum())
    return correct / len(images)


class _Accuracies:
    """Accuracy with a set of heads switched off (a mask (L, H)), each set measured once."""

    def __init__(self, model, images, labels, means, batch_size) -> None:
        self.args = model, images, labels
        self.means, self.batch_size = means, batch_size
        self.seen: dict[bytes, float] = {}

    def __call__(self, mask: torch.Tensor) -> float:
        key = mask.numpy().tobytes()
        if key not in self.seen:
            self.seen[key] = accuracy(*self.args, mask, self.means, self.batch_size)
        return self.seen[key]

    def curve(self, order: torch.Tensor, shape: tuple[int, int]) -> list[float]:
        """Accuracy after switching off 0, 1, ..., L * H heads in ``order`` (flat indices, layer-major)."""
        mask = torch.zeros(shape, dtype=torch.bool)
        curve = [self(mask)]
        for index in order.tolist():
            mask.view(-1)[index] = True
            curve.append(self(mask))
        return curve

    def pruning_curves(self, importance: torch.Tensor, seeds: int) -> dict[str, list[float]]:
        shape = tuple(importance.shape)
        randoms = [self.curve(torch.randperm(importance.numel(), generator=torch.Generator().manual_seed(seed)), shape)
                   for seed in range(seeds)]
        return {"importance": self.curve(importance.flatten().argsort(descending=True, stable=True), shape),
                "random": [sum(values) / seeds for values in zip(*randoms)]}


def pruning_curves(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor, importance: torch.Tensor,
                   means: torch.Tensor | None = None, seeds: int = RANDOM_ORDERS,
                   batch_size: int = 500) -> dict[str, list[float]]:
    """The pruning curves that test an importance score (L, H): the accuracy after switching off 0, 1, ..., L * H
    heads (ablated to ``means``, or zeros where None), most important first (``importance``), and the mean over
    ``seeds`` seeded random orders (``random``)."""
    return _Accuracies(model, images, labels, means, batch_size).pruning_curves(importance, seeds)


def heads_report(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor,
                 means: torch.Tensor | None = None, batch_size: int = 500, seeds: int = RANDOM_ORDERS) -> dict:
    """Everything ``python -m vit_demo heads`` prints: ``baseline`` accuracy, ``accuracy`` (L, H) with each head
    alone ablated, ``importance`` (L, H), and the pruning ``curves``."""
    c = model.config
    measure = _Accuracies(model, images, labels, means, batch_size)
    alone = torch.tensor([[measure(head_mask(model, [(layer, head)])) for head in range(c.heads)]
                          for layer in range(c.depth)], dtype=torch.float64)  # (L, H)
    importance = head_importance(model, images, labels, min(batch_size, 250))  # (L, H)
    return {"baseline": measure(torch.zeros(c.depth, c.heads, dtype=torch.bool)), "accuracy": alone,
            "importance": importance, "curves": measure.pruning_curves(importance, seeds)}


def write_head_importance(folder: str | Path, model: VisionTransformer, images: torch.Tensor,
                          labels: torch.Tensor, means: torch.Tensor | None = None, split: str = "test",
                          batch_size: int = 500) -> dict:
    """Measure ``heads_report`` over ``images`` (uint8 (N, C, H, W) of ``split``) and keep it in the weights folder as
    ``HEAD_IMPORTANCE_FILE``, with the checksum of the weights it belongs to, so that the app never computes it per
    request (the app has no dataset). ``means``: mean-ablation's (None: zero-ablation). Returns what was written."""
    folder = Path(folder)
    report = heads_report(model, images, labels, means, batch_size)
    record = {
        "weights_sha256": weights_sha256(folder), "split": split, "images": len(images),
        "ablation": "zero" if means is None else "mean", "random_orders": RANDOM_ORDERS,
        "baseline": round(report["baseline"], 6),
        "accuracy": [[round(float(v), 6) for v in row] for row in report["accuracy"].tolist()],
        "importance": [[float(f"{v:.6g}") for v in row] for row in report["importance"].tolist()],
        "curves": {order: [round(v, 6) for v in curve] for order, curve in report["curves"].items()},
        "note": "per layer (rows) and head, 0-based: accuracy with that head alone ablated; importance = mean "
                "|d cross-entropy / d gate| (Michel et al., 2019); curves: accuracy after ablating 0, 1, ..., L*H "
                "heads, most important first, and the mean of the random orders",
    }
    lines = ",\n".join(f"  {json.dumps(name)}: {json.dumps(value)}" for name, value in record.items())  # a line each
    atomic_write_text(folder / HEAD_IMPORTANCE_FILE, "{\n" + lines + "\n}\n")
    return record


def read_head_importance(folder: str | Path) -> dict | None:
    """The record ``write_head_importance`` kept in a weights folder; None where there is none, or where it belongs
    to other weights (its checksum differs from the folder's config's) or can't be read."""
    folder = Path(folder)
    try:
        record = json.loads((folder / HEAD_IMPORTANCE_FILE).read_text(encoding="utf-8"))
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        # Checked with numpy, not torch: the app reads it while it is built, where ZeroGPU's spaces package has
        # patched torch (a tensor's .shape there is a plain tuple).
        shape = np.shape(record["importance"])
        if record["weights_sha256"] != config.get("weights_sha256") or np.shape(record["accuracy"]) != shape:
            return None
        if len(shape) != 2 or any(len(record["curves"][order]) != shape[0] * shape[1] + 1
                                  for order in ("importance", "random")):
            return None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return record
