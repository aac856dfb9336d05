"""Batched data augmentation on the training device: each image its own random draw, whole batches at once.

Every function takes a ``torch.Generator`` on the images' device and draws all its random numbers from it,
so a batch on the GPU never waits for the host and a seeded generator repeats the same augmentation. Constants are
Python numbers or made on the device, never copied from host memory: such a copy makes the host wait for the GPU.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import torch.nn.functional as F


def random_affine(
    images: torch.Tensor,
    generator: torch.Generator,
    degrees: float = 15.0,
    translate: float = 0.1,
    scale: tuple[float, float] = (0.85, 1.15),
    shear: float = 10.0,
) -> torch.Tensor:
    """Rotate, shift, scale and shear each image of a (B, C, H, W) batch by its own random amount."""
    B, device = images.shape[0], images.device

    def uniform(low: float, high: float) -> torch.Tensor:
        return torch.empty(B, device=device).uniform_(low, high, generator=generator)

    angle = torch.deg2rad(uniform(-degrees, degrees))
    shear_x = torch.tan(torch.deg2rad(uniform(-shear, shear)))
    zoom = uniform(*scale)
    shift = torch.stack([uniform(-translate, translate), uniform(-translate, translate)], dim=1)  # (B, 2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], 1)  # (B, 2, 2)
    shearing = torch.eye(2, device=device).repeat(B, 1, 1)
    shearing[:, 0, 1] = shear_x
    # affine_grid maps output coordinates to input coordinates, so the forward transform is inverted.
    forward = rotation @ shearing * zoom.view(B, 1, 1)  # (B, 2, 2)
    inverse = torch.linalg.inv_ex(forward).inverse  # never singular: zoom > 0; inv_ex skips the check's host sync
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
    amount = torch.empty(B, 1, 1, 1, device=images.device).uniform_(thinnest, thickest, generator=generator)
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
    dy, dx = torch.randint(0, 2 * padding + 1, (2, B, 1), generator=generator, device=images.device)
    rows = dy + torch.arange(H, device=images.device)  # (B, H)
    cols = dx + torch.arange(W, device=images.device)  # (B, W)
    flip = torch.rand(B, 1, generator=generator, device=images.device) < 0.5
    cols = torch.where(flip, cols.flip(1), cols)
    batch = torch.arange(B, device=images.device).view(B, 1, 1, 1)
    channel = torch.arange(C, device=images.device).view(1, C, 1, 1)
    return padded[batch, channel, rows.view(B, 1, H, 1), cols.view(B, 1, 1, W)]  # (B, C, H, W)


def augment_photos(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The CIFAR-10 training augmentation: random crop with padding and horizontal flips. (B, 3, H, W) in [0, 1]."""
    return random_crop_flip(images, generator)


# The operations TrivialAugment Wide and AutoAugment choose from, as torchvision has them
# (torchvision/transforms/v2/_auto_augment.py), in one order: an image's operation is an index into it.
OPERATIONS = ("identity", "shear_x", "shear_y", "translate_x", "translate_y", "rotate", "brightness", "color",
              "contrast", "sharpness", "posterize", "solarize", "autocontrast", "equalize", "invert")
TRIVIAL_AUGMENT_OPS = OPERATIONS[:-1]  # TrivialAugment Wide's 14: all but invert
_GEOMETRIC = ("shear_x", "shear_y", "translate_x", "translate_y", "rotate")
_BLENDS = ("brightness", "color", "contrast", "sharpness")  # blend towards a degenerate image by 1 + magnitude
_SIGNED = _GEOMETRIC + _BLENDS


@dataclasses.dataclass(frozen=True)
class AugmentSpace:
    """How strong each operation gets, as torchvision's _AUGMENTATION_SPACE tables: magnitude bin k of ``bins`` is
    k / (bins - 1) of the way from none to the strongest."""

    bins: int
    shear: float  # the strongest shear
    translate: float  # the longest shift: pixels, or with ``translate_share`` a share of the image's side
    translate_share: bool
    rotate: float  # degrees
    blend: float  # brightness, colour, contrast, sharpness: a factor of 1 +- this
    fewest_bits: int  # posterize keeps 8 bits down to this


TRIVIAL_WIDE = AugmentSpace(bins=31, shear=0.99, translate=32.0, translate_share=False, rotate=135.0, blend=0.99,
                            fewest_bits=2)
AUTO_AUGMENT = AugmentSpace(bins=10, shear=0.3, translate=150 / 331, translate_share=True, rotate=30.0, blend=0.9,
                            fewest_bits=4)

# AutoAugment's CIFAR-10 policy (Cubuk et al., 2019; torchvision's AutoAugmentPolicy.CIFAR10): 25 sub-policies of
# two operations, each (operation, probability, magnitude bin of AUTO_AUGMENT's 10).
AUTO_AUGMENT_CIFAR10 = (
    (("invert", 0.1, 0), ("contrast", 0.2, 6)),
    (("rotate", 0.7, 2), ("translate_x", 0.3, 9)),
    (("sharpness", 0.8, 1), ("sharpness", 0.9, 3)),
    (("shear_y", 0.5, 8), ("translate_y", 0.7, 9)),
    (("autocontrast", 0.5, 0), ("equalize", 0.9, 0)),
    (("shear_y", 0.2, 7), ("posterize", 0.3, 7)),
    (("color", 0.4, 3), ("brightness", 0.6, 7)),
    (("sharpness", 0.3, 9), ("brightness", 0.7, 9)),
    (("equalize", 0.6, 0), ("equalize", 0.5, 0)),
    (("contrast", 0.6, 7), ("sharpness", 0.6, 5)),
    (("color", 0.7, 7), ("translate_x", 0.5, 8)),
    (("equalize", 0.3, 0), ("autocontrast", 0.4, 0)),
    (("translate_y", 0.4, 3), ("sharpness", 0.2, 6)),
    (("brightness", 0.9, 6), ("color", 0.2, 8)),
    (("solarize", 0.5, 2), ("invert", 0.0, 0)),
    (("equalize", 0.2, 0), ("autocontrast", 0.6, 0)),
    (("equalize", 0.2, 0), ("equalize", 0.6, 0)),
    (("color", 0.9, 9), ("equalize", 0.6, 0)),
    (("autocontrast", 0.8, 0), ("solarize", 0.2, 8)),
    (("brightness", 0.1, 3), ("color", 0.7, 0)),
    (("solarize", 0.4, 5), ("autocontrast", 0.9, 0)),
    (("translate_y", 0.9, 9), ("translate_y", 0.7, 9)),
    (("autocontrast", 0.9, 0), ("solarize", 0.8, 3)),
    (("equalize", 0.8, 0), ("invert", 0.1, 0)),
    (("translate_y", 0.7, 9), ("autocontrast", 0.9, 0)),
)


def trivial_augment(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """TrivialAugment Wide (Mueller & Hutter, 2021) with its own operation and strength for every image.

    ``images``: (B, C, H, W) in [0, 1]; ``generator`` lives on the images' device, so everything runs there.
    Each image draws one of the 14 operations, a magnitude bin and, for the signed operations, a sign, as
    torchvision's ``TrivialAugmentWide`` does for a single image.
    """
    B, device = images.shape[0], images.device
    op = torch.randint(len(TRIVIAL_AUGMENT_OPS), (B,), generator=generator, device=device)
    strength = torch.randint(TRIVIAL_WIDE.bins, (B,), generator=generator, device=device)
    return apply_operations(images, op, strength, random_sign(B, generator, device), TRIVIAL_WIDE)


def auto_augment(images: torch.Tensor, generator: torch.Generator,
                 policy: tuple = AUTO_AUGMENT_CIFAR10) -> torch.Tensor:
    """AutoAugment (Cubuk et al., 2019) with its CIFAR-10 policy, every image its own draw, as torchvision's
    ``AutoAugment`` does for a single image: a sub-policy, then each of its two operations with its probability
    (at its magnitude, signed at random where it can be). (B, C, H, W) in [0, 1], on the images' device."""
    B, device = images.shape[0], images.device
    ops, chances, strengths = policy_tables(policy, device)  # (P, 2) each
    pick = torch.randint(len(policy), (B,), generator=generator, device=device)
    for step in range(2):
        applied = torch.rand(B, generator=generator, device=device) <= chances[pick, step]  # as torchvision: <=
        op = torch.where(applied, ops[pick, step], 0)  # 0: identity
        images = apply_operations(images, op, strengths[pick, step], random_sign(B, generator, device), AUTO_AUGMENT)
    return images


@functools.cache
def policy_tables(policy: tuple, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A policy's operations (indices into OPERATIONS), chances and magnitude bins, (P, 2) each, on ``device``: made
    once, not copied to the device for every batch."""
    ops = torch.tensor([[OPERATIONS.index(name) for name, _, _ in pair] for pair in policy], device=device)
    chances = torch.tensor([[chance for _, chance, _ in pair] for pair in policy], device=device)
    strengths = torch.tensor([[strength for _, _, strength in pair] for pair in policy], device=device)
    return ops, chances, strengths


def random_sign(count: int, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.rand(count, generator=generator, device=device).lt(0.5).float().mul(2).sub(1)  # (count,) of +-1


def apply_operations(images: torch.Tensor, op: torch.Tensor, strength: torch.Tensor, sign: torch.Tensor,
                     space: AugmentSpace = TRIVIAL_WIDE) -> torch.Tensor:
    """Apply operation ``op[i]`` (an index into OPERATIONS) at magnitude bin ``strength[i]`` of ``space`` and
    ``sign[i]`` (+-1, for the signed operations) to image i of a (B, C, H, W) batch in [0, 1].

    No Python loop over images or operations: every candidate is computed for the whole batch (cheap at
    32x32) and each image keeps its own. The geometric operations are one affine warp of the whole batch.
    """
    B, C, H, W = images.shape
    bins = space.bins
    is_op = {name: op == i for i, name in enumerate(OPERATIONS)}  # name -> (B,) bool
    sign = torch.where(_any(is_op, _SIGNED), sign, 1.0)  # (B,)

    def magnitude(first: float, last: float) -> torch.Tensor:  # (B,): torchvision's own table, bin by bin
        return torch.linspace(first, last, bins, device=images.device)[strength]

    # Geometry. affine_grid takes, for each output pixel, where to sample the input, in [-1, 1] coordinates.
    # Shears pivot on the top-left corner and rotations on the centre; each operation gives the same pixels
    # as torchvision's for the same magnitude and sign (a test checks this).
    shear = magnitude(0, space.shear) * sign
    longest = (space.translate * W, space.translate * H) if space.translate_share else (space.translate,) * 2
    # Shifts by whole pixels, as torchvision's int(magnitude); sampling moves back.
    shift_x, shift_y = (-(magnitude(0, side) * sign).trunc() for side in longest)
    angle = torch.deg2rad(magnitude(0, space.rotate) * sign)
    cos, sin = torch.cos(angle), torch.sin(angle)
    zero, one = torch.zeros_like(sign), torch.ones_like(sign)
    rotate, shear_x, shear_y = is_op["rotate"], is_op["shear_x"], is_op["shear_y"]
    theta = torch.stack([
        torch.stack([torch.where(rotate, cos, one), torch.where(rotate, -sin * H / W, torch.where(shear_x, shear * H / W, zero)),
                     torch.where(shear_x, shear * H / W, torch.where(is_op["translate_x"], 2 * shift_x / W, zero))], -1),
        torch.stack([torch.where(rotate, sin * W / H, torch.where(shear_y, shear * W / H, zero)), torch.where(rotate, cos, one),
                     torch.where(shear_y, shear * W / H, torch.where(is_op["translate_y"], 2 * shift_y / H, zero))], -1),
    ], 1)  # (B, 2, 3)
    grid = F.affine_grid(theta.to(images.dtype), [B, C, H, W], align_corners=False)
    warped = F.grid_sample(images, grid, mode="nearest", padding_mode="zeros", align_corners=False)
    out = torch.where(_any(is_op, _GEOMETRIC).view(B, 1, 1, 1), warped, images)

    # Colour: brightness, colour, contrast and sharpness blend towards a degenerate image by a factor 1 + m.
    gray = grayscale(images)  # (B, 1, H, W)
    degenerate = torch.where(is_op["brightness"].view(B, 1, 1, 1), torch.zeros_like(images),
                 torch.where(is_op["color"].view(B, 1, 1, 1), gray.expand_as(images),
                 torch.where(is_op["contrast"].view(B, 1, 1, 1), gray.mean(dim=(1, 2, 3), keepdim=True).expand_as(images),
                             smooth(images))))
    factor = (1 + magnitude(0, space.blend) * sign).view(B, 1, 1, 1)
    blended = (factor * images + (1 - factor) * degenerate).clamp(0, 1)
    out = torch.where(_any(is_op, _BLENDS).view(B, 1, 1, 1), blended, out)

    bits = (8 - torch.arange(bins, device=images.device) / ((bins - 1) / (8 - space.fewest_bits))).round()[strength]
    levels = torch.exp2(bits).view(B, 1, 1, 1)  # posterize
    posterized = (images * levels).floor().clamp(max=levels - 1) / levels
    threshold = magnitude(1, 0).view(B, 1, 1, 1)  # solarize above 1..0
    solarized = torch.where(images >= threshold, 1 - images, images)
    from torchvision.transforms.v2.functional import equalize  # here alone: importing torchvision takes seconds

    for name, result in (("posterize", posterized), ("solarize", solarized), ("autocontrast", autocontrast(images)),
                         ("equalize", equalize(images)), ("invert", 1 - images)):
        out = torch.where(is_op[name].view(B, 1, 1, 1), result, out)
    return out


def _any(is_op: dict[str, torch.Tensor], names: tuple[str, ...]) -> torch.Tensor:
    return torch.stack([is_op[name] for name in names]).any(0)


def grayscale(images: torch.Tensor) -> torch.Tensor:
    """(B, 3, H, W) or (B, 1, H, W) -> (B, 1, H, W) luma, with torchvision's weights."""
    if images.shape[1] == 1:
        return images
    r, g, b = images.unbind(1)  # (B, H, W) each; weights as Python numbers: no copy from the host
    return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(1)


def smooth(images: torch.Tensor) -> torch.Tensor:
    """The sharpness operation's degenerate image: a 3x3 smoothing (1s around a 5, over 13) inside a
    one-pixel border that stays as it is, as in torchvision and PIL."""
    C = images.shape[1]
    kernel = images.new_ones(C, 1, 3, 3)  # made on the device: no copy from the host
    kernel[:, :, 1, 1] = 5
    inner = F.conv2d(images, kernel / 13, groups=C)  # (B, C, H - 2, W - 2)
    return torch.cat([images[:, :, :1], torch.cat([images[:, :, 1:-1, :1], inner, images[:, :, 1:-1, -1:]], 3),
                      images[:, :, -1:]], 2)


def autocontrast(images: torch.Tensor) -> torch.Tensor:
    """Stretch each channel of each image to span [0, 1]; a flat channel stays as it is."""
    low = images.amin(dim=(2, 3), keepdim=True)
    high = images.amax(dim=(2, 3), keepdim=True)
    flat = high == low
    return torch.where(flat, images, (images - low) / torch.where(flat, 1.0, high - low)).clamp(0, 1)


def random_erasing(images: torch.Tensor, generator: torch.Generator, p: float, fill: tuple[float, ...],
                   max_area: float = 0.4, min_area: float = 0.02, min_aspect: float = 0.3) -> torch.Tensor:
    """Random erasing (Zhong et al., 2020): with probability ``p``, fill a random rectangle of each image with ``fill``.

    As the reference code that Lee et al. (2021) train with: area uniform in [``min_area``, ``max_area``] of
    the image, aspect ratio uniform in [``min_aspect``, 1 / ``min_aspect``], filled with the dataset's mean
    colour (zero after normalisation). A rectangle too tall or wide is clipped to the image, where the
    reference draws again. (B, C, H, W) in [0, 1], on the images' device.
    """
    B, C, H, W = images.shape
    device = images.device

    def uniform(low: float, high: float) -> torch.Tensor:
        return torch.empty(B, device=device).uniform_(low, high, generator=generator)

    area = uniform(min_area, max_area) * H * W
    aspect = uniform(min_aspect, 1 / min_aspect)
    h = (area * aspect).sqrt().round().clamp(1, H)  # (B,)
    w = (area / aspect).sqrt().round().clamp(1, W)
    top = (uniform(0, 1) * (H - h + 1)).floor()
    left = (uniform(0, 1) * (W - w + 1)).floor()
    rows = torch.arange(H, device=device)
    cols = torch.arange(W, device=device)
    inside_rows = (rows >= top[:, None]) & (rows < (top + h)[:, None])  # (B, H)
    inside_cols = (cols >= left[:, None]) & (cols < (left + w)[:, None])  # (B, W)
    erase = uniform(0, 1) < p  # (B,)
    mask = (inside_rows[:, :, None] & inside_cols[:, None, :] & erase[:, None, None]).unsqueeze(1)  # (B, 1, H, W)
    colour = torch.stack([images.new_full((), value) for value in fill]).view(1, C, 1, 1)  # no copy from the host
    return torch.where(mask, colour, images)


def mix_batches(images: torch.Tensor, targets: torch.Tensor, batch_size: int, generator: torch.Generator, p: float,
                mixup_alpha: float, cutmix_alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """MixUp (Zhang et al., 2018) or CutMix (Yun et al., 2019) of whole batches, each with probability ``p``.

    ``images`` (N * batch_size, C, H, W) and ``targets`` (N * batch_size, classes) class probabilities hold N
    batches one after another. Each image is mixed with its neighbour in its own batch (a roll by one). With both
    on, a mixed batch gets one of the two at random, as in Lee et al.'s (2021) training code. Every batch draws
    its own coin, kind, strength and CutMix box from ``generator`` on the device, so nothing waits for the host
    and a whole epoch's batches can be mixed at once. An alpha of 0 turns that one off; at least one must be on.
    """
    if mixup_alpha <= 0 and cutmix_alpha <= 0:
        raise ValueError("mix_batches needs a positive mixup_alpha or cutmix_alpha")
    M, C, H, W = images.shape
    N, device = M // batch_size, images.device
    x = images.view(N, batch_size, C, H, W)
    t = targets.view(N, batch_size, -1)  # (N, B, classes)
    partner_x, partner_t = x.roll(1, 1), t.roll(1, 1)
    mixed = torch.rand(N, generator=generator, device=device) < p  # (N,)
    cutmix_share = 0.5 if mixup_alpha > 0 and cutmix_alpha > 0 else float(cutmix_alpha > 0)
    cutmix = torch.rand(N, generator=generator, device=device) < cutmix_share  # (N,)
    alpha = torch.where(cutmix, cutmix_alpha, mixup_alpha).repeat(2, 1)  # (2, N): the chosen kind's, always > 0
    gamma = torch._standard_gamma(alpha, generator=generator)  # (2, N)
    lam = gamma[0] / (gamma[0] + gamma[1])  # (N,) ~ Beta(alpha, alpha)
    # CutMix: a box of sides sqrt(1 - lam) of the image's around a random centre, clipped to the image.
    cut = (1 - lam).sqrt()
    cy = torch.randint(H, (N,), generator=generator, device=device)
    cx = torch.randint(W, (N,), generator=generator, device=device)
    half_h, half_w = (H * cut).floor() // 2, (W * cut).floor() // 2  # (N,)
    rows, cols = torch.arange(H, device=device), torch.arange(W, device=device)
    inside_rows = (rows >= (cy - half_h)[:, None]) & (rows < (cy + half_h)[:, None])  # (N, H)
    inside_cols = (cols >= (cx - half_w)[:, None]) & (cols < (cx + half_w)[:, None])  # (N, W)
    box = inside_rows[:, :, None] & inside_cols[:, None, :] & (mixed & cutmix)[:, None, None]  # (N, H, W)
    own = torch.where(cutmix, 1 - box.sum((1, 2)) / (H * W), lam)  # (N,) the share of each image that is its own
    blend = (mixed & ~cutmix).view(N, 1, 1, 1, 1)
    out = torch.where(blend, lam.view(N, 1, 1, 1, 1) * x + (1 - lam.view(N, 1, 1, 1, 1)) * partner_x, x)
    out = torch.where(box.view(N, 1, 1, H, W), partner_x, out)  # (N, B, C, H, W)
    own = torch.where(mixed, own, 1.0).view(N, 1, 1)
    return out.view(M, C, H, W), (own * t + (1 - own) * partner_t).view(M, -1)


AUGMENTATIONS = {"mnist": augment_digits, "cifar10": augment_photos}
