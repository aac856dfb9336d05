"""What each attention head does: switch heads off, read the answer forming layer by layer, patch one image's run
into another's, and rank the heads by importance.

- Knockout (ablation): a head's output, the attention-weighted values of that head before the output projection
  (TransformerLens's ``hook_z``), is replaced at every token, by its mean over training images at that token
  (mean-ablation, the default) or by zeros (zero-ablation). The change is read as a logit difference, the
  predicted class against the runner-up, not only as a probability: Heimersheim & Nanda (2024), "How to use and
  interpret activation patching".
- Logit lens (nostalgebraist, 2020, "interpreting GPT: the logit lens"): the model's final norm and head applied to
  the residual stream after each layer, for [CLS] (what the model would say if it stopped there) and for each
  patch token.
- Activation patching (Heimersheim & Nanda, 2024): a clean and a corrupt image (a 3 and an 8); each head's output,
  and the residual stream at each layer and token, is copied from one run into the other, and the share of the
  logit difference it restores is reported, normalised so that 0 is the corrupt run and 1 the clean one. Both
  directions: clean into corrupt (which parts suffice to restore the answer) and corrupt into clean (which parts
  the answer needs).
- Head importance (Michel, Levy & Neubig, 2019, "Are Sixteen Heads Really Better than One?"): a gate xi = 1
  multiplies each head's output; a head's importance is the mean over images of |d loss / d xi|. The pruning
  curves that test it remove heads most important first, against random orders.

Everything runs through forward hooks on the model's own modules, registered for one call and acting only on the
thread that registered them: the model's plain forward pass is untouched, and as fast as before. Layers and heads
are 0-based here (the command line shows them 1-based). Images are (B, C, H, W), floats in [0, 1] or uint8.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as save_safetensors

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.model import VisionTransformer
from vit_demo.weights import CONFIG_FILE, WEIGHTS_FILE

HEAD_MEANS_FILE = "head_means.safetensors"  # in a weights folder: each head's mean output, for mean-ablation
MEAN_IMAGES = 1000  # training images the means are taken over
RANDOM_ORDERS = 5  # seeded random orders the random pruning curve averages
HEAD_IMPORTANCE_FILE = "head_importance.json"  # in a weights folder: importance and pruning curves, for the app
IMPORTANCE_IMAGES = 1000  # test images the importance file is measured over

# What to switch off: (layer, head) pairs, 0-based, where head None means every head of that layer; or a bool
# mask, (L, H) for the whole batch or (B, L, H) per image.
Off = Iterable[tuple[int, int | None]] | torch.Tensor


# ---- Running the model with its heads and residual stream in hand ------------------------------------------------


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


def _images(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) uint8 or [0, 1] floats -> floats in [0, 1] on the model's device."""
    device = next(model.parameters()).device
    if images.dtype == torch.uint8:
        return images.to(device).float().div_(255)
    return images.to(device=device, dtype=torch.float32)


@contextlib.contextmanager
def _hooks(model: VisionTransformer, edits: Edits, capture: bool) -> Iterator[tuple[list, list, list]]:
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
    x = _images(model, images)
    weights = None
    with _hooks(model, edits or Edits(), capture) as (heads_seen, resid_seen, embedded):
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
    with _hooks(model, _ablation(model, mask[None], means, 1), capture=False):
        yield


def _ablation(model: VisionTransformer, mask: torch.Tensor, means: torch.Tensor | None, batch: int) -> Edits:
    """Edits that replace the heads in ``mask`` ((L, H) or (batch, L, H)) by ``means`` (L, H, T, Dh), or by
    zeros where ``means`` is None."""
    device = next(model.parameters()).device
    c = model.config
    if means is None:
        means = torch.zeros(c.depth, c.heads, c.num_tokens, c.dim // c.heads)  # zero-ablation
    mask = mask.to(device)
    return Edits(head_mask=mask.expand(batch, -1, -1) if mask.ndim == 2 else mask,
                 head_values=means.to(device=device, dtype=torch.float32))


# ---- Head means (for mean-ablation) -------------------------------------------------------------------------------


@torch.no_grad()
def head_means(model: VisionTransformer, images: torch.Tensor, batch_size: int = 250) -> torch.Tensor:
    """Each head's mean output at each token over ``images`` (N, C, H, W): (L, H, T, Dh), float32."""
    total = None
    for start in range(0, len(images), batch_size):
        heads = run(model, images[start : start + batch_size], capture=True).heads  # (B, L, H, T, Dh)
        total = heads.double().sum(0) if total is None else total + heads.double().sum(0)  # (L, H, T, Dh)
    return (total / len(images)).float().cpu()


def spread(count: int, total: int) -> torch.Tensor:
    """``count`` indices spread evenly over ``total`` (all of them where there are fewer): for splits stored in class
    order, such as CIFAR-10's folders, every class gets its share."""
    return torch.linspace(0, total - 1, min(count, total)).round().long()


def mean_sample(images: torch.Tensor) -> torch.Tensor:
    """The images head means are taken over: ``MEAN_IMAGES`` of a training split (N, C, H, W), spread evenly."""
    return images[spread(MEAN_IMAGES, len(images))]


def _weights_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()


def write_head_means(folder: str | Path, model: VisionTransformer, images: torch.Tensor,
                     split: str = "train") -> torch.Tensor:
    """Compute the head means over ``images`` (uint8 (N, C, H, W), the preprocessing evaluation uses) and keep them
    in the weights folder as fp16, with the checksum of the weights they belong to. Returns them (L, H, T, Dh),
    as read back (rounded to fp16)."""
    folder = Path(folder)
    means = head_means(model, images).half()  # (L, H, T, Dh)
    blob = save_safetensors({"means": means.contiguous()},
                            metadata={"weights_sha256": _weights_sha256(folder), "split": split,
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


# ---- Knockout -----------------------------------------------------------------------------------------------------


@torch.no_grad()
def ablated_logits(model: VisionTransformer, images: torch.Tensor, off: Off,
                   means: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (B, classes) with the heads in ``off`` switched off: mean-ablated to ``means`` (L, H, T, Dh), or
    zero-ablated where ``means`` is None. One forward pass."""
    return run(model, images, _ablation(model, head_mask(model, off), means, len(images))).logits


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
    result = run(model, torch.cat([images, images]), _ablation(model, both, means, 2 * B), attention=attention)
    logits, weights = result.logits, result.attention  # (2B, classes), (2B, L, H, T, T) or None
    predicted, runner_up = top_two(logits[:B])
    if weights is None:
        return Knockout(logits[:B], logits[B:], predicted, runner_up)
    return Knockout(logits[:B], logits[B:], predicted, runner_up, weights[:B], weights[B:])


# ---- Logit lens ---------------------------------------------------------------------------------------------------


def _read_out(model: VisionTransformer, resid: torch.Tensor) -> torch.Tensor:
    """The final norm and head applied to residual streams (..., T, D), exactly as the model reads [CLS] after its
    last block: logits (..., T, classes)."""
    return model.head(model.norm(resid))


@torch.no_grad()
def logit_lens(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """What [CLS] would say after each layer: logits (B, L, classes). The last layer's are the model's own."""
    resid = run(model, images, capture=True).resid  # (B, L, T, D)
    return torch.stack([model.head(model.norm(resid[:, layer])[:, 0]) for layer in range(resid.shape[1])], 1)


@torch.no_grad()
def lens_maps(model: VisionTransformer, images: torch.Tensor, classes: torch.Tensor | None = None) -> torch.Tensor:
    """The logit lens per patch: the probability of ``classes`` (B,) (default: the predicted one) read from each
    patch token after each layer, (B, L, g, g). Patch tokens are never read by the trained head, so this shows
    where the class is written, not what the model says."""
    captured = run(model, images, capture=True)
    if classes is None:
        classes = captured.logits.argmax(-1)  # (B,)
    probs = _read_out(model, captured.resid[:, :, 1:]).softmax(-1)  # (B, L, N, classes)
    g = model.config.grid_size
    picked = probs.gather(-1, classes.to(probs.device).view(-1, 1, 1, 1).expand(*probs.shape[:3], 1))  # (B, L, N, 1)
    return picked[..., 0].reshape(len(images), -1, g, g).cpu()


# ---- Activation patching ------------------------------------------------------------------------------------------


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
    captured = run(model, source, capture=True)
    B = len(target)
    mask = head_mask(model, heads).to(device)
    edits = Edits(head_mask=mask.expand(B, -1, -1) if mask.ndim == 2 else mask, head_values=captured.heads,
                  resid_mask=_resid_mask(model, residual).to(device).expand(B, -1, -1), resid_values=captured.resid)
    return run(model, target, edits).logits


def _one(images: torch.Tensor) -> torch.Tensor:
    return images if images.ndim == 4 else images[None]  # (1, C, H, W)


@torch.no_grad()
def patching_grid(model: VisionTransformer, clean: torch.Tensor, corrupt: torch.Tensor,
                  classes: tuple[int, int] | None = None, residual: bool = True) -> dict:
    """How much of the clean run's logit difference each head and each residual-stream position restores.

    ``clean`` and ``corrupt``: one image each, (C, H, W) or (1, C, H, W). ``classes``: the pair compared, clean
    first (default: what the model reads each image as; they must differ). The logit difference is
    logit[clean class] - logit[corrupt class]; a patched run's is normalised as
    (patched - corrupt) / (clean - corrupt), so 0 is the corrupt run and 1 the clean one (Heimersheim & Nanda, 2024).

    One forward pass of the two images, capturing their activations; then, per direction, L * H patched runs for
    the heads and L * T for the residual stream (none with ``residual=False``), batched by layer, each running
    only the blocks its patch can change: fewer block computations than one batch of L * (H + T) forward passes.

    Returns a dict: ``classes`` (clean, corrupt), ``logit_diff`` {"clean", "corrupt"} (floats), and for each
    direction, ``clean_into_corrupt`` (the corrupt run with one part taken from the clean run: what suffices) and
    ``corrupt_into_clean`` (the clean run with one part from the corrupt run: what is needed), a dict with
    ``heads`` (L, H) and, with ``residual``, ``residual`` (L, T): restored fractions, float32 on the CPU.
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
    return {"classes": (a, b), "logit_diff": {"clean": diff_clean, "corrupt": diff_corrupt},
            **{name: {kind: values.float().cpu() for kind, values in grid.items()} for name, grid in grids.items()}}


def patching_base(model: VisionTransformer, clean: torch.Tensor, corrupt: torch.Tensor) -> Run:
    """The clean and the corrupt image (one each, (C, H, W) or (1, C, H, W)) in one forward pass, every head's output
    and the residual stream captured: what ``restored_fractions`` patches from."""
    return run(model, torch.cat([_one(clean), _one(corrupt)]), capture=True)


def restored_fractions(model: VisionTransformer, base: Run, direction: torch.Tensor,
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
    entering = torch.cat([base.embedded[:, None], base.resid[:, :-1]], 1)  # (2, L, T, D): the stream entering block l
    one_head = torch.eye(H, dtype=torch.bool, device=device)  # (H, H): row h patches head h
    one_token = torch.eye(T, dtype=torch.bool, device=device)[:, :, None]  # (T, T, 1): row t patches token t
    result = {}
    for name, into, source in (("clean_into_corrupt", 1, 0), ("corrupt_into_clean", 0, 1)):
        diffs = {kind: [] for kind in kinds}
        for layer in range(L):
            if "heads" in diffs:
                mask = torch.zeros(H, L, H, dtype=torch.bool, device=device)
                mask[:, layer] = one_head
                with _hooks(model, Edits(head_mask=mask, head_values=base.heads[source]), capture=False):
                    logits = _blocks_from(model, entering[into, layer].expand(H, -1, -1), layer)  # (H, classes)
                diffs["heads"].append(logits @ direction)
            if "residual" in diffs:
                x = torch.where(one_token, base.resid[source, layer], base.resid[into, layer])  # (T, T, D)
                diffs["residual"].append(_blocks_from(model, x, layer + 1) @ direction)  # (T,)
        result[name] = {kind: (torch.stack(values) - diff_corrupt) / (diff_clean - diff_corrupt)
                        for kind, values in diffs.items()}  # heads (L, H), residual (L, T)
    return result


def _blocks_from(model: VisionTransformer, x: torch.Tensor, start: int) -> torch.Tensor:
    """The rest of the model's forward pass from the residual stream ``x`` (B, T, D) entering block ``start``:
    logits (B, classes)."""
    for block in model.blocks[start:]:
        x, _ = block(x)  # (B, T, D)
    return model.head(model.norm(x)[:, 0])


# ---- Importance and pruning over a dataset ------------------------------------------------------------------------


def head_importance(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor,
                    batch_size: int = 250) -> torch.Tensor:
    """Michel et al. (2019): a gate xi (= 1) on each head's output; importance = the mean over images of
    |d cross-entropy / d xi|, (L, H). One forward and backward pass per batch; the per-image gradients come from
    one gate per image and head."""
    c = model.config
    device = next(model.parameters()).device
    total = torch.zeros(c.depth, c.heads, dtype=torch.float64, device=device)
    for start in range(0, len(images), batch_size):
        x = images[start : start + batch_size]
        y = labels[start : start + batch_size].to(device)
        gates = torch.ones(len(x), c.depth, c.heads, device=device, requires_grad=True)  # (B, L, H)
        with torch.enable_grad():
            logits = run(model, x, Edits(gates=gates)).logits  # (B, classes)
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
            logits = run(model, x, _ablation(model, mask, means, len(x))).logits
        else:
            logits = model(_images(model, x))  # (B, classes): the plain fast path
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

    def curves(self, importance: torch.Tensor, seeds: int) -> dict[str, list[float]]:
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
    return _Accuracies(model, images, labels, means, batch_size).curves(importance, seeds)


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
            "importance": importance, "curves": measure.curves(importance, seeds)}


def write_head_importance(folder: str | Path, model: VisionTransformer, images: torch.Tensor,
                          labels: torch.Tensor, means: torch.Tensor | None = None, split: str = "test",
                          batch_size: int = 500) -> dict:
    """Measure ``heads_report`` over ``images`` (uint8 (N, C, H, W) of ``split``) and keep it in the weights folder as
    ``HEAD_IMPORTANCE_FILE``, with the checksum of the weights it belongs to, so that the app never computes it per
    request (the app has no dataset). ``means``: mean-ablation's (None: zero-ablation). Returns what was written."""
    folder = Path(folder)
    report = heads_report(model, images, labels, means, batch_size)
    record = {
        "weights_sha256": _weights_sha256(folder), "split": split, "images": len(images),
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


@torch.no_grad()
def lens_accuracy(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor,
                  batch_size: int = 500) -> list[float]:
    """Accuracy of the logit lens on [CLS] after each layer: L floats, the last the model's own."""
    correct = torch.zeros(model.config.depth, dtype=torch.long)
    for start in range(0, len(images), batch_size):
        predicted = logit_lens(model, images[start : start + batch_size]).argmax(-1).cpu()  # (B, L)
        correct += (predicted == labels[start : start + batch_size, None]).sum(0)
    return (correct.double() / len(images)).tolist()
