"""The recipes: each dataset's architecture and optimisation settings. The app reads a recipe's architecture
(the model a tab will have, until its weights exist) without importing the trainer."""

from __future__ import annotations

import dataclasses

from vit_demo.data.datasets import DATASETS, DatasetSpec
from vit_demo.model import ViTConfig


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Architecture and optimisation settings for one dataset; command-line flags override them."""

    vit: ViTConfig
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup_epochs: float
    label_smoothing: float
    augment: bool = True  # the dataset's own augmentation (data/augment.py: AUGMENTATIONS); off: images as they are
    trivial_augment: bool = False  # TrivialAugment, per image, on top of the dataset's own augmentation
    auto_augment: bool = False  # AutoAugment's CIFAR-10 policy instead (Lee et al. 2021's recipe), per image
    random_erasing: float = 0.0  # each image's chance of a rectangle filled with the mean colour (0 = off)
    mix_prob: float = 1.0  # each batch's chance of MixUp or CutMix (when either is on)
    mixup_alpha: float = 0.0  # 0 = no MixUp
    cutmix_alpha: float = 0.0  # 0 = no CutMix; with both on, a mixed batch gets one of the two
    # Drawings, for MNIST (data/sketches.py): training digits also written on the app's canvas and read back as the
    # app reads a drawing, and drawings of no digit whose target is the uniform distribution, their loss weighted by
    # outlier_weight (outlier exposure: Hendrycks, Mazeika and Dietterich, 2019).
    canvas_digits: int = 0
    outlier_drawings: int = 0
    outlier_weight: float = 0.5
    outlier_kinds: str = "every"  # or every other kind ("even", "odd"), to measure on kinds never trained on
    # Pictures of no class, for photos (outlier exposure too, weighted by outlier_weight): half made in code
    # (data/outliers.py), half crops of the outside pictures the unfamiliar rule learns from (outside_photos.roles).
    outlier_photos: int = 0

    def __post_init__(self) -> None:
        if self.trivial_augment and self.auto_augment:
            raise ValueError("a recipe uses TrivialAugment or AutoAugment, not both")
        if (self.outlier_drawings or self.outlier_photos) and (self.mixup_alpha > 0 or self.cutmix_alpha > 0):
            raise ValueError("pictures of no class are not mixed with MixUp or CutMix")


def _vit_for(spec: DatasetSpec, **arch: int | float) -> ViTConfig:
    return ViTConfig(image_size=spec.image_size, in_channels=spec.channels, num_classes=len(spec.classes),
                     mean=spec.mean, std=spec.std, **arch)


RECIPES = {
    "mnist": Recipe(
        vit=_vit_for(DATASETS["mnist"], patch_size=4, dim=64, depth=6, heads=4, mlp_dim=128),
        epochs=100, batch_size=128, lr=1e-3, weight_decay=0.05, warmup_epochs=2, label_smoothing=0.1,
    ),
    # The plain-ViT baseline of Lee et al. (2021), "Vision Transformer for Small-Size Datasets", 93.6% on
    # CIFAR-10 from scratch (code: aanna0701/SPT_LSA_ViT): 9 layers of width 192, MLP 384, 4x4 patches;
    # 300 epochs at batch 128, AdamW 1e-3, weight decay 0.05, 10 warmup epochs, cosine; per-image strong
    # augmentation, MixUp or CutMix (alpha 1) on half the batches, random erasing 0.25, label smoothing 0.1,
    # stochastic depth 0.1. Two changes: 6 heads of 32 dims instead of 12 of 16, so that the app's
    # layer x head grid stays readable (same parameters and arithmetic), and TrivialAugment instead of
    # AutoAugment's CIFAR-10 policy (nothing learnt; as good on CIFAR-10 in
    # Mueller & Hutter, 2021). Meant for a GPU.
    "cifar10": Recipe(
        vit=_vit_for(DATASETS["cifar10"], patch_size=4, dim=192, depth=9, heads=6, mlp_dim=384, drop_path=0.1),
        epochs=300, batch_size=128, lr=1e-3, weight_decay=0.05, warmup_epochs=10, label_smoothing=0.1,
        trivial_augment=True, random_erasing=0.25, mix_prob=0.5, mixup_alpha=1.0, cutmix_alpha=1.0,
    ),
}


def recipe_for(spec: DatasetSpec) -> Recipe:
    """The recipe a dataset trains with: its own (mnist, cifar10), or for a folder of one's own pictures the photo
    recipe, its model sized to the folder's classes and normalised with the folder's mean and std."""
    recipe = RECIPES[spec.recipe]
    return dataclasses.replace(recipe, vit=dataclasses.replace(
        recipe.vit, image_size=spec.image_size, in_channels=spec.channels, num_classes=len(spec.classes),
        mean=spec.mean, std=spec.std))


@dataclasses.dataclass(frozen=True)
class PretrainRecipe:
    """Self-supervised pretraining of a recipe's encoder (train.py --pretrain): a masked autoencoder's settings.
    The encoder is the dataset's recipe's ViT (without stochastic depth); command-line flags override these."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup_epochs: float
    mask_ratio: float = 0.75  # share of each image's patches hidden from the encoder
    decoder_dim: int = 128
    decoder_depth: int = 2
    decoder_heads: int = 4


PRETRAIN_METHODS = ("mae",)
# MAE (He et al. 2022) for CIFAR-10, sized for a short GPU loan: the reference's mask ratio 0.75, normalised-pixel
# loss, AdamW with weight decay 0.05, warmup then cosine, and its learning-rate rule, 1.5e-4 x batch / 256; a decoder
# of 2 blocks of width 128 (the reference's is 8 of 512, for ImageNet's ViT-B/L). The augmentation is the supervised
# recipe's crop and flip (the reference: random resized crop and flip). 400 epochs is at the short end of what public
# MAE reproductions on CIFAR-10 run (400 to 2,000). The encoder reads 17 tokens of 65, so a step costs 0.37 times the
# supervised one's arithmetic; batch 1024 halves the steps of batch 512, and the compiled supervised step took
# about as long at any batch (docs/training.md).
PRETRAIN_RECIPES = {
    "cifar10": PretrainRecipe(epochs=400, batch_size=1024, lr=1.5e-4 * 1024 / 256, weight_decay=0.05,
                              warmup_epochs=20),
}
