import numpy as np
import pytest
import torch

from vit_demo.interpret import explain
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.pictures import render


@pytest.fixture(scope="module")
def attention() -> np.ndarray:
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig(dim=32, depth=3, heads=2, mlp_dim=64)).eval()
    attn = model.forward_activations(torch.rand(1, 1, 28, 28), attention=True).attention
    return attn[0].detach().numpy()  # (3, 2, 50, 50)


def test_cls_and_patch_maps(attention):
    maps = explain.token_attention_maps(attention)
    assert maps.shape == (3, 2, 7, 7)
    np.testing.assert_allclose(maps.sum(axis=(-1, -2)), 1, atol=1e-5)
    # Patch 10's map is that patch's attention row, without the [CLS] column.
    patch = explain.token_attention_maps(attention, token=1 + 10)
    row = attention[1, 0, 11, 1:]
    np.testing.assert_allclose(patch[1, 0].ravel(), row / row.sum(), atol=1e-6)


def test_rollout_by_hand():
    # Two layers, one head, [CLS] + a 2x2 grid of patches.
    T = 5
    first = np.full((T, T), 1 / T)  # everyone attends uniformly
    second = np.eye(T)  # everyone attends to itself
    attention = np.stack([first, second])[:, None]  # (2, 1, T, T)
    rollout = explain.attention_rollout(attention)
    assert rollout.shape == (2, 2)
    np.testing.assert_allclose(rollout, np.full((2, 2), 0.25))
    # [CLS] attending only to patch 3 in the last layer puts most of the rollout there.
    last = np.eye(T)
    last[0] = [0, 0, 0, 0, 1]
    rollout = explain.attention_rollout(np.stack([first, last])[:, None])
    assert rollout.argmax() == 3 and rollout.sum() == pytest.approx(1)


def test_attention_steps_are_the_models_own_attention_and_head_output():
    # The step-by-step numbers (query . key / sqrt(Dh), softmax, weighted sum of values) give back what the model's
    # forward pass computed inside: its attention row and its head's output, for the shipped digit model.
    from vit_demo import load_model

    model = load_model("mnist", device="cpu").model
    with torch.no_grad():
        found = model.forward_activations(torch.rand(2, 1, 28, 28), attention=True, stream=True, qkv=True)
    assert found.qkv.shape == (2, 6, 3, 4, 50, 16)
    for layer, head, token in [(0, 0, 0), (5, 3, 17), (2, 1, 49)]:
        steps = explain.attention_steps(found.qkv[1].numpy(), layer, head, token)
        np.testing.assert_allclose(steps["weights"], found.attention[1, layer, head, token], atol=1e-6)
        np.testing.assert_allclose(steps["output"], found.heads[1, layer, head, token], atol=1e-5)
        np.testing.assert_allclose(steps["scores"], steps["keys"] @ steps["query"] / 4)
        assert steps["values"].shape == (50, 16) and steps["weights"].sum() == pytest.approx(1)


def test_grid_size_checks_the_token_count():
    with pytest.raises(AssertionError, match="square grid"):
        explain.grid_size(np.zeros((1, 1, 11, 11)))
    assert explain.grid_size(np.zeros((1, 1, 11, 11)), prefix_tokens=2) == 3  # DeiT's [CLS] and distillation token


def test_maps_skip_the_prefix_tokens():
    # Four prefix tokens ([CLS] and three registers) before a 2 x 2 grid: whatever they hold, the maps cover the
    # patches only, from [CLS]'s row.
    rng = np.random.default_rng(0)
    attention = rng.random((2, 3, 8, 8))
    attention /= attention.sum(-1, keepdims=True)
    maps = explain.token_attention_maps(attention, prefix_tokens=4)
    assert maps.shape == (2, 3, 2, 2)
    np.testing.assert_allclose(maps[1, 2].ravel(), attention[1, 2, 0, 4:] / attention[1, 2, 0, 4:].sum())
    rollout = explain.attention_rollout(attention, prefix_tokens=4)
    assert rollout.shape == (2, 2) and rollout.sum() == pytest.approx(1)


def test_overlays_show_where_the_map_is_hot():
    image = np.zeros((28, 28), np.float32)
    heat = np.zeros((7, 7))
    heat[0, 6] = 1.0  # top-right patch
    picture = np.asarray(render.overlay(image, heat, size=140))
    assert picture.shape == (140, 140, 3)
    hot, cold = picture[5:15, 125:135].mean(), picture[125:135, 5:15].mean()
    assert hot > cold + 100


@pytest.mark.parametrize(("shape", "size", "mode"), [((5, 8, 8), 96, "bicubic"), ((3, 7, 7), 336, "bicubic"),
                                                     ((2, 28, 28), 336, "nearest"), ((1, 6, 9), 50, "bicubic")])
def test_upsampling_gives_torchs_own_interpolation(shape, size, mode):
    images = np.random.default_rng(0).random(shape, dtype=np.float32)  # (N, h, w)
    torch_options = {"align_corners": False} if mode == "bicubic" else {}
    expected = torch.nn.functional.interpolate(torch.from_numpy(images)[:, None], size=(size, size), mode=mode,
                                               **torch_options)[:, 0].numpy()
    np.testing.assert_allclose(render._upsample(images, size, smooth=mode == "bicubic"), expected, atol=1e-5)


def test_attention_grid_has_a_tile_per_layer_and_head_plus_mean(attention):
    picture = render.attention_grid(np.random.rand(28, 28).astype(np.float32),
                                    explain.token_attention_maps(attention), thumb=50)
    assert picture.size == (64 + 3 * 54 + 4, 24 + 3 * 54)


def test_patch_grid_and_photos():
    photo = np.random.rand(32, 32, 3).astype(np.float32)
    picture = render.patch_grid(photo, grid=8, size=320, selected=9)
    assert picture.size == (320, 320)
    # The selected patch (row 1, column 1) is outlined in green.
    assert tuple(np.asarray(picture)[41, 60]) == (0, 255, 120)
    # The patch numbers read on white (sky, white ink) as on black: white figures in a dark outline.
    for background in (0.0, 1.0):
        corner = np.asarray(render.patch_grid(np.full((32, 32, 3), background, np.float32), grid=8, size=320))
        number = corner[2:16, 2:20].astype(int).sum(axis=-1)  # (14, 18): around patch 0's number
        assert (number > 700).any() and (number < 100).any(), background


@pytest.mark.parametrize("heads", [4, 6, 8])
def test_slides_grid_is_1600_pixels_wide_with_legible_labels(heads):
    from vit_demo.pictures import slides

    rng = np.random.default_rng(0)
    attention = rng.random((3, heads, 17, 17)).astype(np.float32)  # 3 layers, a 4x4 grid and [CLS]
    image = rng.random((28, 28))
    grid = slides.view_slide(slides.CLS_GRID, image, attention)
    app_grid = render.attention_grid(image, explain.token_attention_maps(attention))
    assert 1600 <= grid.width < 1620 and app_grid.height == 24 + 3 * 100  # the app's grid is as it was

    def header_text_height(picture) -> int:
        header = np.asarray(picture.convert("L"))[: picture.height // 20]
        rows = np.nonzero((header < 100).any(axis=1))[0]
        return rows.max() - rows.min()

    # The labels grow with the tiles, so that they stay legible on a slide.
    assert header_text_height(grid) > 1.4 * header_text_height(app_grid)
