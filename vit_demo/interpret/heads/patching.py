"""Activation patching (Heimersheim & Nanda, 2024, "How to use and interpret activation patching"): a clean and a
corrupt image (a 3 and an 8); each head's output, and the residual stream at each layer and token, is copied from one
run into the other, and the share of the logit difference it restores is reported, normalised so that 0 is the
corrupt run and 1 the clean one. Both directions: clean into corrupt (which parts suffice to restore the answer) and
corrupt into clean (which parts the answer needs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

from vit_demo.interpret.heads.edits import Off, head_mask, model_input
from vit_demo.model import Activations, Edits, VisionTransformer


def _resid_mask(model: VisionTransformer, residual: torch.Tensor | Iterable[int] | None) -> torch.Tensor:
    c = model.config
    if residual is None:
        return torch.zeros(c.depth, c.num_tokens, dtype=torch.bool)
    if isinstance(residual, torch.Tensor):
        return residual.bool()
    mask = torch.zeros(c.depth, c.num_tokens, dtype=torch.bool)
    mask[list(residual)] = True
    return mask


@torch.no_grad()
def patch(model: VisionTransformer, target: torch.Tensor, source: torch.Tensor, heads: Off = (),
          residual: torch.Tensor | Iterable[int] | None = None) -> torch.Tensor:
    """Run ``target`` (B, C, H, W) with some activations copied from a run of ``source`` (B or 1 images): the heads
    in ``heads`` (as ``off`` in ``head_mask``), and the residual stream after block l at token t where the bool
    mask ``residual`` (L, T) is set (or, given layer numbers, at every token of those layers). Logits (B, classes)."""
    device = next(model.parameters()).device
    captured = model.forward_activations(model_input(model, source), stream=True)
    B = len(target)
    mask = head_mask(model, heads).to(device)
    edits = Edits(head_mask=mask.expand(B, -1, -1) if mask.ndim == 2 else mask, head_values=captured.heads,
                  resid_mask=_resid_mask(model, residual).to(device).expand(B, -1, -1), resid_values=captured.stream)
    return model.forward_activations(model_input(model, target), edits=edits).logits


@dataclasses.dataclass(frozen=True)
class PatchingGrid:
    """What ``patching_grid`` found: the two classes compared, each run's logit difference, and per direction the
    share of it each part restores, float32 on the CPU, by kind: "heads" (L, H) and, where the residual stream was
    patched, "residual" (L, T)."""

    classes: tuple[int, int]  # the clean image's class, then the corrupt one's
    logit_diff: dict[str, float]  # "clean", "corrupt": each run's logit[clean class] - logit[corrupt class]
    clean_into_corrupt: dict[str, torch.Tensor]  # the corrupt run with one part from the clean run: what suffices
    corrupt_into_clean: dict[str, torch.Tensor]  # the clean run with one part from the corrupt run: what is needed


def _one(images: torch.Tensor) -> torch.Tensor:
    return images if images.ndim == 4 else images[None]  # (1, C, H, W)


@torch.no_grad()
def patching_grid(model: VisionTransformer, clean: torch.Tensor, corrupt: torch.Tensor,
                  classes: tuple[int, int] | None = None, residual: bool = True) -> PatchingGrid:
    """How much of the clean run's logit difference each head and each residual-stream position restores.

    ``clean`` and ``corrupt``: one image each, (C, H, W) or (1, C, H, W). ``classes``: the pair compared, clean
    first (default: what the model reads each image as; they must differ). The logit difference is
    logit[clean class] - logit[corrupt class]; a patched run's is normalised as
    (patched - corrupt) / (clean - corrupt), so 0 is the corrupt run and 1 the clean one (Heimersheim & Nanda, 2024).

    One forward pass of the two images, capturing their activations; then, per direction, L * H patched runs for
    the heads and L * T for the residual stream (none with ``residual=False``), batched by layer, each running
    only the blocks its patch can change: fewer block computations than one batch of L * (H + T) forward passes.

    Returns a ``PatchingGrid``: the residual stream's shares only with ``residual``.
    """
    base = patching_base(model, clean, corrupt)  # logits (2, classes): the clean image's, then the corrupt one's
    if classes is None:
        classes = int(base.logits[0].argmax()), int(base.logits[1].argmax())
        if classes[0] == classes[1]:
            raise ValueError(f"the model reads both images as class {classes[0]}: patching needs two images "
                             "it tells apart (or name the two classes)")
    a, b = classes
    direction = torch.zeros(base.logits.shape[-1], device=base.logits.device)
    direction[a] += 1.0  # the logit difference is logits @ direction (zero where the classes are the same)
    direction[b] -= 1.0
    diffs = base.logits @ direction  # (2,)
    diff_clean, diff_corrupt = diffs.tolist()
    if diff_clean == diff_corrupt:
        raise ValueError("the two images have the same logit difference: nothing to restore")
    grids = restored_fractions(model, base, direction, kinds=("heads", "residual") if residual else ("heads",))
    on_cpu = {name: {kind: values.float().cpu() for kind, values in grid.items()} for name, grid in grids.items()}
    return PatchingGrid(classes=(a, b), logit_diff={"clean": diff_clean, "corrupt": diff_corrupt}, **on_cpu)


def patching_base(model: VisionTransformer, clean: torch.Tensor, corrupt: torch.Tensor) -> Activations:
    """The clean and the corrupt image (one each, (C, H, W) or (1, C, H, W)) in one forward pass, every head's output
    and the residual stream captured: what ``restored_fractions`` patches from."""
    return model.forward_activations(model_input(model, torch.cat([_one(clean), _one(corrupt)])), stream=True)


def restored_fractions(model: VisionTransformer, base: Activations, direction: torch.Tensor,
                       kinds: tuple[str, ...] = ("heads", "residual")) -> dict[str, dict[str, torch.Tensor]]:
    """``patching_grid``'s patched runs, in tensors alone (no Python number is read from a tensor, so that an exporter
    traces it: vit_demo/onnx/patching.py exports this very function).

    ``base``: ``patching_base``'s run of the clean and the corrupt image; ``direction`` (classes,): +1 at the clean
    class, -1 at the corrupt one (the logit difference is ``logits @ direction``); ``kinds``: "heads", "residual"
    or both. Returns {"clean_into_corrupt": {kind: ...}, "corrupt_into_clean": {kind: ...}}, heads (L, H) and
    residual (L, T): (patched - corrupt) / (clean - corrupt) of the logit difference (Heimersheim & Nanda, 2024).
    """
    c = model.config
    L, H, T = c.depth, c.heads, c.num_tokens
    device = base.logits.device
    diff_clean, diff_corrupt = (base.logits @ direction).unbind()  # two 0-d tensors

    # Each patch runs only the blocks it can change: a head of block l from the stream entering block l, the residual
    # stream after block l from block l + 1 on. One batch per layer and kind: H rows (one per head), T (one per token).
    entering = torch.cat([base.embedded[:, None], base.stream[:, :-1]], 1)  # (2, L, T, D): the stream entering block l
    one_head = torch.eye(H, dtype=torch.bool, device=device)  # (H, H): row h patches head h
    one_token = torch.eye(T, dtype=torch.bool, device=device)[:, :, None]  # (T, T, 1): row t patches token t
    result = {}
    for name, into, source in (("clean_into_corrupt", 1, 0), ("corrupt_into_clean", 0, 1)):
        diffs = {kind: [] for kind in kinds}
        for layer in range(L):
            if "heads" in diffs:
                patched = base.heads[source : source + 1, layer]  # (1, H, T, Dh)
                edit = Edits(head_mask=one_head, head_values=patched)  # row h: head h from the source run
                logits = _blocks_from(model, entering[into, layer].expand(H, -1, -1), layer, edit)  # (H, classes)
                diffs["heads"].append(logits @ direction)
            if "residual" in diffs:
                x = torch.where(one_token, base.stream[source, layer], base.stream[into, layer])  # (T, T, D)
                diffs["residual"].append(_blocks_from(model, x, layer + 1) @ direction)  # (T,)
        result[name] = {kind: (torch.stack(values) - diff_corrupt) / (diff_clean - diff_corrupt)
                        for kind, values in diffs.items()}  # heads (L, H), residual (L, T)
    return result


def _blocks_from(model: VisionTransformer, x: torch.Tensor, start: int, edit: Edits | None = None) -> torch.Tensor:
    """The rest of the model's forward pass from the residual stream ``x`` (B, T, D) entering block ``start``, that
    block's ``edit`` applied (one block's ``Edits``): logits (B, classes)."""
    for layer, block in enumerate(model.blocks[start:], start):
        x = block(x, edit=edit if layer == start else None)[0]  # (B, T, D)
    return model.forward_head(model.norm(x))  # (B, classes)
