"""Accuracy of a model on a labelled set of uint8 images; shared by training and the CLI."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


@torch.no_grad()
def evaluate(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 500
) -> tuple[float, int, int]:
    """Return (summed cross-entropy loss, correct, count) over uint8 images (N, C, H, W)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    sums = torch.zeros(2, dtype=torch.float64, device=device)  # summed loss, correct: read once, at the end
    for start in range(0, len(images), batch_size):
        x = images[start : start + batch_size].to(device, non_blocking=True).float().div_(255)  # (B, C, H, W)
        y = labels[start : start + batch_size].to(device, non_blocking=True)  # (B,)
        logits = model(x)  # (B, classes)
        sums += torch.stack([F.cross_entropy(logits.float(), y, reduction="sum").double(),
                             (logits.argmax(dim=1) == y).sum().double()])
    model.train(was_training)
    loss_sum, correct = sums.tolist()
    return loss_sum, int(correct), len(images)
