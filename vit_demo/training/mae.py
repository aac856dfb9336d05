"""A masked autoencoder around our VisionTransformer: self-supervised pretraining (He et al. 2022, "Masked
Autoencoders Are Scalable Vision Learners"; reference code facebookresearch/mae, ``models_mae.py``).

Each image loses a random 75% of its patch tokens; the encoder, the ViT's own patch embedding, position embeddings,
[CLS] token, blocks and final norm, reads [CLS] and the quarter that is left. A small decoder (a few narrow blocks of
the same kind) puts a learnt mask token in every hidden place, adds its own position embeddings and predicts every
patch's pixels; the loss is the mean squared error on the hidden patches, each patch's target normalised by its own
mean and variance (the reference's ``norm_pix_loss``). After pretraining the encoder is exactly a VisionTransformer,
so ``train.py --init-from`` fine-tunes it as any other (its head fresh).

As the reference: masking by argsort of per-image noise (``random_masking``), [CLS] kept through the decoder, mask
tokens unshuffled back into place (``forward_decoder``), the loss on hidden patches only (``forward_loss``).
Differences: the position embeddings are the ViT's learnt ones (the reference fixes 2-D sin-cos ones), the noise is
drawn by the caller, from the training loop's seeded generator, so that masking is repeatable and the compiled step
holds no random draw, and the patch target is taken from the image as the encoder reads it (normalised by the
dataset's mean and std), the reference's ImageNet-normalised input.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from vit_demo.model import Block, VisionTransformer


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, p*p*C): each patch's pixels, patches in row-major order (the tokens' order), pixels
    row by row with the channels innermost (the reference's ``patchify``)."""
    B, C, H, W = images.shape
    p = patch_size
    x = images.reshape(B, C, H // p, p, W // p, p)  # (B, C, h, p, w, p)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(B, (H // p) * (W // p), p * p * C)  # (B, h, w, p, p, C) -> (B, N, ppC)


def unpatchify(patches: torch.Tensor, patch_size: int, channels: int) -> torch.Tensor:
    """(B, N, p*p*C) -> (B, C, H, W): the inverse of ``patchify`` for a square grid."""
    B, N, _ = patches.shape
    p, h = patch_size, int(round(N**0.5))
    x = patches.reshape(B, h, h, p, p, channels)  # (B, h, w, p, p, C)
    return x.permute(0, 5, 1, 3, 2, 4).reshape(B, channels, h * p, h * p)  # (B, C, h, p, w, p) -> (B, C, H, W)


def kept_count(patches: int, mask_ratio: float) -> int:
    """How many patch tokens of ``patches`` the encoder sees (at least one)."""
    return max(1, int(patches * (1 - mask_ratio)))


def random_masking(noise: torch.Tensor, keep: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-image random masking from noise (B, N): the ``keep`` patches of lowest noise stay.

    Returns ids_keep (B, keep), the kept patches' indices; ids_restore (B, N), where each patch sits in the shuffled
    order (kept ones first), to put the decoder's tokens back in place; and mask (B, N), 1 for a hidden patch.
    """
    ids_shuffle = noise.argsort(dim=1)  # (B, N): ascending noise, the kept patches first
    ids_restore = ids_shuffle.argsort(dim=1)  # (B, N)
    mask = (ids_restore >= keep).float()  # (B, N): a patch is hidden where its place in the shuffle is past ``keep``
    return ids_shuffle[:, :keep], ids_restore, mask


class MAEDecoder(nn.Module):
    """The decoder: the encoder's tokens narrowed to ``dim``, a mask token in every hidden place, position
    embeddings, ``depth`` pre-norm blocks (our ``Block``), a norm and a linear map to each patch's pixels."""

    def __init__(self, encoder: VisionTransformer, dim: int, depth: int, heads: int) -> None:
        super().__init__()
        c = encoder.config
        # The decoder's blocks are the encoder's kind at its own width, MLP ratio kept, no dropout or stochastic depth.
        config = dataclasses.replace(c, dim=dim, heads=heads, mlp_dim=dim * c.mlp_dim // c.dim, dropout=0.0,
                                     drop_path=0.0)
        self.embed = nn.Linear(c.dim, dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, c.num_tokens, dim))
        self.blocks = nn.ModuleList(Block(config) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.pred = nn.Linear(dim, c.patch_size**2 * c.in_channels)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.mask_token, std=0.02)

    def forward(self, latent: torch.Tensor, ids_restore: torch.Tensor) -> torch.Tensor:
        """latent (B, 1 + K, D_enc): [CLS] and the K kept tokens, in shuffled order; ids_restore (B, N).
        Returns each patch's predicted pixels (B, N, p*p*C)."""
        x = self.embed(latent)  # (B, 1 + K, Dd)
        B, N = ids_restore.shape
        hidden = self.mask_token.expand(B, N - (x.shape[1] - 1), -1)  # (B, N - K, Dd)
        patches = torch.cat([x[:, 1:], hidden], dim=1)  # (B, N, Dd), in shuffled order
        patches = patches.gather(1, ids_restore[..., None].expand(-1, -1, x.shape[2]))  # (B, N, Dd), back in place
        x = torch.cat([x[:, :1], patches], dim=1) + self.pos_embed  # (B, T, Dd)
        for block in self.blocks:
            x = block(x)[0]  # (B, T, Dd)
        return self.pred(self.norm(x)[:, 1:])  # (B, N, p*p*C), [CLS] dropped


class MaskedAutoencoder(nn.Module):
    """An MAE whose encoder is ``encoder``, a VisionTransformer used as it is (its head takes no part)."""

    def __init__(self, encoder: VisionTransformer, mask_ratio: float = 0.75, decoder_dim: int = 128,
                 decoder_depth: int = 2, decoder_heads: int = 4, norm_pix_loss: bool = True) -> None:
        super().__init__()
        assert 0.0 <= mask_ratio < 1.0, f"mask_ratio {mask_ratio} must be in [0, 1)"
        self.encoder = encoder
        self.decoder = MAEDecoder(encoder, decoder_dim, decoder_depth, decoder_heads)
        self.mask_ratio, self.norm_pix_loss = mask_ratio, norm_pix_loss
        self.keep = kept_count(encoder.config.grid_size**2, mask_ratio)

    def encode(self, images: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """images (B, C, H, W) in [0, 1], noise (B, N). Returns the encoder's output for [CLS] and the kept patches
        after the final norm (B, 1 + K, D), ids_restore (B, N) and mask (B, N), 1 = hidden."""
        enc = self.encoder
        x = enc.embed(images)  # (B, T, D): [CLS] then N patches, positions added
        ids_keep, ids_restore, mask = random_masking(noise, self.keep)  # (B, K), (B, N), (B, N)
        kept = x[:, 1:].gather(1, ids_keep[..., None].expand(-1, -1, x.shape[2]))  # (B, K, D)
        x = torch.cat([x[:, :1], kept], dim=1)  # (B, 1 + K, D)
        for block in enc.blocks:
            x = block(x)[0]  # (B, 1 + K, D)
        return enc.norm(x), ids_restore, mask

    def target(self, images: torch.Tensor) -> torch.Tensor:
        """What the decoder should predict: each patch's pixels as the encoder reads them (B, N, p*p*C), with
        ``norm_pix_loss`` normalised by the patch's own mean and variance."""
        enc = self.encoder
        x = patchify((images - enc.mean) / enc.std, enc.config.patch_size)  # (B, N, ppC)
        if self.norm_pix_loss:
            x = (x - x.mean(dim=-1, keepdim=True)) / (x.var(dim=-1, keepdim=True) + 1e-6) ** 0.5
        return x

    def forward(self, images: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """images (B, C, H, W) in [0, 1], noise (B, N) from which the masking is drawn. Returns the loss (the mean
        squared error per value, averaged over the hidden patches), the prediction (B, N, p*p*C) and the mask (B, N)."""
        latent, ids_restore, mask = self.encode(images, noise)
        pred = self.decoder(latent, ids_restore)  # (B, N, ppC)
        per_patch = (pred.float() - self.target(images)).pow(2).mean(dim=-1)  # (B, N)
        return (per_patch * mask).sum() / mask.sum(), pred, mask

    @torch.no_grad()
    def reconstruct(self, images: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the model fills in: images (B, C, H, W) in [0, 1] -> the images with their hidden patches replaced by
        the prediction (B, C, H, W), in [0, 1], and the mask as an image (B, 1, H, W), 1 = hidden. With
        ``norm_pix_loss`` a predicted patch is given the true patch's mean and spread (as the reference's
        visualisation does): the prediction is its shape and texture, not its brightness."""
        enc = self.encoder
        p, C = enc.config.patch_size, enc.config.in_channels
        _, pred, mask = self(images, noise)
        pixels = patchify((images - enc.mean) / enc.std, p)  # (B, N, ppC)
        if self.norm_pix_loss:
            pred = pred * (pixels.var(dim=-1, keepdim=True) + 1e-6) ** 0.5 + pixels.mean(dim=-1, keepdim=True)
        filled = torch.where(mask[..., None].bool(), pred.float(), pixels)  # (B, N, ppC)
        out = unpatchify(filled, p, C) * enc.std + enc.mean  # (B, C, H, W)
        mask_image = unpatchify(mask[..., None].expand(-1, -1, p * p), p, 1)  # (B, 1, H, W)
        return out.clamp(0, 1), mask_image
