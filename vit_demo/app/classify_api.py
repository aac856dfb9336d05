"""``/classify``: the lean endpoint for scripts. An image file and a model name in, one JSON object out, no pictures.

The same preprocessing as the page: a drawing for ``mnist``, a photo for ``cifar10``.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from vit_demo.app.components import UndecodedImage
from vit_demo.app.service import classifier, model_problem, predict
from vit_demo.app.serving import SHARED_WORKERS
from vit_demo.data.preprocess import InputError, NothingDrawn

MODELS = ("mnist", "cifar10")


def classify(path: str | None, model: str = "mnist") -> dict[str, Any]:
    """``{"label", "confidence", "probs": {class: p}, "unfamiliar": bool}`` for the image at ``path`` (calibrated
    probabilities; unfamiliar: it looks unlike anything the model knows), or ``{"error": message}``."""
    if model not in MODELS:
        return {"error": f"Unknown model {model!r}: use one of {', '.join(MODELS)}."}
    if path is None:
        return {"error": "No image: send an image file."}
    problem = model_problem(model)
    if problem:
        return {"error": problem}
    clf = classifier(model)
    try:
        prediction = predict(model, [clf.preprocess(path)], attention=False)[0]
    except NothingDrawn as exc:
        return {"error": str(exc)}
    except InputError as exc:
        return {"error": f"Can't read this image: {exc}"}
    return {"label": prediction.label, "confidence": prediction.confidence, "probs": prediction.probs,
            "unfamiliar": prediction.unfamiliar}


def build_classify_api() -> None:
    """The endpoint's hidden components and its event (api_name ``classify``)."""
    image = UndecodedImage(type="filepath", label="image", visible=False)
    model = gr.Textbox(MODELS[0], label="model", visible=False)  # a text, so that an unknown name gets our own answer
    answer = gr.JSON(label="answer", visible=False)
    image.change(classify, [image, model], answer, api_name="classify", **SHARED_WORKERS)
