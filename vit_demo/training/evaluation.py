"""Accuracy of a model on a labelled set of uint8 images, shared by training and the CLI; and a linear probe of an
encoder's features, which measures what self-supervised pretraining (train.py --pretrain) learnt."""

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


@torch.no_grad()
def encoder_features(model: nn.Module, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """What a linear probe reads from a VisionTransformer: uint8 images (N, C, H, W) -> (N, D), the mean of the patch
    tokens after the last block and the final norm (``forward_features``); [CLS] is left out: an MAE trains it only
    through its decoder."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(images), batch_size):
        x = images[start : start + batch_size].to(device).float().div_(255)  # (B, C, H, W)
        out.append(model.forward_features(x)[:, 1:].mean(1).float())  # (B, T, D) -> (B, D)
    model.train(was_training)
    return torch.cat(out)


def linear_probe(model: nn.Module, train: tuple[torch.Tensor, torch.Tensor], test: tuple[torch.Tensor, torch.Tensor],
                 weight_decay: float = 1e-3, steps: int = 300) -> float:
    """Test accuracy of a logistic regression on a frozen encoder's features (``encoder_features``), each feature
    standardised on the training images, fitted by L-BFGS on the whole training set (uint8 images, int labels)."""
    x_train, x_test = encoder_features(model, train[0]), encoder_features(model, test[0])  # (N, D), (M, D)
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    y_train, y_test = train[1].to(x_train.device), test[1].to(x_train.device)
    classes = int(max(y_train.max(), y_test.max())) + 1
    with torch.enable_grad():
        linear = nn.Linear(x_train.shape[1], classes).to(x_train.device)
        optimizer = torch.optim.LBFGS(linear.parameters(), lr=1, max_iter=steps, history_size=20,
                                      line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = F.cross_entropy(linear(x_train), y_train) + weight_decay * linear.weight.pow(2).sum()
            loss.backward()
            return loss

        optimizer.step(closure)
    with torch.no_grad():
        return (linear(x_test).argmax(1) == y_test).float().mean().item()
