import pytest
import torch

from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.training import RECIPES


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
    with pytest.raises(AssertionError, match="divisible by patch_size"):
        ViTConfig(image_size=28, patch_size=5)
    with pytest.raises(AssertionError, match="divisible by heads"):
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
