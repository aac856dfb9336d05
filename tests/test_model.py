import dataclasses

import pytest
import torch

from vit_demo.model import Edits, ViTConfig, VisionTransformer
from vit_demo.training.recipes import RECIPES


@pytest.fixture(scope="module")
def model() -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(ViTConfig(dim=32, depth=3, heads=4, mlp_dim=64)).eval()


def test_logits_and_attention_shapes(model):
    images = torch.rand(5, 1, 28, 28)
    found = model.forward_activations(images, attention=True)
    logits, attention = found.logits, found.attention
    assert logits.shape == (5, 10)
    # (batch, layers, heads, tokens, tokens): 7x7 patches + [CLS]
    assert attention.shape == (5, 3, 4, 50, 50)
    assert model(images).shape == (5, 10)


def test_attention_rows_are_distributions(model):
    attention = model.forward_activations(torch.rand(3, 1, 28, 28), attention=True).attention
    assert (attention >= 0).all()
    torch.testing.assert_close(attention.sum(-1), torch.ones(attention.shape[:-1]))


def test_fast_path_matches_explicit_path(model):
    images = torch.rand(8, 1, 28, 28)
    with torch.no_grad():
        fast = model(images)
        explicit = model.forward_activations(images, attention=True).logits
    torch.testing.assert_close(fast, explicit, rtol=1e-5, atol=1e-5)


def test_forward_is_forward_head_of_forward_features_as_in_timm(model):
    """forward_features gives the tokens after the final norm (B, T, D); forward_head reads [CLS] from them, its
    logits or with pre_logits [CLS] itself; and the last block's stream in forward_activations is the same."""
    images = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        tokens = model.forward_features(images)  # (B, T, D)
        found = model.forward_activations(images, stream=True)
    assert tokens.shape == (2, 50, 32)
    torch.testing.assert_close(model.forward_head(tokens), model(images))
    torch.testing.assert_close(model.forward_head(tokens, pre_logits=True), tokens[:, 0])
    torch.testing.assert_close(model.norm(found.stream[:, -1]), tokens)
    torch.testing.assert_close(found.logits, model(images))
    assert found.stream.shape == (2, 3, 50, 32) and found.heads.shape == (2, 3, 4, 50, 8)
    assert found.embedded.shape == (2, 50, 32) and found.attentions == ()


def test_edits_act_inside_the_forward_pass(model):
    """Gates of 1 and a mask that replaces nothing leave the model as it is; a head replaced, a gate of 0 (its
    output zero) and the residual stream replaced read back as asked."""
    images = torch.rand(2, 1, 28, 28)
    L, H, T, Dh, D = 3, 4, 50, 8, 32
    with torch.no_grad():
        plain = model.forward_activations(images, attention=True, stream=True)
        nothing = Edits(gates=torch.ones(1, L, H), head_mask=torch.zeros(1, L, H, dtype=torch.bool),
                        head_values=torch.rand(1, L, H, T, Dh))
        same = model.forward_activations(images, attention=True, stream=True, edits=nothing)
        torch.testing.assert_close(same.logits, plain.logits)
        torch.testing.assert_close(same.attention, plain.attention)
        off = torch.zeros(1, L, H, dtype=torch.bool)
        off[0, 1, 2] = True
        values = torch.rand(1, L, H, T, Dh)
        gates = torch.ones(1, L, H)
        gates[0, 0, 3] = 0.0
        resid = torch.zeros(1, L, T, dtype=torch.bool)
        resid[0, 2, 7] = True
        stream_values = torch.rand(1, L, T, D)
        edited = model.forward_activations(images, stream=True, edits=Edits(
            gates=gates, head_mask=off, head_values=values, resid_mask=resid, resid_values=stream_values))
    torch.testing.assert_close(edited.heads[:, 1, 2], values[0, 1, 2].expand(2, -1, -1))
    assert (edited.heads[:, 0, 3] == 0).all()
    torch.testing.assert_close(edited.stream[:, 2, 7], stream_values[0, 2, 7].expand(2, -1))
    torch.testing.assert_close(edited.heads[:, 0, :3], plain.heads[:, 0, :3])  # before the first edit's effect
    assert not torch.allclose(edited.logits, plain.logits)


def test_attention_depends_on_the_image(model):
    a = model.forward_activations(torch.zeros(1, 1, 28, 28), attention=True).attention
    b = model.forward_activations(torch.rand(1, 1, 28, 28), attention=True).attention
    assert not torch.allclose(a, b)


def test_colour_model_shapes():
    config = ViTConfig(image_size=32, patch_size=4, in_channels=3, dim=48, depth=2, heads=3, mlp_dim=96,
                       mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    found = VisionTransformer(config).forward_activations(torch.rand(2, 3, 32, 32), attention=True)
    assert found.logits.shape == (2, 10) and found.attention.shape == (2, 2, 3, 65, 65)


def test_config_round_trip_and_checks():
    config = RECIPES["cifar10"].vit
    assert ViTConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="divisible by patch_size"):
        ViTConfig(image_size=28, patch_size=5)
    with pytest.raises(ValueError, match="divisible by heads"):
        ViTConfig(dim=30, heads=4)
    with pytest.raises(ValueError, match="unknown ViTConfig fields"):
        ViTConfig.from_dict({**config.to_dict(), "surprise": 1})


def test_fields_beyond_the_plain_vit_are_written_only_where_set():
    # The shipped config.json files (and the ONNX graphs' metadata, which quotes a config) hold no such fields: a
    # plain config reads and writes as it did before they existed.
    plain = RECIPES["mnist"].vit
    assert set(plain.to_dict()) == {"image_size", "patch_size", "in_channels", "num_classes", "dim", "depth", "heads",
                                    "mlp_dim", "dropout", "drop_path", "mean", "std"}
    grown = dataclasses.replace(plain, norm_eps=1e-6, distillation_token=True, register_tokens=2, layer_scale=0.1,
                                prefix_pos_embed=False)
    assert set(grown.to_dict()) - set(plain.to_dict()) == {"norm_eps", "distillation_token", "register_tokens",
                                                            "layer_scale", "prefix_pos_embed"}
    assert ViTConfig.from_dict(grown.to_dict()) == grown
    assert (plain.prefix_tokens, grown.prefix_tokens, grown.num_tokens) == (1, 4, 4 + 49)


def test_prefix_tokens_distillation_registers_and_layer_scale():
    config = ViTConfig(dim=32, depth=2, heads=2, mlp_dim=64, distillation_token=True, register_tokens=3,
                       layer_scale=0.5, prefix_pos_embed=False, norm_eps=1e-6)
    model = VisionTransformer(config).eval()
    names = set(model.state_dict())
    assert {"dist_token", "head_dist.weight", "reg_token", "blocks.0.ls1.gamma", "blocks.1.ls2.gamma"} <= names
    assert model.pos_embed.shape == (1, 49, 32) and model.reg_token.shape == (1, 3, 32)  # the patches' only
    assert model.blocks[0].ls1.gamma.eq(0.5).all() and model.norm.eps == 1e-6
    images = torch.rand(2, 1, 28, 28)
    found = model.forward_activations(images, attention=True, stream=True)
    assert found.attention.shape == (2, 2, 2, 5 + 49, 5 + 49) and found.stream.shape == (2, 2, 54, 32)
    tokens = model.forward_features(images)  # (B, T, D): [CLS], the distillation token, 3 registers, the patches
    expected = (model.head(tokens[:, 0]) + model.head_dist(tokens[:, 1])) / 2  # DeiT at inference
    torch.testing.assert_close(found.logits, expected)
    torch.testing.assert_close(model.forward_head(tokens, pre_logits=True), (tokens[:, 0] + tokens[:, 1]) / 2)
    torch.testing.assert_close(model(images), found.logits, rtol=1e-5, atol=1e-5)


def test_a_model_without_classes_gives_cls_features():
    model = VisionTransformer(ViTConfig(dim=32, depth=2, heads=2, mlp_dim=64, num_classes=0)).eval()
    images = torch.rand(3, 1, 28, 28)
    assert not any(name.startswith("head") for name in model.state_dict())
    torch.testing.assert_close(model(images), model.forward_features(images)[:, 0])


def test_at_image_size_resamples_the_patches_position_embeddings_only():
    config = ViTConfig(image_size=32, patch_size=4, in_channels=3, dim=32, depth=2, heads=2, mlp_dim=64,
                       mean=(0.5,) * 3, std=(0.5,) * 3, register_tokens=2)
    model = VisionTransformer(config).eval()
    bigger = model.at_image_size(48)
    assert bigger.config.image_size == 48 and not bigger.training
    assert bigger.pos_embed.shape == (1, 3 + 144, 32)
    assert torch.equal(bigger.pos_embed[:, :3], model.pos_embed[:, :3])  # [CLS]'s and the registers' kept
    assert bigger(torch.rand(1, 3, 48, 48)).shape == (1, 10)
    assert torch.equal(model.at_image_size(32).pos_embed, model.pos_embed)


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
