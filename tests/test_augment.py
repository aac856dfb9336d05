"""The batched training augmentations: shapes, ranges, what each one does (against torchvision), and repeatability."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import PHOTOS
from PIL import Image
from torchvision.transforms import InterpolationMode, v2

from vit_demo.data.augment import (AUTO_AUGMENT, AUTO_AUGMENT_CIFAR10, OPERATIONS, TRIVIAL_AUGMENT_OPS, TRIVIAL_WIDE,
                                   apply_operations, auto_augment, mix_batches, random_affine,
                                   random_crop_flip, random_erasing, random_stroke_width, trivial_augment)


def photos(n: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed))  # (n, 3, 32, 32)


def test_crop_flip_gives_crops_of_the_padded_image_some_flipped():
    images = photos()
    out = random_crop_flip(images, torch.Generator().manual_seed(1), padding=4)
    padded = F.pad(images, (4,) * 4)
    flips = 0
    for image, crop in zip(padded, out):
        windows = [(image[:, y:y + 32, x:x + 32], flip) for y in range(9) for x in range(9) for flip in (False, True)]
        matches = [flip for window, flip in windows if torch.equal(window.flip(-1) if flip else window, crop)]
        assert matches, "each output must be a (possibly flipped) crop of its padded input"
        flips += matches[0]
    assert 0 < flips < len(images)


def test_stroke_width_thickens_and_thins_digits():
    digit = torch.zeros(1, 1, 28, 28)
    digit[0, 0, 6:22, 12:15] = 1.0  # a vertical bar, 3 px wide
    thick = random_stroke_width(digit, torch.Generator(), thinnest=1.0, thickest=1.0)
    thin = random_stroke_width(digit, torch.Generator(), thinnest=-1.0, thickest=-1.0)
    assert thick.sum() > digit.sum() > thin.sum() > 0
    assert thick.max() == 1.0 and thin.max() == 1.0


def test_affine_moves_ink_but_keeps_most_of_it():
    digits = torch.zeros(16, 1, 28, 28)
    digits[:, :, 8:20, 10:18] = 1.0
    out = random_affine(digits, torch.Generator().manual_seed(0))
    assert out.shape == digits.shape
    assert not torch.allclose(out, digits)
    assert torch.allclose(out.sum(dim=(1, 2, 3)), digits.sum(dim=(1, 2, 3)), rtol=0.35)


def example_photos() -> torch.Tensor:
    """The ten example photos (real CIFAR-10 test images), (10, 3, 32, 32) in [0, 1]."""
    files = sorted(PHOTOS.glob("*.png"))
    return torch.stack([torch.from_numpy(np.array(Image.open(f).convert("RGB"))).permute(2, 0, 1) for f in files]) / 255


def our_name(transform_id: str) -> str:
    """torchvision's name of an operation ("TranslateX") as OPERATIONS has it ("translate_x")."""
    return transform_id.lower().replace("translate", "translate_").replace("shear", "shear_")


def torchvision_op(transform: type, name: str, bin_: int, sign: float, image: torch.Tensor) -> torch.Tensor:
    """What torchvision's TrivialAugmentWide or AutoAugment (``transform``) does to one image for this operation,
    magnitude bin and sign."""
    names = {our_name(name): name for name in transform._AUGMENTATION_SPACE}
    transform_id = names[name]
    magnitudes, signed = transform._AUGMENTATION_SPACE[transform_id]
    space = TRIVIAL_WIDE if transform is v2.TrivialAugmentWide else AUTO_AUGMENT
    table = magnitudes(space.bins, 32, 32)
    magnitude = float(table[bin_]) * (sign if signed else 1.0) if table is not None else 0.0
    return transform()._apply_image_or_video_transform(
        image, transform_id, magnitude, interpolation=InterpolationMode.NEAREST, fill={type(image): None})


@pytest.mark.parametrize(("transform", "name"), [(v2.TrivialAugmentWide, name) for name in TRIVIAL_AUGMENT_OPS]
                         + [(v2.AutoAugment, name) for name in OPERATIONS if name != "identity"])
def test_each_operation_gives_torchvisions_pixels(transform, name):
    """TrivialAugment Wide's 14 operations and AutoAugment's 14 (its own magnitudes), against torchvision's."""
    images = example_photos()
    B, space = len(images), TRIVIAL_WIDE if transform is v2.TrivialAugmentWide else AUTO_AUGMENT
    for bin_ in sorted({0, space.bins // 4, space.bins // 2, space.bins - 1}):
        for sign in (1.0, -1.0):
            ours = apply_operations(images, torch.full((B,), OPERATIONS.index(name)), torch.full((B,), bin_),
                                    torch.full((B,), sign), space)
            theirs = torch.stack([torchvision_op(transform, name, bin_, sign, image) for image in images])
            differ = ((ours - theirs).abs().amax(1) > 1e-5).float().mean()  # the share of pixels (B, H, W)
            # A shear can land a pixel's sample exactly half-way between two: the two warps' last bits pick
            # either neighbour there (some 0.6% of pixels at AutoAugment's shear 0.2); everything else is equal.
            allowed = 0.01 if transform is v2.AutoAugment and name.startswith("shear") else 0
            assert differ <= allowed, f"{name}, bin {bin_}, sign {sign}: {differ:.2%}"


def test_the_auto_augment_policy_is_torchvisions_cifar10_policy():
    theirs = v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10)._policies
    assert [list(pair) for pair in AUTO_AUGMENT_CIFAR10] == [
        [(our_name(name), chance, strength or 0) for name, chance, strength in pair] for pair in theirs]


def test_auto_augment_draws_per_image_and_repeats_with_a_seed():
    images = example_photos()[3:4].repeat(64, 1, 1, 1)  # one photo, 64 times
    out = auto_augment(images, torch.Generator().manual_seed(3))
    assert torch.equal(out, auto_augment(images, torch.Generator().manual_seed(3)))
    assert out.shape == images.shape and out.min() >= 0 and out.max() <= 1
    changed = (out != images).flatten(1).any(1)
    # Each image: a sub-policy, then two operations with their chances (the CIFAR-10 policy applies at least one to
    # about 3 images in 4); 64 copies come out as many different images, some untouched.
    assert 30 <= changed.sum() <= 63
    assert len({tuple(image.flatten()[::97].tolist()) for image in out}) >= 20


def test_trivial_augment_draws_per_image_and_repeats_with_a_seed():
    images = example_photos()[3:4].repeat(64, 1, 1, 1)  # one photo, 64 times
    out = trivial_augment(images, torch.Generator().manual_seed(3))
    again = trivial_augment(images, torch.Generator().manual_seed(3))
    other = trivial_augment(images, torch.Generator().manual_seed(4))
    assert out.shape == images.shape and out.dtype == images.dtype
    assert out.min() >= 0 and out.max() <= 1
    assert torch.equal(out, again) and not torch.equal(out, other)
    distinct = {tuple(image.flatten()[::97].tolist()) for image in out}
    assert len(distinct) >= 40  # 64 copies of one photo come out as many different images


def test_random_erasing_fills_one_rectangle_per_chosen_image_with_the_mean():
    images = torch.rand(200, 3, 32, 32, generator=torch.Generator().manual_seed(0)) * 0.5 + 0.5  # all > 0.5
    mean = (0.1, 0.2, 0.3)
    out = random_erasing(images, torch.Generator().manual_seed(1), p=0.25, fill=mean)
    erased = (out != images).any(1)  # (B, H, W)
    chosen = erased.flatten(1).any(1)
    assert 30 <= chosen.sum() <= 70  # about a quarter of 200
    for image, mask in zip(out[chosen], erased[chosen]):
        rows, cols = mask.any(1).nonzero().flatten(), mask.any(0).nonzero().flatten()
        box = mask[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
        assert box.all() and box.sum() == mask.sum()  # a single full rectangle
        assert 0.02 * 1024 * 0.5 <= mask.sum() <= 0.4 * 1024 * 1.5
        assert torch.equal(image[:, mask], torch.tensor(mean).view(3, 1).expand(3, int(mask.sum())))
    assert len({tuple(m.nonzero()[0].tolist()) for m in erased[chosen]}) > 10  # rectangles differ
    assert torch.equal(random_erasing(images, torch.Generator(), p=0.0, fill=mean), images)


def test_mix_batches_targets_are_distributions_over_the_classes():
    images, targets = photos(), F.one_hot(torch.arange(32) % 10, 10).float()
    for mixup, cutmix in ((1.0, 0.0), (0.0, 1.0), (0.8, 1.0)):
        for seed in range(5):
            mixed, mixed_targets = mix_batches(images, targets, 8, torch.Generator().manual_seed(seed), 1.0, mixup,
                                               cutmix)
            assert mixed.shape == images.shape and mixed_targets.shape == (32, 10)
            assert torch.allclose(mixed_targets.sum(1), torch.ones(32))
            assert (mixed_targets.max(1).values >= 0.5 - 1e-6).all() and (mixed_targets > 0).sum(1).max() <= 2
            assert mixed.min() >= 0 and mixed.max() <= 1


def one_mix(x: torch.Tensor, t: torch.Tensor, mixed_x: torch.Tensor, mixed_t: torch.Tensor) -> str:
    """How one batch was mixed: "none", "mixup" (one lambda for the whole batch, with its neighbour in the batch) or
    "cutmix" (one box for the whole batch, the neighbour's pixels inside it); fails on anything else."""
    partner_x, partner_t = x.roll(1, 0), t.roll(1, 0)
    if torch.equal(mixed_x, x) and torch.equal(mixed_t, t):
        return "none"
    own = mixed_t[0, t[0].argmax()] if t[0].argmax() != partner_t[0].argmax() else None
    assert own is not None
    assert torch.allclose(mixed_t, own * t + (1 - own) * partner_t, atol=1e-6)  # one share for the whole batch
    inside = (mixed_x == partner_x) & (mixed_x != x)  # (B, C, H, W)
    if torch.allclose(mixed_x, own * x + (1 - own) * partner_x, atol=1e-5) and not inside.all(1).any():
        return "mixup"
    box = inside.all(1).any(0)  # (H, W): the box, the same for every image of the batch
    rows, cols = box.any(1).nonzero().flatten(), box.any(0).nonzero().flatten()
    mask = torch.zeros_like(box)
    mask[rows.min():rows.max() + 1, cols.min():cols.max() + 1] = True
    assert torch.equal(mixed_x, torch.where(mask, partner_x, x))  # partner inside one rectangle, itself outside
    assert float(own) == pytest.approx(1 - mask.sum().item() / mask.numel(), abs=1e-6)
    return "cutmix"


def test_mix_batches_mixes_each_batch_within_itself_with_its_own_draw():
    """Many batches at once: each batch its own coin, kind and strength, every image mixed only with its neighbour
    in its own batch; about the chosen share of batches mixed, half of them by CutMix."""
    B, N = 8, 120
    images = torch.rand(N * B, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    targets = F.one_hot(torch.arange(N * B) % 10, 10).float()
    mixed, mixed_targets = mix_batches(images, targets, B, torch.Generator().manual_seed(1), 0.5, 1.0, 1.0)
    kinds = [one_mix(images[n * B:(n + 1) * B], targets[n * B:(n + 1) * B], mixed[n * B:(n + 1) * B],
                     mixed_targets[n * B:(n + 1) * B]) for n in range(N)]
    assert 40 <= kinds.count("none") <= 80
    assert 15 <= kinds.count("mixup") <= 45 and 15 <= kinds.count("cutmix") <= 45
    shares = {round(float(mixed_targets[n * B, n * B % 10]), 6) for n in range(N) if kinds[n] == "mixup"}
    assert len(shares) == kinds.count("mixup")  # every mixed batch its own lambda


def test_mix_batches_with_both_turned_off_is_refused():
    with pytest.raises(ValueError, match="mixup_alpha or cutmix_alpha"):
        mix_batches(photos(), torch.eye(32, 10), 32, torch.Generator(), 1.0, 0.0, 0.0)


def test_auto_augment_is_a_training_option_in_place_of_trivial_augment():
    """train.py --auto-augment: the photo recipe's TrivialAugment gives way to AutoAugment's CIFAR-10 policy; both
    at once is refused; a training batch then goes through AutoAugment (on the batch's device)."""
    from vit_demo.data.datasets import dataset_spec
    from vit_demo.training.options import build_parser, recipe_from_args
    from vit_demo.training.step import training_batches

    recipe = recipe_from_args(build_parser().parse_args(["--dataset", "cifar10", "--auto-augment"]))
    assert recipe.auto_augment and not recipe.trivial_augment
    with pytest.raises(SystemExit, match="not both"):
        recipe_from_args(build_parser().parse_args(["--dataset", "cifar10", "--auto-augment", "--trivial-augment"]))
    recipe = dataclasses.replace(recipe, random_erasing=0.0, mixup_alpha=0.0, cutmix_alpha=0.0)
    images = (example_photos() * 255).round().to(torch.uint8)
    x, target = training_batches(images, torch.zeros(len(images), dtype=torch.long), recipe, dataset_spec("cifar10"),
                                 torch.Generator().manual_seed(0), len(images))
    assert x.shape == images.shape and target.shape == (len(images), 10) and 0 <= x.min() and x.max() <= 1
