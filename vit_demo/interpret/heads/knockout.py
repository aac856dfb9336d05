"""Knockout (ablation): a head's output, the attention-weighted values of that head before the output projection
(TransformerLens's ``hook_z``), is replaced at every token, by its mean over training images at that token
(mean-ablation, the default) or by zeros (zero-ablation). The change is read as a logit difference, the predicted
class against the runner-up, not only as a probability: Heimersheim & Nanda (2024), "How to use and interpret
activation patching".

The head means are computed once, when the weights are made, and kept in the weights folder with the checksum of the
weights they belong to (``HEAD_MEANS_FILE``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as save_safetensors

from vit_demo.atomic import atomic_write
from vit_demo.data.datasets import spread
from vit_demo.interpret.heads.edits import Off, ablation, head_mask, model_input
from vit_demo.model import VisionTransformer
from vit_demo.weights import CONFIG_FILE, HEAD_MEANS_FILE, weights_sha256

MEAN_IMAGES = 1000  # training images the means are taken over


@torch.no_grad()
def head_means(model: VisionTransformer, images: torch.Tensor, batch_size: int = 250) -> torch.Tensor:
    """Each head's mean output at each token over ``images`` (N, C, H, W): (L, H, T, Dh), float32."""
    total = None
    for start in range(0, len(images), batch_size):
        x = model_input(model, images[start : start + batch_size])  # (B, C, H, W)
        heads = model.forward_activations(x, stream=True).heads  # (B, L, H, T, Dh)
        total = heads.double().sum(0) if total is None else total + heads.double().sum(0)  # (L, H, T, Dh)
    return (total / len(images)).float().cpu()


def mean_sample(images: torch.Tensor) -> torch.Tensor:
    """The images head means are taken over: ``MEAN_IMAGES`` of a training split (N, C, H, W), spread evenly."""
    return images[spread(MEAN_IMAGES, len(images))]


def write_head_means(folder: str | Path, model: VisionTransformer, images: torch.Tensor,
                     split: str = "train") -> torch.Tensor:
    """Compute the head means over ``images`` (uint8 (N, C, H, W), the preprocessing evaluation uses) and keep them
    in the weights folder as fp16, with the checksum of the weights they belong to. Returns them (L, H, T, Dh),
    as read back (rounded to fp16)."""
    folder = Path(folder)
    means = head_means(model, images).half()  # (L, H, T, Dh)
    blob = save_safetensors({"means": means.contiguous()},
                            metadata={"weights_sha256": weights_sha256(folder), "split": split,
                                      "images": str(len(images))})
    atomic_write(folder / HEAD_MEANS_FILE, lambda f: f.write(blob))
    return means.float()


def read_head_means(folder: str | Path, model: VisionTransformer | None = None) -> torch.Tensor | None:
    """The head means kept in a weights folder, (L, H, T, Dh) float32; None where there are none, or where they
    belong to other weights (their checksum differs) or, given ``model``, to another shape of model."""
    folder = Path(folder)
    try:
        with safe_open(folder / HEAD_MEANS_FILE, "pt") as f:
            metadata = f.metadata() or {}
            means = f.get_tensor("means").float()
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, SafetensorError):
        return None
    if metadata.get("weights_sha256") != config.get("weights_sha256"):
        return None
    if model is not None:
        c = model.config
        if tuple(means.shape) != (c.depth, c.heads, c.num_tokens, c.dim // c.heads):
            return None
    return means


@torch.no_grad()
def ablated_logits(model: VisionTransformer, images: torch.Tensor, off: Off,
                   means: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (B, classes) with the heads in ``off`` switched off: mean-ablated to ``means`` (L, H, T, Dh), or
    zero-ablated where ``means`` is None. One forward pass."""
    edits = ablation(model, head_mask(model, off), means, len(images))
    return model.forward_activations(model_input(model, images), edits=edits).logits


def top_two(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The predicted class and the runner-up of each row of (B, classes): two (B,) long tensors."""
    top = logits.topk(2, dim=-1).indices  # (B, 2)
    return top[:, 0], top[:, 1]


def logit_difference(logits: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """logit[a] - logit[b] per row of (B, classes), for class indices a, b (B,): (B,)."""
    return logits.gather(1, a[:, None])[:, 0] - logits.gather(1, b[:, None])[:, 0]


@dataclasses.dataclass(frozen=True)
class Knockout:
    """The model with and without some heads, for the same images; logit differences are of the class the intact
    model predicts against its runner-up."""

    logits: torch.Tensor  # (B, classes): intact
    ablated: torch.Tensor  # (B, classes): with the heads off
    predicted: torch.Tensor  # (B,) long: the intact model's class
    runner_up: torch.Tensor  # (B,) long: its second choice
    attention: torch.Tensor | None = None  # (B, L, H, T, T): the intact model's attention, where asked for
    ablated_attention: torch.Tensor | None = None  # (B, L, H, T, T): the ablated model's

    @property
    def logit_diff(self) -> torch.Tensor:
        return logit_difference(self.logits, self.predicted, self.runner_up)  # (B,)

    @property
    def ablated_logit_diff(self) -> torch.Tensor:
        return logit_difference(self.ablated, self.predicted, self.runner_up)  # (B,)


@torch.no_grad()
def knockout(model: VisionTransformer, images: torch.Tensor, off: Off,
             means: torch.Tensor | None = None, attention: bool = False) -> Knockout:
    """The intact and the ablated model on ``images`` (B, C, H, W), in one batched forward pass of 2B images; with
    ``attention``, the attention weights of both too (from the same pass)."""
    mask = head_mask(model, off)
    B = len(images)
    mask = mask.expand(B, -1, -1) if mask.ndim == 2 else mask  # (B, L, H)
    both = torch.cat([torch.zeros_like(mask), mask])  # (2B, L, H): the first B rows intact
    x = model_input(model, torch.cat([images, images]))  # (2B, C, H, W)
    result = model.forward_activations(x, attention=attention, edits=ablation(model, both, means, 2 * B))
    logits = result.logits  # (2B, classes)
    weights = result.attention if attention else None  # (2B, L, H, T, T)
    predicted, runner_up = top_two(logits[:B])
    if weights is None:
        return Knockout(logits[:B], logits[B:], predicted, runner_up)
    return Knockout(logits[:B], logits[B:], predicted, runner_up, weights[:B], weights[B:])
