"""Batched data augmentation on the training device: whole batches at once, no PIL per sample."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchvision.transforms import v2


def random_affine(
    images: torch.Tensor,
    generator: torch.Generator,
    degrees: float = 15.0,
    translate: float = 0.1,
    scale: tuple[float, float] = (0.85, 1.15),
    shear: float = 10.0,
) -> torch.Tensor:
    """Rotate, shift, scale and shear each image of a (B, C, H, W) batch by its own random amount."""
    B = images.shape[0]

    def uniform(low: float, high: float) -> torch.Tensor:
        return torch.empty(B).uniform_(low, high, generator=generator)

    angle = torch.deg2rad(uniform(-degrees, degrees))
    shear_x = torch.tan(torch.deg2rad(uniform(-shear, shear)))
    zoom = uniform(*scale)
    shift = torch.stack([uniform(-translate, translate), uniform(-translate, translate)], dim=1)  # (B, 2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], 1)  # (B, 2, 2)
    shearing = torch.eye(2).repeat(B, 1, 1)
    shearing[:, 0, 1] = shear_x
    # affine_grid maps output coordinates to input coordinates, so the forward transform is inverted.
    forward = rotation @ shearing * zoom.view(B, 1, 1)  # (B, 2, 2)
    inverse = torch.linalg.inv(forward)
    theta = torch.cat([inverse, -(inverse @ (2 * shift).unsqueeze(-1))], dim=2)  # (B, 2, 3)
    grid = F.affine_grid(theta.to(images), list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def random_stroke_width(
    images: torch.Tensor, generator: torch.Generator, thinnest: float = -0.7, thickest: float = 1.0
) -> torch.Tensor:
    """Thicken or thin the (bright) strokes of a (B, 1, H, W) batch by a random amount per image.

    Hand-drawn digits come from thin pens and thick brushes; this teaches the model both. Each image is
    blended towards its 3x3 dilation (amount > 0) or erosion (amount < 0), then rescaled so that its
    brightest pixel is 1 again, as preprocessing does for a drawing.
    """
    B = images.shape[0]
    amount = torch.empty(B, 1, 1, 1).uniform_(thinnest, thickest, generator=generator).to(images)
    thicker = F.max_pool2d(images, 3, stride=1, padding=1)
    thinner = -F.max_pool2d(-images, 3, stride=1, padding=1)
    target = torch.where(amount > 0, thicker, thinner)
    images = images + amount.abs() * (target - images)
    return images / images.amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-3)


def augment_digits(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The MNIST training augmentation: random affine, then varied stroke width. (B, 1, H, W) in [0, 1]."""
    images = random_stroke_width(images, generator)
    return random_affine(images, generator).clamp_(0.0, 1.0)


def random_crop_flip(images: torch.Tensor, generator: torch.Generator, padding: int = 4) -> torch.Tensor:
    """Random crop from a zero-padded image, then a random horizontal flip, per image of a (B, C, H, W) batch."""
    B, C, H, W = images.shape
    padded = F.pad(images, (padding,) * 4)  # (B, C, H + 2p, W + 2p)
    dy, dx = torch.randint(0, 2 * padding + 1, (2, B, 1), generator=generator).to(images.device)
    rows = dy + torch.arange(H, device=images.device)  # (B, H)
    cols = dx + torch.arange(W, device=images.device)  # (B, W)
    flip = (torch.rand(B, 1, generator=generator) < 0.5).to(images.device)
    cols = torch.where(flip, cols.flip(1), cols)
    batch = torch.arange(B, device=images.device).view(B, 1, 1, 1)
    channel = torch.arange(C, device=images.device).view(1, C, 1, 1)
    return padded[batch, channel, rows.view(B, 1, H, 1), cols.view(B, 1, 1, W)]  # (B, C, H, W)


def augment_photos(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The CIFAR-10 training augmentation: random crop with padding and horizontal flips. (B, 3, H, W) in [0, 1]."""
    return random_crop_flip(images, generator)


TRIVIAL_AUGMENT_GROUPS = 16


def trivial_augment(images: torch.Tensor, groups: int = TRIVIAL_AUGMENT_GROUPS) -> torch.Tensor:
    """TrivialAugment (Mueller & Hutter, 2021) on a (B, C, H, W) batch in [0, 1], on the batch's device.

    torchvision's TrivialAugmentWide draws one operation and strength per call, so the batch is cut into
    ``groups`` groups that each get their own: a few calls per batch instead of one per image. It draws
    from torch's global generator, which training seeds per epoch, so a resumed run repeats exactly.
    """
    augment = v2.TrivialAugmentWide()
    return torch.cat([augment(group) for group in images.chunk(groups)])


def mix_batch(images: torch.Tensor, labels: torch.Tensor, num_classes: int, mixup_alpha: float,
              cutmix_alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """MixUp or CutMix (one of them, at random) over a (B, C, H, W) batch -> the images and (B, classes) targets.

    An alpha of 0 turns that one off; at least one must be on.
    """
    choices = [v2.MixUp(alpha=mixup_alpha, num_classes=num_classes)] if mixup_alpha > 0 else []
    choices += [v2.CutMix(alpha=cutmix_alpha, num_classes=num_classes)] if cutmix_alpha > 0 else []
    if not choices:
        raise ValueError("mix_batch needs a positive mixup_alpha or cutmix_alpha")
    return v2.RandomChoice(choices)(images, labels)


AUGMENTATIONS = {"mnist": augment_digits, "cifar10": augment_photos}
