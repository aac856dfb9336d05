"""Which heads to switch off, as the model's own edits (``vit_demo.model.Edits``), and a switch that applies them to
every forward pass for a while.

Layers and heads are 0-based (the command line shows them 1-based). Images are (B, C, H, W), floats in [0, 1] or
uint8.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

import torch

from vit_demo.model import Edits, VisionTransformer

# What to switch off: (layer, head) pairs, 0-based, where head None means every head of that layer; or a bool
# mask, (L, H) for the whole batch or (B, L, H) per image.
Off = Iterable[tuple[int, int | None]] | torch.Tensor


def model_input(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) uint8 or [0, 1] floats -> floats in [0, 1] on the model's device."""
    device = next(model.parameters()).device
    if images.dtype == torch.uint8:
        return images.to(device).float().div_(255)
    return images.to(device=device, dtype=torch.float32)


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


def ablation(model: VisionTransformer, mask: torch.Tensor, means: torch.Tensor | None, batch: int) -> Edits:
    """Edits that replace the heads in ``mask`` ((L, H) or (batch, L, H)) by ``means`` (L, H, T, Dh), or by
    zeros where ``means`` is None."""
    device = next(model.parameters()).device
    c = model.config
    if means is None:
        means = torch.zeros(c.depth, c.heads, c.num_tokens, c.dim // c.heads)  # zero-ablation
    mask = mask.to(device)
    return Edits(head_mask=mask.expand(batch, -1, -1) if mask.ndim == 2 else mask,  # (batch, L, H)
                 head_values=means.to(device=device, dtype=torch.float32)[None])  # (1, L, H, T, Dh)


@contextlib.contextmanager
def switched_off(model: VisionTransformer, off: Off, means: torch.Tensor | None = None) -> Iterator[None]:
    """For the length of the ``with``, on this thread alone, every forward pass of ``model``, whatever its batch, runs
    with the heads in ``off`` ((layer, head) pairs or an (L, H) mask) replaced by ``means`` (L, H, T, Dh)
    (mean-ablation), or by zeros where ``means`` is None: its attention, its logits and gradients through it (a
    head switched off passes none back) are the ablated model's.

    A forward pre-hook on each block hands it its layer's ``ablation`` edits where its caller gave none; it acts only
    on the thread that registered it, so a forward pass on another thread meanwhile is left alone.
    """
    mask = head_mask(model, off)
    if mask.ndim != 2:
        raise ValueError("switched_off takes one (L, H) mask for every image")
    edits = ablation(model, mask[None], means, 1)  # (1, L, H), (1, L, H, T, Dh)
    owner = threading.get_ident()

    def standing(layer: int):
        def hook(module, args, kwargs):
            if threading.get_ident() != owner or kwargs.get("edit") is not None:
                return None
            return args, {**kwargs, "edit": edits.layer(layer)}
        return hook

    handles = [block.register_forward_pre_hook(standing(layer), with_kwargs=True)
               for layer, block in enumerate(model.blocks)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
