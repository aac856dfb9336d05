"""Explanation maps over the patch grid: from attention weights (layers, heads, tokens, tokens), and
class-specific relevance from attention and its gradients.

Token 0 is [CLS]; the patches follow the model's prefix tokens (``ViTConfig.prefix_tokens``: [CLS], then DeiT's
distillation token and DINOv2's registers, where a model has them), token ``prefix_tokens + i`` being patch i in
row-major order on a square grid. The functions over attention arrays take ``prefix_tokens`` (1: [CLS] alone, as in
the models trained here); every map starts from [CLS] and covers the patches only. ``MAPS`` holds every kind of map
under one signature, ``fn(model, images, target) -> (B, g, g)`` (as Captum gives every attribution method one
``attribute``): what faithfulness.py and the command line loop over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn


def grid_size(attention: np.ndarray, prefix_tokens: int = 1) -> int:
    """Patches along one side, from (..., T, T) attention with T = prefix_tokens + grid**2."""
    g = int(round((attention.shape[-1] - prefix_tokens) ** 0.5))
    assert g * g + prefix_tokens == attention.shape[-1], \
        f"{attention.shape[-1]} tokens is not a square grid after {prefix_tokens} prefix token(s)"
    return g


def token_attention_maps(attention: np.ndarray, token: int = 0, prefix_tokens: int = 1) -> np.ndarray:
    """Where one token attends over the patches, per layer and head: (L, H, T, T) -> (L, H, g, g).

    ``token`` 0 is [CLS]; ``prefix_tokens + i`` is patch i. Weights on the prefix tokens ([CLS] and any others) are
    dropped and the rest rescaled to sum to 1, so maps of different heads share one scale.
    """
    g = grid_size(attention, prefix_tokens)
    rows = attention[:, :, token, prefix_tokens:]  # (L, H, g*g)
    rows = rows / np.maximum(rows.sum(axis=-1, keepdims=True), 1e-12)
    return rows.reshape(*attention.shape[:2], g, g)


def cls_attention_map(attention: np.ndarray, layer: int, head: int | None = None, prefix_tokens: int = 1
                      ) -> np.ndarray:
    """Where [CLS] attends in ``layer`` (0-based) and ``head`` (0-based; None: the mean over heads):
    (L, H, T, T) -> (g, g)."""
    maps = token_attention_maps(attention[layer : layer + 1], prefix_tokens=prefix_tokens)[0]  # (H, g, g)
    return maps.mean(axis=0) if head is None else maps[head]


def attention_rollout(attention: np.ndarray, prefix_tokens: int = 1) -> np.ndarray:
    """Attention rollout (Abnar and Zuidema, 2020): how [CLS] draws on each patch through all layers.

    Each layer's head-averaged attention is mixed half-and-half with the identity (the residual
    path), rows renormalised, and the layers multiplied in order. (L, H, T, T) -> (g, g), summing to 1: [CLS]'s row
    over the patches (the flow through the other prefix tokens is in it; their own entries are left out).
    """
    g = grid_size(attention, prefix_tokens)
    tokens = attention.shape[-1]
    joint = np.eye(tokens)
    for layer in attention.mean(axis=1):  # (T, T) per layer
        mixed = 0.5 * layer + 0.5 * np.eye(tokens)
        mixed = mixed / mixed.sum(axis=-1, keepdims=True)
        joint = mixed @ joint
    cls_to_patches = joint[0, prefix_tokens:]  # (g*g,)
    return (cls_to_patches / cls_to_patches.sum()).reshape(g, g)


def first_query_patch(rollout: np.ndarray) -> int:
    """The patch a query view ("where does this patch look") starts at: where [CLS] draws most, the peak of
    ``rollout`` (g, g), in reading order."""
    return int(rollout.argmax())


def attention_steps(qkv: np.ndarray, layer: int, head: int, token: int) -> dict[str, np.ndarray]:
    """How one head of one layer computes where ``token`` attends and what it takes from there (scaled dot-product
    attention, Vaswani et al., 2017), step by step, from one image's queries, keys and values (L, 3, H, T, Dh)
    (``forward_activations(..., qkv=True).qkv[b]``): the token's ``query`` (Dh); every token's ``keys`` and
    ``values`` (T, Dh); the ``scores``, query . key / sqrt(Dh) (T); their softmax, the attention ``weights`` (T),
    which the model's attention holds at [layer, head, token]; and the head's ``output`` at the token, the values
    summed with those weights (Dh), before the output projection. In float64."""
    q, k, v = (qkv[layer, part, head].astype(np.float64) for part in range(3))  # each (T, Dh)
    scores = k @ q[token] / np.sqrt(q.shape[-1])  # (T,)
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()  # (T,)
    return {"query": q[token], "keys": k, "values": v, "scores": scores, "weights": weights, "output": weights @ v}


PREDICTED = -1  # in a ``classes`` tensor: explain the class the model predicts for that image


def relevance_forward(model: nn.Module, images: torch.Tensor,
                      classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Class-specific relevance (Chefer, Gur and Wolf, 2021, "Generic Attention-model Explainability for
    Interpreting Bi-Modal and Encoder-Decoder Transformers", ICCV): why the model says ``classes[i]`` for image i,
    with the prediction and the attention of the same forward pass.

    For each layer l, Abar_l = mean over heads of (dy_c/dA_l * A_l) clamped at 0: the attention weighted by the
    gradient of class c's logit with respect to it. Then R <- R + Abar_l R, starting from R = I, layer by
    layer; the map is R[CLS, patches]. As ``generate_relevance`` in the reference code
    (hila-chefer/Transformer-MM-Explainability, the ViT notebook). One forward and one backward pass for the
    whole batch: each image's class logit depends on that image alone, so their sum's gradient is each one's.
    No hooks: the attention comes from ``forward_activations``, so two threads can share the model.

    Args:
        model: a ``VisionTransformer`` in eval mode.
        images: (B, C, H, W) in [0, 1].
        classes: (B,) the class to explain for each image; ``PREDICTED`` for the one the model predicts.

    Returns:
        logits (B, classes) and attention (B, L, H, T, T), detached, and the relevance of each patch
        (B, g, g), >= 0, not normalised.
    """
    with torch.enable_grad():
        # The graph starts at the images, so that a model whose weights need no gradient (a Classifier's) is not
        # made to track them.
        found = model.forward_activations(images.detach().requires_grad_(True), attention=True)
        logits, attentions = found.logits, found.attentions  # (B, cls), L x (B, H, T, T)
        classes = classes.to(logits.device)
        classes = torch.where(classes == PREDICTED, logits.argmax(1), classes)  # (B,)
        chosen = logits.gather(1, classes.view(-1, 1)).sum()
        gradients = torch.autograd.grad(chosen, attentions)  # L x (B, H, T, T)
    B, g, prefix = len(images), model.config.grid_size, model.config.prefix_tokens
    maps = accumulate_relevance(attentions, gradients)[:, prefix:].reshape(B, g, g).float().cpu().numpy()
    return logits.detach(), found.attention.detach(), maps


def accumulate_relevance(attentions: Sequence[torch.Tensor], gradients: Sequence[torch.Tensor]) -> torch.Tensor:
    """Chefer et al.'s rule (see ``relevance_forward``) from each layer's attention and the gradient of the class
    logit with respect to it, L x (B, H, T, T): R <- R + Abar_l R from R = I; [CLS]'s row of R, (B, T): the patches'
    from ``config.prefix_tokens`` on."""
    B, _, T, _ = attentions[0].shape
    relevance = torch.eye(T, device=attentions[0].device).repeat(B, 1, 1)  # (B, T, T)
    for attention, gradient in zip(attentions, gradients):
        weighted = (gradient * attention).clamp(min=0).mean(dim=1)  # (B, T, T): Abar_l
        relevance = relevance + weighted.detach() @ relevance
    return relevance[:, 0]  # (B, T)


def relevance_maps(model: nn.Module, images: torch.Tensor, classes: torch.Tensor) -> np.ndarray:
    """Class-specific relevance alone (see ``relevance_forward``): (B, g, g)."""
    return relevance_forward(model, images, classes)[2]


@torch.no_grad()
def attention_maps(model: nn.Module, images: torch.Tensor, classes: torch.Tensor) -> np.ndarray:
    """Where [CLS] attends in the last layer, the mean over heads, for images (B, C, H, W) in [0, 1]: (B, g, g).
    The same whatever the class (``classes`` is there for ``MAPS``' signature)."""
    attention = model.forward_activations(images, attention=True).attentions[-1]  # (B, H, T, T)
    prefix = model.config.prefix_tokens
    return np.stack([token_attention_maps(a[None], prefix_tokens=prefix)[0].mean(0)
                     for a in attention.float().cpu().numpy()])


@torch.no_grad()
def rollout_maps(model: nn.Module, images: torch.Tensor, classes: torch.Tensor) -> np.ndarray:
    """Attention rollout (see ``attention_rollout``) for images (B, C, H, W) in [0, 1]: (B, g, g). The same whatever
    the class (``classes`` is there for ``MAPS``' signature)."""
    attention = model.forward_activations(images, attention=True).attention  # (B, L, H, T, T)
    return np.stack([attention_rollout(a, model.config.prefix_tokens) for a in attention.float().cpu().numpy()])


# Every kind of map, by name: fn(model, images (B, C, H, W) in [0, 1], classes (B,), PREDICTED allowed) -> (B, g, g).
# attention: the last layer's [CLS] attention, mean over heads; rollout: attention rollout; relevance:
# class-specific relevance.
MAPS: dict[str, Callable[[nn.Module, torch.Tensor, torch.Tensor], np.ndarray]] = {
    "attention": attention_maps,
    "rollout": rollout_maps,
    "relevance": relevance_maps,
}
