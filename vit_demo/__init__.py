"""vit_demo: a Vision Transformer written from scratch, with the tools to see what it attends to.

    from vit_demo import load_model
    clf = load_model("mnist")
    result = clf.predict("digit.png")
    result.label, result.probs, result.attention  # attention: (layers, heads, tokens, tokens)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each name's module, imported on first use (PEP 562): importing a light module of the package, such as the
# app's starting page (app/starting.py), then costs no torch import.
_HOMES = {
    "Classifier": "classifier", "Prediction": "classifier", "load_model": "classifier",
    "ViTConfig": "model", "VisionTransformer": "model",
    "InputError": "data.preprocess", "NothingDrawn": "data.preprocess", "preprocess_drawing": "data.preprocess",
    "preprocess_photo": "data.preprocess",
    "WeightsError": "weights",
}
__all__ = sorted(_HOMES)

if TYPE_CHECKING:
    from vit_demo.classifier import Classifier, Prediction, load_model
    from vit_demo.data.preprocess import InputError, NothingDrawn, preprocess_drawing, preprocess_photo
    from vit_demo.model import ViTConfig, VisionTransformer
    from vit_demo.weights import WeightsError


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'vit_demo' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vit_demo.{_HOMES[name]}"), name)
