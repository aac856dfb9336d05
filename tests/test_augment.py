"""The batched training augmentations: shapes, ranges, what each one does, and repeatability."""

import pytest
import torch
import torch.nn.functional as F

from vit_demo.augment import mix_batch, random_affine, random_crop_flip, random_stroke_width, trivial_augment


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


def test_trivial_augment_keeps_shape_and_range_varies_by_group_and_repeats_under_a_seed():
    images = photos(64)
    torch.manual_seed(3)
    out = trivial_augment(images, groups=16)
    torch.manual_seed(3)
    again = trivial_augment(images, groups=16)
    assert out.shape == images.shape and out.dtype == images.dtype
    assert out.min() >= 0 and out.max() <= 1
    assert torch.equal(out, again)
    changed = [(o - i).abs().amax().item() > 1e-6 for o, i in zip(out.chunk(16), images.chunk(16))]
    assert sum(changed) >= 8  # most groups draw an operation other than identity


def test_mix_batch_targets_are_distributions_over_the_classes():
    images, labels = photos(), torch.arange(32) % 10
    for mixup, cutmix in ((0.8, 0.0), (0.0, 1.0), (0.8, 1.0)):
        torch.manual_seed(0)
        mixed, targets = mix_batch(images, labels, 10, mixup, cutmix)
        assert mixed.shape == images.shape and targets.shape == (32, 10)
        assert torch.allclose(targets.sum(1), torch.ones(32))
        assert (targets.max(1).values >= 0.5).all() and (targets > 0).sum(1).max() == 2
        assert mixed.min() >= 0 and mixed.max() <= 1


def test_mix_batch_with_both_turned_off_is_refused():
    with pytest.raises(ValueError, match="mixup_alpha or cutmix_alpha"):
        mix_batch(photos(), torch.arange(32) % 10, 10, 0.0, 0.0)
