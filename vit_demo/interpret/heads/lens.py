"""The logit lens (nostalgebraist, 2020, "interpreting GPT: the logit lens"): the model's final norm and head applied
to the residual stream after each layer, for [CLS] (what the model would say if it stopped there) and for each patch
token (where the class is written)."""

from __future__ import annotations

import torch

from vit_demo.interpret.heads.edits import model_input
from vit_demo.model import VisionTransformer


@torch.no_grad()
def logit_lens(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    """What the model would say after each layer, its head read from [CLS] there: logits (B, L, classes). The last
    layer's are the model's own (with a distillation token, the mean of its two heads, as DeiT answers)."""
    stream = model.forward_activations(model_input(model, images), stream=True).stream  # (B, L, T, D)
    return layer_answers(model, model.norm(stream))


def layer_answers(model: VisionTransformer, normed: torch.Tensor) -> torch.Tensor:
    """The head read after each layer, as ``forward_head`` reads the last, from the residual stream after each block
    through the final norm (B, L, T, D): logits (B, L, classes)."""
    return model.forward_head(normed.flatten(0, 1)).unflatten(0, normed.shape[:2])


@torch.no_grad()
def lens_maps(model: VisionTransformer, images: torch.Tensor, classes: torch.Tensor | None = None) -> torch.Tensor:
    """The logit lens per patch: the probability of ``classes`` (B,) (default: the predicted one) read from each
    patch token after each layer, (B, L, g, g). Patch tokens are never read by the trained head, so this shows
    where the class is written, not what the model says."""
    found = model.forward_activations(model_input(model, images), stream=True)
    if classes is None:
        classes = found.logits.argmax(-1)  # (B,)
    patches = found.stream[:, :, model.config.prefix_tokens :]  # (B, L, N, D)
    probs = model.head(model.norm(patches)).softmax(-1)  # (B, L, N, classes)
    g = model.config.grid_size
    picked = probs.gather(-1, classes.to(probs.device).view(-1, 1, 1, 1).expand(*probs.shape[:3], 1))  # (B, L, N, 1)
    return picked[..., 0].reshape(len(images), -1, g, g).cpu()


@torch.no_grad()
def lens_accuracy(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor,
                  batch_size: int = 500) -> list[float]:
    """Accuracy of the logit lens on [CLS] after each layer: L floats, the last the model's own."""
    correct = torch.zeros(model.config.depth, dtype=torch.long)
    for start in range(0, len(images), batch_size):
        predicted = logit_lens(model, images[start : start + batch_size]).argmax(-1).cpu()  # (B, L)
        correct += (predicted == labels[start : start + batch_size, None]).sum(0)
    return (correct.double() / len(images)).tolist()
