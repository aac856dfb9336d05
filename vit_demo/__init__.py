"""vit_demo: a Vision Transformer written from scratch, with the tools to see what it attends to.

    from vit_demo import load_model
    clf = load_model("mnist")
    result = clf.predict("digit.png")
    result.label, result.probs, result.attention  # attention: (layers, heads, tokens, tokens)
"""

from vit_demo.classifier import Classifier, Prediction, load_model
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.preprocess import InputError, NothingDrawn, preprocess_drawing, preprocess_photo
from vit_demo.weights import WeightsError

__all__ = [
    "Classifier",
    "InputError",
    "NothingDrawn",
    "Prediction",
    "ViTConfig",
    "VisionTransformer",
    "WeightsError",
    "load_model",
    "preprocess_drawing",
    "preprocess_photo",
]
