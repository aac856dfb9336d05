"""A Vision Transformer written from scratch, as in Dosovitskiy et al. (2021),
"An Image is Worth 16x16 Words".

Names follow the paper (and timm): ``patch_embed``, ``cls_token``, ``pos_embed``, ``blocks``,
``norm``, ``head``; inside a block ``norm1 / attn / norm2 / mlp``.

The model takes images with pixel values in [0, 1] and normalises them itself with the mean and
standard deviation stored in its config, so the weights carry everything needed to use them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """The architecture, saved next to the weights so that loading never guesses."""

    image_size: int = 28
    patch_size: int = 4
    in_channels: int = 1
    num_classes: int = 10
    dim: int = 64
    depth: int = 6
    heads: int = 4
    mlp_dim: int = 128
    dropout: float = 0.0
    drop_path: float = 0.0  # stochastic depth: the last block's chance of being skipped in training (0 = off)
    mean: tuple[float, ...] = (0.1307,)
    std: tuple[float, ...] = (0.3081,)

    def __post_init__(self) -> None:
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} must be divisible by patch_size {self.patch_size}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} must be divisible by heads {self.heads}")
        if not len(self.mean) == len(self.std) == self.in_channels:
            raise ValueError("mean and std need one value per input channel")

    @property
    def grid_size(self) -> int:
        """Patches along one side of the image."""
        return self.image_size // self.patch_size

    @property
    def num_tokens(self) -> int:
        """Sequence length: one token per patch plus the [CLS] token (index 0)."""
        return self.grid_size**2 + 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ViTConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown ViTConfig fields: {sorted(unknown)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**values)


# Heads switched off in one layer: (off, values), off bool (B or 1, H), values (B or 1, H, T, head_dim); or across
# the layers, off (B or 1, L, H) and values (B or 1, L, H, T, head_dim).
HeadReplacement = tuple[torch.Tensor, torch.Tensor]


class Attention(nn.Module):
    """Multi-head self-attention with an explicit path that can hand back its weights."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim**-0.5
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, need_weights: bool = False,
                replace: HeadReplacement | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, C) -> (B, T, C), and with ``need_weights`` the attention weights (B, H, T, T) from the explicit
        path (else None, from the fused one).

        ``replace``: (off, values), off bool (B or 1, H), values (B or 1, H, T, hd): where off is set, that head's
        output (its attention-weighted values, before the output projection) is replaced by values at every token.
        An explicit hook point that exporters trace (they drop forward hooks): vit_demo/onnx/export.py switches
        heads off through it, as heads/hooks.py's hook on ``proj`` does in PyTorch. None: nothing replaced.
        """
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, H, T, hd)
        q, k, v = qkv.unbind(0)  # each (B, H, T, hd)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            attn = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, T, T)
            attn = attn.softmax(dim=-1)
            out = F.dropout(attn, dropout_p) @ v  # (B, H, T, hd)
        else:
            attn = None
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)  # (B, H, T, hd)
        if replace is not None:
            off, values = replace
            out = torch.where(off[:, :, None, None], values, out)  # (B, H, T, hd)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.proj_drop(self.proj(out)), attn


class MLP(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth (Huang et al., 2016): in training, skip a residual branch for a random subset of the batch.

    Each sample's branch output is kept with probability 1 - rate and then scaled by 1 / (1 - rate), so its
    expected value is unchanged; at evaluation the branch always runs. As timm's ``DropPath``.
    """

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        mask = x.new_empty(x.shape[0], *(1,) * (x.ndim - 1)).bernoulli_(keep)  # (B, 1, 1): one draw per sample
        return x * mask / keep


class Block(nn.Module):
    """A pre-norm encoder block: x + attn(norm(x)), then x + mlp(norm(x)), each branch under stochastic depth."""

    def __init__(self, config: ViTConfig, drop_path: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attn = Attention(config.dim, config.heads, config.dropout)
        self.norm2 = nn.LayerNorm(config.dim)
        self.mlp = MLP(config.dim, config.mlp_dim, config.dropout)
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor, need_weights: bool = False,
                replace: HeadReplacement | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn_out, attn = self.attn(self.norm1(x), need_weights, replace)
        x = x + self.drop_path(attn_out)
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        return x, attn


class VisionTransformer(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("mean", torch.tensor(config.mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(config.std).view(1, -1, 1, 1), persistent=False)
        # A convolution with kernel = stride = patch size is a linear projection of each flattened patch.
        self.patch_embed = nn.Conv2d(config.in_channels, config.dim, config.patch_size, stride=config.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, config.num_tokens, config.dim))
        self.pos_drop = nn.Dropout(config.dropout)
        # The skip rate grows linearly with depth, from 0 for the first block to drop_path for the last
        # (Huang et al., 2016; as DeiT and Lee et al., 2021 use it).
        rates = torch.linspace(0, config.drop_path, config.depth).tolist()
        self.blocks = nn.ModuleList(Block(config, rate) for rate in rates)
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        # Linear and conv layers keep PyTorch's default init: at this small width it trained markedly faster
        # than the truncated-normal(0.02) init used for large ViTs (67% vs 38% after 3 short epochs on MNIST).
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def forward(
        self, images: torch.Tensor, return_attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Classify a batch of images with pixel values in [0, 1].

        Args:
            images: (B, C, H, W), values in [0, 1].
            return_attention: also return every layer's and head's attention weights.

        Returns:
            logits (B, num_classes), and with ``return_attention`` the attention weights
            (B, layers, heads, tokens, tokens), where token 0 is [CLS] and token 1 + i is patch i
            in row-major order.
        """
        if return_attention:
            logits, attentions = self.forward_attention(images)
            return logits, torch.stack(attentions, dim=1)  # (B, L, H, T, T)
        return self._encode(images, need_weights=False)[0]

    def forward_attention(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits (B, num_classes) and each layer's attention weights, a list of L tensors (B, H, T, T) that are
        still in the autograd graph: gradients with respect to them can be taken (class-specific relevance)."""
        logits, attentions, _ = self._encode(images, need_weights=True)
        return logits, attentions

    def forward_edited(self, images: torch.Tensor, off: torch.Tensor,
                       values: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """The explicit path with heads switched off: where ``off`` (B or 1, L, H) bool is set, head h of layer l
        outputs ``values`` (B or 1, L, H, T, Dh) at every token (see ``Attention.forward``'s ``replace``).

        Returns logits (B, num_classes), each layer's attention weights (L x (B, H, T, T)) and the residual stream
        after each block (L x (B, T, D)), as the replacements leave them.
        """
        return self._encode(images, need_weights=True, replace=(off, values), keep_stream=True)

    def forward_features(self, images: torch.Tensor, need_weights: bool = False, patches: bool = False
                         ) -> tuple[torch.Tensor, list[torch.Tensor | None], torch.Tensor]:
        """Logits (B, num_classes), each layer's attention weights (L x (B, H, T, T); L x None without
        ``need_weights``) and the [CLS] token after each block through the final norm, (B, L, D): what the logit lens
        reads at [CLS], and what the unfamiliar-image rule measures (vit_demo/interpret/unfamiliar.py). With
        ``patches``, the features go on with the mean of the patch tokens after each block through the final norm
        (Lee et al.'s feature maps mean-pooled over space): (B, 2L, D), [CLS] rows first."""
        logits, attentions, stream = self._encode(images, need_weights, keep_stream=True)
        features = self.norm(torch.stack([x[:, 0] for x in stream], dim=1))  # (B, L, D)
        if patches:
            means = self.norm(torch.stack([x[:, 1:] for x in stream], dim=1)).mean(dim=2)  # (B, L, N, D) -> (B, L, D)
            features = torch.cat([features, means], dim=1)  # (B, 2L, D)
        return logits, attentions, features

    def forward_head(self, x: torch.Tensor, all_tokens: bool = False) -> torch.Tensor:
        """The final norm and the head on token features (..., T, D): the residual stream after the last block, or
        after any block for the logit lens. Logits of [CLS] (..., num_classes), as the model reads its answer; with
        ``all_tokens``, of every token (..., T, num_classes)."""
        normed = self.norm(x)  # (..., T, D)
        return self.head(normed if all_tokens else normed[..., 0, :])  # (..., T, classes) or (..., classes)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """The tokens the first block reads: images (B, C, H, W) in [0, 1] -> (B, T, D), [CLS] then the patches in
        row-major order, each with its position embedding. (The masked autoencoder, vit_demo/training/mae.py, keeps
        [CLS] and a random quarter of the patch tokens of the same embedding.)"""
        x = (images - self.mean) / self.std  # (B, C, H, W)
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, N, D), N = grid_size**2
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
        x = torch.cat([cls, x], dim=1) + self.pos_embed  # (B, T, D), T = N + 1
        return self.pos_drop(x)

    def _encode(self, images: torch.Tensor, need_weights: bool, replace: HeadReplacement | None = None,
                keep_stream: bool = False) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        x = self.embed(images)  # (B, T, D)
        attentions, stream = [], []
        for layer, block in enumerate(self.blocks):
            x, attn = block(x, need_weights, None if replace is None else (replace[0][:, layer], replace[1][:, layer]))
            attentions.append(attn)
            if keep_stream:
                stream.append(x)
        # (B, num_classes), L x (B, H, T, T) or L x None, L x (B, T, D) or []
        return self.forward_head(x), attentions, stream
