"""Running the model with its heads and its residual stream in hand: one forward pass with edits (a head's output
replaced or gated, the residual stream after a block replaced at some tokens), and every head's output and residual
stream captured on the way.

Everything runs through forward hooks on the model's own modules, registered for one call and acting only on the
thread that registered them: the model's plain forward pass is untouched, and as fast as before. Layers and heads
are 0-based (the command line shows them 1-based). Images are (B, C, H, W), floats in [0, 1] or uint8.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterable, Iterator

import torch

from vit_demo.model import VisionTransformer

# What to switch off: (layer, head) pairs, 0-based, where head None means every head of that layer; or a bool
# mask, (L, H) for the whole batch or (B, L, H) per image.
Off = Iterable[tuple[int, int | None]] | torch.Tensor


@dataclasses.dataclass
class Edits:
    """What to change in one forward pass of B images (each mask may also have a leading 1, for the whole batch).

    Heads are replaced where ``head_mask`` is set, by ``head_values``; the gates multiply every head's output; the
    residual stream after block l, at token t, is replaced where ``resid_mask`` is set, by ``resid_values``.
    """

    head_mask: torch.Tensor | None = None  # (B, L, H) bool
    head_values: torch.Tensor | None = None  # (B, L, H, T, Dh), or (L, H, T, Dh) for every image
    gates: torch.Tensor | None = None  # (B, L, H) float
    resid_mask: torch.Tensor | None = None  # (B, L, T) bool
    resid_values: torch.Tensor | None = None  # (B, L, T, D), or (L, T, D) for every image


@dataclasses.dataclass(frozen=True)
class Run:
    logits: torch.Tensor  # (B, classes)
    heads: torch.Tensor | None = None  # (B, L, H, T, Dh): each head's output, as used (after any edit)
    resid: torch.Tensor | None = None  # (B, L, T, D): the residual stream after each block, as used
    embedded: torch.Tensor | None = None  # (B, T, D): the residual stream entering the first block
    attention: torch.Tensor | None = None  # (B, L, H, T, T): every layer's and head's attention weights


def model_input(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) uint8 or [0, 1] floats -> floats in [0, 1] on the model's device."""
    device = next(model.parameters()).device
    if images.dtype == torch.uint8:
        return images.to(device).float().div_(255)
    return images.to(device=device, dtype=torch.float32)


@contextlib.contextmanager
def edited(model: VisionTransformer, edits: Edits, capture: bool) -> Iterator[tuple[list, list, list]]:
    """Hooks on each block's output projection (its input is the heads' outputs side by side) and on each block's
    output (the residual stream), for the length of the ``with``; they act only on this thread, so a plain forward
    pass on another thread meanwhile is left alone. Yields the lists the captured heads, residuals and the stream
    entering the first block go to."""
    owner = threading.get_ident()
    heads_seen: list[torch.Tensor] = []
    resid_seen: list[torch.Tensor] = []
    embedded: list[torch.Tensor] = []
    H, Dh = model.config.heads, model.config.dim // model.config.heads
    head_values = edits.head_values
    if head_values is not None and head_values.ndim == 4:
        head_values = head_values[None]  # (1, L, H, T, Dh)
    resid_values = edits.resid_values
    if resid_values is not None and resid_values.ndim == 3:
        resid_values = resid_values[None]  # (1, L, T, D)

    def on_heads(layer: int):
        def hook(module, args):
            if threading.get_ident() != owner:
                return None
            z = args[0]  # (B, T, H * Dh): head h is the slice h * Dh : (h + 1) * Dh
            B, T, _ = z.shape
            z = z.view(B, T, H, Dh)  # (B, T, H, Dh)
            if edits.gates is not None:
                z = z * edits.gates[:, layer, None, :, None]  # (B, T, H, Dh)
            if edits.head_mask is not None:
                values = head_values[:, layer].transpose(1, 2)  # (B or 1, T, H, Dh)
                z = torch.where(edits.head_mask[:, layer, None, :, None], values, z)  # (B, T, H, Dh)
            if capture:
                heads_seen.append(z.transpose(1, 2))  # (B, H, T, Dh)
            return (z.reshape(B, T, H * Dh),)
        return hook

    def on_block(layer: int):
        def hook(module, args, output):
            if threading.get_ident() != owner:
                return None
            x, attention = output  # (B, T, D)
            if edits.resid_mask is not None:
                x = torch.where(edits.resid_mask[:, layer, :, None], resid_values[:, layer], x)  # (B, T, D)
            if capture:
                resid_seen.append(x)
            return x, attention
        return hook

    def on_embedded(module, args):
        if threading.get_ident() == owner:
            embedded.append(args[0])  # (B, T, D)

    handles = []
    try:
        if capture:
            handles.append(model.blocks[0].register_forward_pre_hook(on_embedded))
        for layer, block in enumerate(model.blocks):
            if capture or edits.gates is not None or edits.head_mask is not None:
                handles.append(block.attn.proj.register_forward_pre_hook(on_heads(layer)))
            if capture or edits.resid_mask is not None:
                handles.append(block.register_forward_hook(on_block(layer)))
        yield heads_seen, resid_seen, embedded
    finally:
        for handle in handles:
            handle.remove()


def run(model: VisionTransformer, images: torch.Tensor, edits: Edits | None = None, capture: bool = False,
        attention: bool = False) -> Run:
    """One forward pass of ``images`` (B, C, H, W) with ``edits`` applied; with ``capture``, also every head's
    output and the residual stream after every block; with ``attention``, every layer's attention weights (as the
    edits leave them: an edit in layer l changes the attention of the layers after it). Runs under the caller's
    grad mode."""
    x = model_input(model, images)
    weights = None
    with edited(model, edits or Edits(), capture) as (heads_seen, resid_seen, embedded):
        if attention:
            logits, weights = model(x, return_attention=True)  # (B, classes), (B, L, H, T, T)
        else:
            logits = model(x)  # (B, classes)
    if not capture:
        return Run(logits, attention=weights)
    return Run(logits, torch.stack(heads_seen, 1), torch.stack(resid_seen, 1), embedded[0], weights)


def head_mask(model: VisionTransformer, off: Off) -> torch.Tensor:
    """Which heads are off, as a bool mask (L, H), or (B, L, H) where ``off`` is given per image.

    ``off``: (layer, head) pairs, 0-based, where head None is every head of the layer; or a bool mask already.
    """
    L, H = model.config.depth, model.config.heads
    if isinstance(off, torch.Tensor):
        if off.shape[-2:] != (L, H) or off.ndim not in (2, 3):
            raise ValueError(f"a head mask must be (L, H) or (B, L, H) with L, H = {L}, {H}; got {tuple(off.shape)}")
        return off.bool()
    mask = torch.zeros(L, H, dtype=torch.bool)
    for layer, head in off:
        if not 0 <= layer < L or (head is not None and not 0 <= head < H):
            raise ValueError(f"no head ({layer}, {head}): layers are 0 to {L - 1}, heads 0 to {H - 1}")
        mask[layer, slice(None) if head is None else head] = True
    return mask


@contextlib.contextmanager
def switched_off(model: VisionTransformer, off: Off, means: torch.Tensor | None = None) -> Iterator[None]:
    """For the length of the ``with``, on this thread alone, every forward pass of ``model``, whatever its batch, runs
    with the heads in ``off`` ((layer, head) pairs or an (L, H) mask) replaced by ``means`` (L, H, T, Dh)
    (mean-ablation), or by zeros where ``means`` is None: its attention, its logits and gradients through it (a
    head switched off passes none back) are the ablated model's."""
    mask = head_mask(model, off)
    if mask.ndim != 2:
        raise ValueError("switched_off takes one (L, H) mask for every image")
    with edited(model, ablation(model, mask[None], means, 1), capture=False):
        yield


def ablation(model: VisionTransformer, mask: torch.Tensor, means: torch.Tensor | None, batch: int) -> Edits:
    """Edits that replace the heads in ``mask`` ((L, H) or (batch, L, H)) by ``means`` (L, H, T, Dh), or by
    zeros where ``means`` is None."""
    device = next(model.parameters()).device
    c = model.config
    if means is None:
        means = torch.zeros(c.depth, c.heads, c.num_tokens, c.dim // c.heads)  # zero-ablation
    mask = mask.to(device)
    return Edits(head_mask=mask.expand(batch, -1, -1) if mask.ndim == 2 else mask,
                 head_values=means.to(device=device, dtype=torch.float32))
