"""What a trained ViT has learnt inside, as in Dosovitskiy et al. (2021), Fig. 7: the patch-embedding filters'
principal components, the similarity of the position embeddings, and how far each head attends.

Plain maths on the weights (and, for the distances, on attention over a set of images); no Gradio.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from vit_demo.atomic import atomic_write_text
from vit_demo.data.datasets import spread
from vit_demo.weights import ATTENTION_DISTANCE_FILE

DISTANCE_IMAGES = 1000  # test images the distance is averaged over


def embedding_components(model: nn.Module, count: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """The top principal components of the patch projection's filters, as small pictures.

    Each of the D filters of ``patch_embed`` is a (C, p, p) weighting of a patch's pixels; the components are
    the directions along which the filters vary most (the ViT paper shows its top 28 the same way).

    Returns:
        components (count, C, p, p), each of unit length, and the share of the filters' variance each explains.
    """
    weight = model.patch_embed.weight.detach().float().cpu()  # (D, C, p, p)
    D, C, p, _ = weight.shape
    filters = weight.reshape(D, -1)  # (D, C*p*p)
    centred = filters - filters.mean(0, keepdim=True)
    _, singular, components = torch.linalg.svd(centred, full_matrices=False)  # components: (K, C*p*p)
    variance = singular**2
    count = min(count, len(variance))
    return (components[:count].reshape(count, C, p, p).numpy(),
            (variance[:count] / variance.sum()).numpy())


def position_similarity(model: nn.Module) -> np.ndarray:
    """Cosine similarity of each patch's position embedding with every patch's: (g, g, g, g), where
    [r, c] is the (g, g) map of patch (r, c)'s similarity to all patches. The prefix tokens' embeddings (where they
    have any) are left out."""
    patches = model.pos_embed.detach().float().cpu()[0, -model.config.grid_size**2 :]  # (N, D)
    unit = patches / patches.norm(dim=1, keepdim=True).clamp_min(1e-12)
    g = int(round(len(patches) ** 0.5))
    return (unit @ unit.T).reshape(g, g, g, g).numpy()


def patch_distances(grid: int, patch_size: int) -> np.ndarray:
    """Pixel distance between the centres of every two patches of a grid: (N, N), N = grid**2, row-major."""
    rows, cols = np.divmod(np.arange(grid * grid), grid)
    centres = np.stack([rows, cols], 1) * patch_size  # (N, 2); the half-patch offset cancels in differences
    return np.linalg.norm(centres[:, None] - centres[None], axis=-1)


@torch.no_grad()
def mean_attention_distance(model: nn.Module, images: torch.Tensor, batch_size: int = 250) -> np.ndarray:
    """How far each head looks, in pixels, per layer: (L, H).

    For a query patch i and a key patch j, the distance between their centres is weighted by the attention
    from i to j; this is averaged over the query patches and over ``images`` (B, C, H, W) in [0, 1]. [CLS] (and
    any other prefix token) has no place in the image, so it is left out as a query, and its column is dropped from
    each patch's attention, which is renormalised over the patches (the share a head gives [CLS] does not count as
    near or far).
    """
    grid, prefix = model.config.grid_size, model.config.prefix_tokens
    distances = torch.from_numpy(patch_distances(grid, model.config.patch_size)).float()  # (N, N)
    device = next(model.parameters()).device
    total = torch.zeros(model.config.depth, model.config.heads, dtype=torch.float64)
    for start in range(0, len(images), batch_size):
        x = images[start : start + batch_size].to(device)  # (B, C, H, W)
        attention = model.forward_activations(x, attention=True).attention  # (B, L, H, T, T)
        to_patches = attention[..., prefix:, prefix:].float().cpu()  # (B, L, H, N, N): patch queries, patch keys
        to_patches = to_patches / to_patches.sum(-1, keepdim=True).clamp_min(1e-12)
        total += (to_patches * distances).sum(-1).mean(-1).sum(0).double()  # (L, H)
    return (total / len(images)).float().numpy()


def write_attention_distance(folder: str | Path, model: nn.Module, images: torch.Tensor, split: str,
                             count: int = DISTANCE_IMAGES) -> np.ndarray:
    """Compute the mean attention distance over ``count`` images spread evenly over ``images`` (uint8 (N, C, H, W), the
    whole of ``split``: CIFAR-10's folders keep it in class order, so its first 1,000 test photos are all airplanes)
    and keep it in the weights folder, so that the app never computes it per request: (L, H) in pixels."""
    images = images[spread(count, len(images)).to(images.device)]
    distance = mean_attention_distance(model, images.float() / 255)
    record = {"split": split, "images": len(images), "pixels": np.round(distance.astype(float), 3).tolist(),
              "note": "per layer (rows) and head: the attention-weighted distance between query and key patch "
                      "centres, over patch queries and patch keys ([CLS] left out, weights renormalised)"}
    atomic_write_text(Path(folder) / ATTENTION_DISTANCE_FILE, json.dumps(record, indent=2) + "\n")
    return distance


def read_attention_distance(folder: str | Path) -> np.ndarray | None:
    """The mean attention distance kept in a weights folder, (L, H) in pixels, or None where there is none."""
    path = Path(folder) / ATTENTION_DISTANCE_FILE
    if not path.is_file():
        return None
    return np.asarray(json.loads(path.read_text(encoding="utf-8"))["pixels"], dtype=np.float32)
