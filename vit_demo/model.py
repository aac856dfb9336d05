"""A Vision Transformer written from scratch, as in Dosovitskiy et al. (2021),
"An Image is Worth 16x16 Words".

Names follow the paper (and timm): ``patch_embed``, ``cls_token``, ``pos_embed``, ``blocks``,
``norm``, ``head``; inside a block ``norm1 / attn / norm2 / mlp``. What pretrained ViTs from elsewhere add (python -m
vit_demo import: vit_demo/importing.py) is here too, each off by default and named as timm names it: DeiT's
distillation token and head (``dist_token``, ``head_dist``), registers (``reg_token``), layer scale (``ls1``, ``ls2``).
The tokens are the prefix tokens ([CLS] first, then the distillation token, then the registers), then the patches.

The model takes images with pixel values in [0, 1] and normalises them itself with the mean and
standard deviation stored in its config, so the weights carry everything needed to use them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


EXTENSION = "extension"  # a ViTConfig field beyond the plain ViT: written only where it differs from its default


def _extension(default: Any) -> Any:
    return dataclasses.field(default=default, metadata={EXTENSION: True})


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
    # What pretrained ViTs from elsewhere need. Each default is the plain ViT above, and ``to_dict`` leaves these out
    # while they hold it, so configs written before they existed (and the ONNX graphs' metadata, which quotes a config)
    # read the same.
    norm_eps: float = _extension(1e-5)  # every LayerNorm's epsilon (PyTorch's default; timm's ViTs: 1e-6, HF's: 1e-12)
    distillation_token: bool = _extension(False)  # DeiT's second token and head (Touvron et al., 2021)
    register_tokens: int = _extension(0)  # tokens that no output reads (Darcet et al., 2024: registers)
    layer_scale: float | None = _extension(None)  # per-channel scales on each residual branch (CaiT), initialised to it
    prefix_pos_embed: bool = _extension(True)  # False: only the patches get position embeddings (timm's no_embed_class)

    def __post_init__(self) -> None:
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} must be divisible by patch_size {self.patch_size}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} must be divisible by heads {self.heads}")
        if not len(self.mean) == len(self.std) == self.in_channels:
            raise ValueError("mean and std need one value per input channel")
        if self.register_tokens < 0 or self.num_classes < 0:
            raise ValueError("register_tokens and num_classes cannot be negative")

    @property
    def grid_size(self) -> int:
        """Patches along one side of the image."""
        return self.image_size // self.patch_size

    @property
    def prefix_tokens(self) -> int:
        """Tokens before the patches: [CLS] (index 0), then DeiT's distillation token, then the registers. Patch i is
        token ``prefix_tokens + i``."""
        return 1 + self.distillation_token + self.register_tokens

    @property
    def num_tokens(self) -> int:
        """Sequence length: the prefix tokens, then one token per patch in row-major order."""
        return self.prefix_tokens + self.grid_size**2

    @property
    def block_macs(self) -> int:
        """Multiply-adds of one block on one image: at each of the T tokens, the attention's four D x D projections
        (queries, keys, values, output), the MLP's two D x mlp_dim ones, and the attention's two products over the T
        tokens (scores, weighted values), T * D each; norms, softmax and activations left out."""
        T, D = self.num_tokens, self.dim
        return T * D * (4 * D + 2 * self.mlp_dim + 2 * T)

    def to_dict(self) -> dict[str, Any]:
        """The fields, less those beyond the plain ViT that hold their defaults."""
        return {field.name: value for field, value in zip(dataclasses.fields(self), dataclasses.astuple(self))
                if not (field.metadata.get(EXTENSION) and value == field.default)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ViTConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown ViTConfig fields: {sorted(unknown)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class Edits:
    """Changes to one forward pass (``VisionTransformer.forward_activations``); None: nothing changed there.

    ``gates`` multiply each head's output (its attention-weighted values, before the output projection): head
    importance. Where ``head_mask`` is set, that head outputs ``head_values`` at every token: knockout, patching. Where
    ``resid_mask`` is set, the residual stream after that block, at that token, is ``resid_values``: patching. Every
    tensor has a leading B, or 1 for every image of the batch; across the model a layer axis follows it, and
    ``layer(l)`` gives one block's edits, without it.
    """

    gates: torch.Tensor | None = None  # (B, L, H) float; one block's (B, H)
    head_mask: torch.Tensor | None = None  # (B, L, H) bool; one block's (B, H)
    head_values: torch.Tensor | None = None  # (B, L, H, T, Dh); one block's (B, H, T, Dh)
    resid_mask: torch.Tensor | None = None  # (B, L, T) bool; one block's (B, T)
    resid_values: torch.Tensor | None = None  # (B, L, T, D); one block's (B, T, D)

    def layer(self, index: int) -> Edits:
        """Block ``index``'s edits (0-based): the layer axis taken out."""
        found = (getattr(self, field.name) for field in dataclasses.fields(self))
        return Edits(*(None if t is None else t[:, index] for t in found))


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

    def forward(self, x: torch.Tensor, *, need_weights: bool = False, edit: Edits | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> (B, T, C); with ``need_weights`` the attention weights (B, H, T, T) from the explicit path
        (else None, from the fused one); each head's output (B, H, T, hd), as used: after ``edit`` (one block's
        ``Edits``: its gates, then its head replacements); and the queries, keys and values (3, B, H, T, hd). Edits
        act here, in the forward pass itself, so that exporters trace them (vit_demo/onnx/export.py switches heads
        off through them)."""
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
        if edit is not None and edit.gates is not None:
            out = out * edit.gates[:, :, None, None]  # (B, H, T, hd)
        if edit is not None and edit.head_mask is not None:
            out = torch.where(edit.head_mask[:, :, None, None], edit.head_values, out)  # (B, H, T, hd)
        merged = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.proj_drop(self.proj(merged)), attn, out, qkv


class MLP(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class LayerScale(nn.Module):
    """A learnt scale per channel on a residual branch's output (Touvron et al., 2021, "Going deeper with Image
    Transformers", CaiT), as timm's ``LayerScale``: (B, T, D) * gamma (D,)."""

    def __init__(self, dim: int, init: float) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma  # (B, T, D)


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
    """A pre-norm encoder block: x + attn(norm(x)), then x + mlp(norm(x)), each branch under stochastic depth (and,
    with the config's ``layer_scale``, scaled per channel first)."""

    def __init__(self, config: ViTConfig, drop_path: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.attn = Attention(config.dim, config.heads, config.dropout)
        self.norm2 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.mlp = MLP(config.dim, config.mlp_dim, config.dropout)
        self.drop_path = DropPath(drop_path)
        scaled = config.layer_scale is not None
        self.ls1 = LayerScale(config.dim, config.layer_scale) if scaled else nn.Identity()
        self.ls2 = LayerScale(config.dim, config.layer_scale) if scaled else nn.Identity()

    def forward(self, x: torch.Tensor, *, need_weights: bool = False, edit: Edits | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> the residual stream after the block (B, T, D), as ``edit`` (one block's ``Edits``) leaves it;
        the attention weights (B, H, T, T) with ``need_weights``, else None; each head's output (B, H, T, hd); the
        queries, keys and values (3, B, H, T, hd)."""
        attn_out, attn, heads, qkv = self.attn(self.norm1(x), need_weights=need_weights, edit=edit)
        x = x + self.drop_path(self.ls1(attn_out))
        x = x + self.drop_path(self.ls2(self.mlp(self.norm2(x))))
        if edit is not None and edit.resid_mask is not None:
            x = torch.where(edit.resid_mask[:, :, None], edit.resid_values, x)  # (B, T, D)
        return x, attn, heads, qkv


@dataclasses.dataclass(frozen=True)
class Activations:
    """What ``VisionTransformer.forward_activations`` found inside one forward pass, as its edits left it."""

    logits: torch.Tensor  # (B, num_classes); for a model without a head (num_classes 0), its features (B, D)
    # Each layer's attention weights, L x (B, H, T, T), in the autograd graph (gradients with respect to them can be
    # taken: class-specific relevance); empty without ``attention``.
    attentions: tuple[torch.Tensor, ...] = ()
    heads: torch.Tensor | None = None  # (B, L, H, T, Dh): each head's output (before the output projection)
    stream: torch.Tensor | None = None  # (B, L, T, D): the residual stream after each block
    embedded: torch.Tensor | None = None  # (B, T, D): the residual stream entering the first block
    qkv: torch.Tensor | None = None  # (B, L, 3, H, T, Dh): each layer's queries, keys and values

    @property
    def attention(self) -> torch.Tensor:
        """Every layer's and head's attention weights, (B, L, H, T, T)."""
        return torch.stack(self.attentions, dim=1)


class VisionTransformer(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("mean", torch.tensor(config.mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(config.std).view(1, -1, 1, 1), persistent=False)
        # A convolution with kernel = stride = patch size is a linear projection of each flattened patch.
        self.patch_embed = nn.Conv2d(config.in_channels, config.dim, config.patch_size, stride=config.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        positions = config.num_tokens if config.prefix_pos_embed else config.grid_size**2
        self.pos_embed = nn.Parameter(torch.zeros(1, positions, config.dim))
        self.pos_drop = nn.Dropout(config.dropout)
        # The skip rate grows linearly with depth, from 0 for the first block to drop_path for the last
        # (Huang et al., 2016; as DeiT and Lee et al., 2021 use it).
        rates = torch.linspace(0, config.drop_path, config.depth).tolist()
        self.blocks = nn.ModuleList(Block(config, rate) for rate in rates)
        self.norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        # Without classes (DINO's and DINOv2's encoders) the model gives [CLS]'s features, as timm's does.
        self.head = nn.Linear(config.dim, config.num_classes) if config.num_classes else nn.Identity()
        # DeiT (Touvron et al., 2021, "Training data-efficient image transformers & distillation through attention"):
        # a distillation token, read by a second head, trained to match a teacher; at inference both heads vote.
        self.dist_token = nn.Parameter(torch.zeros(1, 1, config.dim)) if config.distillation_token else None
        self.head_dist = ((nn.Linear(config.dim, config.num_classes) if config.num_classes else nn.Identity())
                          if config.distillation_token else None)
        # Registers (Darcet et al., 2024, "Vision Transformers Need Registers"): tokens where the model can keep
        # global information that it would otherwise write over unimportant patches.
        self.reg_token = (nn.Parameter(torch.zeros(1, config.register_tokens, config.dim))
                          if config.register_tokens else None)
        self._init_weights()

    def _init_weights(self) -> None:
        # Linear and conv layers keep PyTorch's default init: at this small width it trained markedly faster
        # than the truncated-normal(0.02) init used for large ViTs (67% vs 38% after 3 short epochs on MNIST).
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for token in (self.dist_token, self.reg_token):
            if token is not None:
                nn.init.trunc_normal_(token, std=0.02)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Classify a batch of images: (B, C, H, W) with values in [0, 1] -> logits (B, num_classes)."""
        return self.forward_head(self.forward_features(images))

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """The tokens after the last block and the final norm: images (B, C, H, W) in [0, 1] -> (B, T, D), [CLS]
        then the patches in row-major order (as timm's ``forward_features``)."""
        x = self.embed(images)  # (B, T, D)
        for block in self.blocks:
            x = block(x)[0]  # (B, T, D)
        return self.norm(x)

    def forward_head(self, tokens: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """The answer read from ``forward_features``' tokens (B, T, D): [CLS]'s logits (B, num_classes), or with
        ``pre_logits`` [CLS] itself (B, D), what the head reads (as timm's ``forward_head``). With a distillation
        token, the mean of the two heads' logits (or of the two tokens), as DeiT at inference (timm's
        ``VisionTransformerDistilled``)."""
        cls = tokens[:, 0]  # (B, D)
        if self.head_dist is None:
            return cls if pre_logits else self.head(cls)
        dist = tokens[:, 1]  # (B, D)
        return (cls + dist) / 2 if pre_logits else (self.head(cls) + self.head_dist(dist)) / 2

    def forward_activations(self, images: torch.Tensor, *, attention: bool = False, stream: bool = False,
                            qkv: bool = False, edits: Edits | None = None) -> Activations:
        """One forward pass of images (B, C, H, W) in [0, 1], with what the views read inside it: with ``attention``
        every layer's attention weights (from the explicit path; else the fused one runs); with ``stream`` each
        head's output, the residual stream after each block and the one entering the first; with ``qkv`` each layer's
        queries, keys and values (how attention is computed: ``explain.attention_steps``). ``edits`` (across the
        layers) change heads and the residual stream on the way; everything returned is as they leave it.

        What the logit lens reads is ``self.head(self.norm(stream))``: [CLS] at token 0, the patches from token
        ``config.prefix_tokens``; ``self.norm(stream[:, :, 0])`` (B, L, D) are the [CLS] features the unfamiliar-image
        rule measures (vit_demo/interpret/unfamiliar.py).
        """
        x = self.embed(images)  # (B, T, D)
        embedded = x
        attentions, heads, resid, qkvs = [], [], [], []
        for layer, block in enumerate(self.blocks):
            x, attn, out, layer_qkv = block(x, need_weights=attention, edit=None if edits is None else edits.layer(layer))
            if attention:
                attentions.append(attn)  # (B, H, T, T)
            if stream:
                heads.append(out)  # (B, H, T, Dh)
                resid.append(x)  # (B, T, D)
            if qkv:
                qkvs.append(layer_qkv.transpose(0, 1))  # (B, 3, H, T, Dh)
        logits = self.forward_head(self.norm(x))  # (B, num_classes)
        inside = (torch.stack(heads, 1), torch.stack(resid, 1), embedded) if stream else (None, None, None)
        return Activations(logits, tuple(attentions), *inside, torch.stack(qkvs, 1) if qkv else None)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """The tokens the first block reads: images (B, C, H, W) in [0, 1] -> (B, T, D), the prefix tokens ([CLS]
        first) then the patches in row-major order, each with its position embedding (the patches alone with
        ``prefix_pos_embed`` off). (The masked autoencoder, vit_demo/training/mae.py, keeps [CLS] and a random quarter
        of the patch tokens of the same embedding.)"""
        x = (images - self.mean) / self.std  # (B, C, H, W)
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, N, D), N = grid_size**2
        prefix = [token.expand(x.shape[0], -1, -1) for token in (self.cls_token, self.dist_token, self.reg_token)
                  if token is not None]  # each (B, 1 or registers, D)
        if self.config.prefix_pos_embed:
            x = torch.cat([*prefix, x], dim=1) + self.pos_embed  # (B, T, D), T = prefix_tokens + N
        else:
            x = torch.cat([*prefix, x + self.pos_embed], dim=1)  # (B, T, D)
        return self.pos_drop(x)

    def at_image_size(self, image_size: int) -> VisionTransformer:
        """This model for images of another size (a multiple of the patch size): the same weights, the patches'
        position embeddings resampled to the new grid (``resample_pos_embed``), in the same mode and on the same
        device."""
        config = dataclasses.replace(self.config, image_size=image_size)
        state = self.state_dict()
        kept = self.config.prefix_tokens if self.config.prefix_pos_embed else 0
        state["pos_embed"] = resample_pos_embed(self.pos_embed.detach(), config.grid_size, kept)
        model = VisionTransformer(config).to(self.pos_embed.device)
        model.load_state_dict(state)
        return model.train(self.training)


def resample_pos_embed(pos_embed: torch.Tensor, grid: int, prefix_tokens: int) -> torch.Tensor:
    """Position embeddings (1, prefix_tokens + g*g, D) for a grid of ``grid`` x ``grid`` patches: (1, prefix_tokens +
    grid**2, D). The prefix tokens' are kept; the patches' are resized as a (D, g, g) image, bicubic with
    antialiasing, as timm's ``resample_abs_pos_embed`` (timm/layers/pos_embed.py) does."""
    prefix, patches = pos_embed[:, :prefix_tokens], pos_embed[:, prefix_tokens:]  # (1, P, D), (1, g*g, D)
    g, dim = int(round(patches.shape[1] ** 0.5)), patches.shape[-1]
    if g == grid:
        return pos_embed
    image = patches.float().reshape(1, g, g, dim).permute(0, 3, 1, 2)  # (1, D, g, g)
    image = F.interpolate(image, size=(grid, grid), mode="bicubic", antialias=True)  # (1, D, grid, grid)
    patches = image.permute(0, 2, 3, 1).reshape(1, grid * grid, dim).to(pos_embed.dtype)  # (1, grid**2, D)
    return torch.cat([prefix, patches], dim=1)
