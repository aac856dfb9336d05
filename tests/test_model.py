import dataclasses

import pytest
import torch

from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.training.recipes import RECIPES


@pytest.fixture(scope="module")
def model() -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(ViTConfig(dim=32, depth=3, heads=4, mlp_dim=64)).eval()


def test_logits_and_attention_shapes(model):
    images = torch.rand(5, 1, 28, 28)
    logits, attention = model(images, return_attention=True)
    assert logits.shape == (5, 10)
    # (batch, layers, heads, tokens, tokens): 7x7 patches + [CLS]
    assert attention.shape == (5, 3, 4, 50, 50)
    assert model(images).shape == (5, 10)


def test_attention_rows_are_distributions(model):
    _, attention = model(torch.rand(3, 1, 28, 28), return_attention=True)
    assert (attention >= 0).all()
    torch.testing.assert_close(attention.sum(-1), torch.ones(attention.shape[:-1]))


def test_fast_path_matches_explicit_path(model):
    images = torch.rand(8, 1, 28, 28)
    with torch.no_grad():
        fast = model(images)
        explicit, _ = model(images, return_attention=True)
    torch.testing.assert_close(fast, explicit, rtol=1e-5, atol=1e-5)


def test_forward_head_reads_the_answer_from_any_blocks_stream(model):
    """forward_head on the last block's stream is the model's own answer; on every token it gives (..., T, classes),
    whose [CLS] row is the same answer."""
    images = torch.rand(2, 1, 28, 28)
    nothing_off = torch.zeros(1, 3, 4, dtype=torch.bool)  # (1, L, H)
    logits, _, stream = model.forward_edited(images, nothing_off, torch.zeros(1, 3, 4, 50, 8))  # L x (B, T, D)
    torch.testing.assert_close(model.forward_head(stream[-1]), model(images))
    every = model.forward_head(torch.stack(stream, 1), all_tokens=True)  # (B, L, T, classes)
    assert every.shape == (2, 3, 50, 10)
    torch.testing.assert_close(every[:, -1, 0], logits)


def test_forward_features_gives_every_layers_cls_then_its_mean_patch_token(model):
    """The unfamiliar rule's features: [CLS] after each block through the final norm, (B, L, D), and with ``patches``
    the mean of the patch tokens so normed after them, (B, 2L, D) (Lee et al.'s mean-pooled feature maps)."""
    images = torch.rand(2, 1, 28, 28)
    nothing_off = torch.zeros(1, 3, 4, dtype=torch.bool)  # (1, L, H)
    with torch.no_grad():
        _, _, stream = model.forward_edited(images, nothing_off, torch.zeros(1, 3, 4, 50, 8))  # L x (B, T, D)
        _, _, cls = model.forward_features(images)
        _, _, both = model.forward_features(images, patches=True)
    normed = model.norm(torch.stack(stream, 1))  # (B, L, T, D)
    assert cls.shape == (2, 3, 32) and both.shape == (2, 6, 32)
    torch.testing.assert_close(cls, normed[:, :, 0])
    torch.testing.assert_close(both, torch.cat([normed[:, :, 0], normed[:, :, 1:].mean(2)], dim=1))


def test_attention_depends_on_the_image(model):
    _, a = model(torch.zeros(1, 1, 28, 28), return_attention=True)
    _, b = model(torch.rand(1, 1, 28, 28), return_attention=True)
    assert not torch.allclose(a, b)


def test_colour_model_shapes():
    config = ViTConfig(image_size=32, patch_size=4, in_channels=3, dim=48, depth=2, heads=3, mlp_dim=96,
                       mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    logits, attention = VisionTransformer(config)(torch.rand(2, 3, 32, 32), return_attention=True)
    assert logits.shape == (2, 10) and attention.shape == (2, 2, 3, 65, 65)


def test_config_round_trip_and_checks():
    config = RECIPES["cifar10"].vit
    assert ViTConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="divisible by patch_size"):
        ViTConfig(image_size=28, patch_size=5)
    with pytest.raises(ValueError, match="divisible by heads"):
        ViTConfig(dim=30, heads=4)
    with pytest.raises(ValueError, match="unknown ViTConfig fields"):
        ViTConfig.from_dict({**config.to_dict(), "surprise": 1})


def test_mnist_recipe_is_a_small_patch4_vit():
    config = RECIPES["mnist"].vit
    n_params = sum(p.numel() for p in VisionTransformer(config).parameters())
    assert config.patch_size == 4 and 150_000 < n_params < 300_000


def test_gradients_reach_every_parameter():
    model = VisionTransformer(ViTConfig(dim=32, depth=2, heads=2, mlp_dim=64))
    torch.nn.init.normal_(model.head.weight)
    model(torch.rand(4, 1, 28, 28)).logsumexp(-1).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_stochastic_depth_skips_whole_samples_in_training_only():
    config = ViTConfig(dim=32, depth=5, heads=2, mlp_dim=64, drop_path=0.4)
    model = VisionTransformer(config)
    assert [block.drop_path.rate for block in model.blocks] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    branch = torch.ones(4000, 3, 8)
    drop = model.blocks[-1].drop_path
    kept = drop(branch)  # (B, T, D): each sample all kept (scaled by 1 / 0.6) or all dropped
    per_sample = kept.flatten(1)
    assert per_sample.unique().tolist() == pytest.approx([0.0, 1 / 0.6])
    assert (per_sample.amin(1) == per_sample.amax(1)).all()
    assert (per_sample[:, 0] == 0).float().mean() == pytest.approx(0.4, abs=0.03)
    assert kept.mean() == pytest.approx(1.0, abs=0.05)  # the expected value is unchanged
    x = torch.rand(3, 1, 28, 28)
    plain = VisionTransformer(dataclasses.replace(config, drop_path=0.0))
    plain.load_state_dict(model.state_dict())
    model.eval(), plain.eval()
    torch.testing.assert_close(model(x), plain(x))  # no effect at evaluation
