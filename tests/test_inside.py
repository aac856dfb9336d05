"""Inside the model (the ViT paper's Fig. 7): filters' principal components, position similarity, attention distance."""

import json
import shutil

import numpy as np
import pytest
import torch
from conftest import run_cli

from vit_demo import load_model
from vit_demo.interpret.inside import (ATTENTION_DISTANCE_FILE, embedding_components, mean_attention_distance,
                                       patch_distances, position_similarity, read_attention_distance)
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.weights import WEIGHTS_ROOT


@pytest.fixture(scope="module")
def digits():
    return load_model("mnist", device="cpu").model


def test_embedding_components_are_orthonormal_and_ordered(digits):
    components, share = embedding_components(digits, count=8)
    assert components.shape == (8, 1, 4, 4)
    flat = components.reshape(8, -1)
    np.testing.assert_allclose(flat @ flat.T, np.eye(8), atol=1e-5)
    assert (np.diff(share) <= 1e-7).all() and 0 < share.sum() <= 1 + 1e-6
    # They span the filters: the filters' spread along the top component is the largest of any direction.
    filters = digits.patch_embed.weight.detach().reshape(64, -1).numpy()
    centred = filters - filters.mean(0)
    assert np.var(centred @ flat[0]) >= np.var(centred @ flat[1])


def test_position_similarity_is_a_cosine_grid(digits):
    similarity = position_similarity(digits)
    assert similarity.shape == (7, 7, 7, 7)
    for r, c in ((0, 0), (3, 4), (6, 6)):
        assert similarity[r, c, r, c] == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(similarity.reshape(49, 49), similarity.reshape(49, 49).T, atol=1e-6)
    # Learnt position embeddings are most alike for neighbours: the nearest patches beat the far corner.
    assert similarity[3, 3, 3, 4] > similarity[3, 3, 0, 0]


def test_patch_distances_by_hand():
    d = patch_distances(3, 4)
    assert d.shape == (9, 9)
    assert d[0, 1] == 4 and d[0, 3] == 4 and d[0, 4] == pytest.approx(4 * 2**0.5) and d[0, 8] == pytest.approx(8 * 2**0.5)


def test_mean_attention_distance_of_a_head_that_looks_at_itself_or_far_away():
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig(dim=32, depth=2, heads=2, mlp_dim=64)).eval()
    images = torch.rand(5, 1, 28, 28)
    distance = mean_attention_distance(model, images, batch_size=2)
    assert distance.shape == (2, 2) and (distance > 0).all()
    # Every patch's largest distance averaged over queries bounds any head's mean distance.
    far = patch_distances(7, 4)
    assert (distance <= far.max(1).mean() + 1e-4).all() and (distance >= 0).all()
    # With uniform attention over the patches, the distance is the mean over all patch pairs.
    for block in model.blocks:
        block.attn.qkv.weight.data.zero_()
        block.attn.qkv.bias.data.zero_()
    np.testing.assert_allclose(mean_attention_distance(model, images), far.mean(), rtol=1e-5)


def test_cli_inside_keeps_the_distance_in_the_weights_folder(tmp_path, mnist_root):
    folder = tmp_path / "mnist"
    shutil.copytree(WEIGHTS_ROOT / "mnist", folder)
    (folder / ATTENTION_DISTANCE_FILE).unlink(missing_ok=True)
    assert read_attention_distance(folder) is None
    result = run_cli("inside", "--model", str(folder), "--data-dir", str(mnist_root), "--n", "50")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["images"] == 50 and np.shape(record["mean_attention_distance_px"]) == (6, 4)
    np.testing.assert_allclose(read_attention_distance(folder), record["mean_attention_distance_px"], atol=0.01)


def test_the_distance_is_over_images_spread_over_the_split(tmp_path, digits):
    """A split kept in class order (CIFAR-10's folders) gives every class its share, not the first class alone."""
    from vit_demo.data.datasets import spread
    from vit_demo.interpret.inside import write_attention_distance

    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.integers(0, 256, (40, 1, 28, 28), dtype=np.uint8))
    images[:20] = 0  # the first "class": blank images, whose attention differs from noise's
    kept = write_attention_distance(tmp_path, digits, images, "test", count=10)
    np.testing.assert_allclose(kept, mean_attention_distance(digits, images[spread(10, 40)].float() / 255), rtol=1e-6)
    first = mean_attention_distance(digits, images[:10].float() / 255)
    assert np.abs(kept - first).max() > 0.1  # (the first ten would have given another answer)
    assert json.loads((tmp_path / ATTENTION_DISTANCE_FILE).read_text())["images"] == 10
