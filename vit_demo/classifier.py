"""The Python API: ``load_model("mnist").predict(image)``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from vit_demo.data.preprocess import ImageInput
from vit_demo.device import resolve_device
from vit_demo.interpret.explain import PREDICTED, relevance_forward
from vit_demo.model import VisionTransformer
from vit_demo.unfamiliar_rule import FEATURE_SCORES, probabilities
from vit_demo.weights import WeightsError, WeightsInfo, load_weights, shown_path


@dataclasses.dataclass(frozen=True)
class Prediction:
    label: str
    probs: dict[str, float]  # class name -> calibrated probability (the weights' temperature), in class order
    attention: np.ndarray | None  # (layers, heads, tokens, tokens); token 0 is [CLS], the patches after the prefix
    input: np.ndarray  # what the model saw, in [0, 1]: (28, 28) for digits, (size, size, 3) for photos
    relevance: np.ndarray | None = None  # (g, g) class-specific relevance for relevance_label, when asked for
    relevance_label: str | None = None
    unfamiliar: bool = False  # the image looks unlike anything the model knows (the weights' rule: unfamiliar_rule.py)

    @property
    def confidence(self) -> float:
        return self.probs[self.label]

    def top(self, k: int = 3) -> list[tuple[str, float]]:
        return sorted(self.probs.items(), key=lambda item: item[1], reverse=True)[:k]


class Classifier:
    """A trained (or imported) ViT with the preprocessing its weights folder names."""

    def __init__(self, info: WeightsInfo, model: VisionTransformer) -> None:
        self.info = info
        self.model = model.requires_grad_(False)  # for inference only: relevance needs no gradients of the weights
        self.temperature = info.temperature
        self.device = next(model.parameters()).device
        self.classes = info.classes
        self.preprocess = functools.partial(info.preprocessing.apply, size=info.config.image_size)

    def predict(self, image: ImageInput) -> Prediction:
        """Classify one image: a path, file bytes, a PIL image or a numpy array.

        Raises:
            NothingDrawn: blank input.
            InputError: anything that is not a usable image.
        """
        return self.predict_preprocessed([self.preprocess(image)])[0]

    def explain(self, image: ImageInput, label: str | None = None) -> np.ndarray:
        """Why the model would say ``label`` (default: what it predicts) for one image: each patch's
        class-specific relevance (Chefer et al., 2021), a (g, g) map over the patch grid, >= 0.

        Raises:
            NothingDrawn, InputError: as ``predict``.
            ValueError: ``label`` is not one of the model's classes.
        """
        return self.relevance_preprocessed([self.preprocess(image)], [label])[0]

    def relevance_preprocessed(self, inputs: Sequence[np.ndarray], labels: Sequence[str | None]) -> np.ndarray:
        """Class-specific relevance of already preprocessed images, one label (None: the predicted class)
        each, in one forward and backward pass: (B, g, g)."""
        return np.stack([p.relevance for p in self.predict_preprocessed(inputs, relevance_for=labels)])

    def cls_features(self, stream: torch.Tensor) -> torch.Tensor:
        """What the unfamiliar rule measures: [CLS] after each block through the final norm, from the residual stream
        after each block (B, L, T, D): (B, L, D)."""
        return self.model.norm(stream[:, :, 0])

    def batch(self, inputs: Sequence[np.ndarray]) -> torch.Tensor:
        """Preprocessed images -> one (B, C, H, W) float tensor on the model's device."""
        return torch.from_numpy(np.stack([to_chw(x) for x in inputs])).to(self.device)

    def predict_preprocessed(self, inputs: Sequence[np.ndarray], attention: bool = True,
                             relevance_for: Sequence[str | None] | None = None) -> list[Prediction]:
        """Classify already preprocessed images in one forward pass.

        attention=False takes the fast path. ``relevance_for`` gives each image a class to explain (None: the
        one predicted), and each prediction its relevance map, from the same forward pass and one backward pass.

        Raises:
            ValueError: a label in ``relevance_for`` is not one of the model's classes, or the model has none.
        """
        if not self.classes:  # (load_model(..., headless=True)'s)
            raise ValueError(no_head(self.info))
        batch = self.batch(inputs)  # (B, C, H, W)
        rule = self.info.unfamiliar
        needs_features = rule is not None and rule.score in FEATURE_SCORES  # the [CLS] features (B, L, D), else None
        relevance = features = None
        if relevance_for is not None:
            unknown = [label for label in relevance_for if label is not None and label not in self.classes]
            if unknown:
                raise ValueError(f"unknown class {unknown[0]!r}; this model's classes are {', '.join(self.classes)}")
            classes = torch.tensor([PREDICTED if label is None else self.classes.index(label) for label in relevance_for])
            logits, attn, relevance = relevance_forward(self.model, batch, classes)  # (B, cls), (B, L, H, T, T), (B, g, g)
            if needs_features:
                with torch.inference_mode():
                    features = self.cls_features(self.model.forward_activations(batch, stream=True).stream)
        else:
            with torch.inference_mode():
                found = self.model.forward_activations(batch, attention=attention, stream=needs_features)
                logits = found.logits  # (B, classes)
                attn = found.attention if attention else None  # (B, L, H, T, T)
                features = self.cls_features(found.stream) if needs_features else None
        attn = None if attn is None else attn.float().cpu().numpy()
        probs = probabilities(logits, self.temperature).cpu().numpy()  # (B, classes)
        unfamiliar = ([False] * len(probs) if rule is None else
                      rule.flags(logits.float().cpu(), self.temperature,
                                 None if features is None else features.float().cpu()).tolist())
        predictions = []
        for i, p in enumerate(probs):
            label = self.classes[int(p.argmax())]
            predictions.append(Prediction(
                label=label,
                probs={c: float(v) for c, v in zip(self.classes, p)},
                attention=None if attn is None else attn[i],
                input=inputs[i],
                relevance=None if relevance is None else relevance[i],
                relevance_label=None if relevance is None else relevance_for[i] or label,
                unfamiliar=unfamiliar[i],
            ))
        return predictions


def to_chw(image: np.ndarray) -> np.ndarray:
    """(H, W) or (H, W, C) float image -> (C, H, W) float32."""
    image = np.asarray(image, dtype=np.float32)
    return image[None] if image.ndim == 2 else np.ascontiguousarray(image.transpose(2, 0, 1))


def load_model(name_or_path: str | Path = "mnist", device: str = "auto", headless: bool = False) -> Classifier:
    """Load a shipped model by name (``mnist``, ``cifar10``) or a weights folder by path (``python -m vit_demo
    import`` writes one from a timm or Hugging Face ViT). ``headless``: an imported model without a head (DINO's)
    loads too, for its attention (the app's page): it has no classes, and refuses to predict.

    Raises:
        WeightsError: missing or corrupt weights; the message names the file and the command that makes it. Weights
            without a trained head: a pretraining run's encoder, or (unless ``headless``) an imported model without
            one.
    """
    info, model = load_weights(name_or_path, resolve_device(device))
    if info.pretrained:
        raise WeightsError(f"{shown_path(info.folder)} holds an encoder from self-supervised pretraining, not a "
                           f"classifier: its head is untrained. Fine-tune it with: python train.py --dataset "
                           f"{info.dataset.name} --init-from {shown_path(info.folder)}")
    if not info.classes and not headless:
        raise WeightsError(no_head(info))
    return Classifier(info, model)


def no_head(info: WeightsInfo) -> str:
    """What is said of a model without a classification head asked for classes."""
    return (f"{shown_path(info.folder)} holds a model without a classification head (imported from "
            f"{info.imported['source']}): it gives features, not classes; load its weights with "
            "vit_demo.weights.load_weights")
