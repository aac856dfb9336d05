"""Explanation maps: from attention weights (layers, heads, tokens, tokens) to maps over the patch grid.

Token 0 is [CLS]; token 1 + i is patch i in row-major order on a square grid.
"""

from __future__ import annotations

import numpy as np


def grid_size(attention: np.ndarray) -> int:
    """Patches along one side, from (..., T, T) attention with T = grid**2 + 1."""
    g = int(round((attention.shape[-1] - 1) ** 0.5))
    assert g * g + 1 == attention.shape[-1], f"{attention.shape[-1]} tokens is not a square grid plus [CLS]"
    return g


def token_attention_maps(attention: np.ndarray, token: int = 0) -> np.ndarray:
    """Where one token attends over the patches, per layer and head: (L, H, T, T) -> (L, H, g, g).

    ``token`` 0 is [CLS]; ``1 + i`` is patch i. Weights on [CLS] itself are dropped and the rest
    rescaled to sum to 1, so maps of different heads share one scale.
    """
    g = grid_size(attention)
    rows = attention[:, :, token, 1:]  # (L, H, g*g)
    rows = rows / np.maximum(rows.sum(axis=-1, keepdims=True), 1e-12)
    return rows.reshape(*attention.shape[:2], g, g)


def attention_rollout(attention: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar and Zuidema, 2020): how [CLS] draws on each patch through all layers.

    Each layer's head-averaged attention is mixed half-and-half with the identity (the residual
    path), rows renormalised, and the layers multiplied in order. (L, H, T, T) -> (g, g), summing to 1.
    """
    g = grid_size(attention)
    tokens = attention.shape[-1]
    joint = np.eye(tokens)
    for layer in attention.mean(axis=1):  # (T, T) per layer
        mixed = 0.5 * layer + 0.5 * np.eye(tokens)
        mixed = mixed / mixed.sum(axis=-1, keepdims=True)
        joint = mixed @ joint
    cls_to_patches = joint[0, 1:]
    return (cls_to_patches / cls_to_patches.sum()).reshape(g, g)
