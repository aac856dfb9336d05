"""What the page says, in the app's markdown: the captions of the prediction and of the views, and the templates with
{fields} that the page fills in with its own numbers (vit_demo/app/page_model.py hands them to it, as HTML:
``caption_html``). The server's pictures (the API, export) use the same words.
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np

from vit_demo.app.service import Analysis, calibration_report
from vit_demo.data.datasets import dataset_spec
from vit_demo.data.preprocess import InputError, NothingDrawn

INFO_TEXT = "**{label}** ({percent}%) · model {ms} ms {where}"
EXAMPLE_TEXT = "An example: **{label}** ({percent}%). {prompt}"  # the image a tab starts with
READING_TEXT = "**{label}** ({percent}%) · the views follow when the pen lifts"
UNREADABLE_TEXT = "Can't read this image: {why}"
RELEVANCE_WHY = ("### Why {label}?\nThe patches whose attention pushed the model towards **{label}**, its answer "
                 "({percent}%): class-specific relevance (Chefer et al., 2021).")
RELEVANCE_WHY_NOT = ("### Why not {label}?\nThe patches that speak for **{label}** ({percent}%); the model says "
                     "**{predicted}**. Class-specific relevance (Chefer et al., 2021).")
KNOCKOUT_TEXT = ("**{label}** ({percent}%) with {count} of {total} heads off (replaced by {mode}s); with every head "
                 "on, {intact} ({intact_percent}%) · logit difference {intact} − {runner_up}: {before} → {after}")


def info_text(analysis: Analysis) -> str:
    return INFO_TEXT.format(label=analysis.label, percent=f"{100 * analysis.probs[analysis.label]:.1f}",
                            ms=f"{analysis.model_ms:.1f}", where=f"on `{analysis.device}`")


def unfamiliar_text(model: str) -> str:
    """The notice above an unfamiliar image's label. For a drawing: that it does not look like a digit. For a photo:
    that it looks unlike the photos the model knows, with how often the model reads such photos right (the share of
    its own test photos this unfamiliar that it classified right, from calibration.json)."""
    if dataset_spec(model).channels == 1:
        return ("**This does not look like a digit.** The model only knows the digits 0 to 9, so its answer is a "
                "guess.")
    classes = ", ".join(dataset_spec(model).classes)
    found = (calibration_report(model) or {}).get("unfamiliar") or {}
    odds = (f" Of the test photos that look this unfamiliar to it, it reads {100 * found['accuracy_on_flagged']:.0f}% "
            "right." if "accuracy_on_flagged" in found else "")
    return (f"**This looks unlike the photos the model knows.** It only knows {classes}, so its answer is a "
            f"guess.{odds}")


def message_text(result: InputError | str, blank_message: str) -> str:
    """What is said in place of a prediction: ``blank_message`` for a blank image, why one can't be read, or
    ``result`` itself (a str: no model, nothing yet)."""
    if isinstance(result, str):
        return result
    if isinstance(result, NothingDrawn):
        return blank_message
    return UNREADABLE_TEXT.format(why=result)


def query_title(patch: int | str | None) -> str:
    if patch is None:
        return "### Where a patch looks"
    return (f"### Where patch {patch} looks\nIn every layer and head; click a patch in "
            "*What the model sees* to choose another.")


def relevance_title(analysis: Analysis | None, label: str | None) -> str:
    """The relevance view's caption for ``label`` (None: the predicted class) of the analysed image."""
    if analysis is None:
        return "### Why this class?"
    label = label or analysis.label
    template = RELEVANCE_WHY if label == analysis.label else RELEVANCE_WHY_NOT
    return template.format(label=label, percent=f"{100 * analysis.probs[label]:.1f}", predicted=analysis.label)


def caption_html(markdown: str) -> str:
    """A view's note in the app's markdown (a ``###`` title, ``**bold**``, ``*italic*``) as HTML for its caption in
    the page: the title in bold, `code` as code, then the text."""
    text = html.escape(markdown, quote=False)
    text = re.sub(r"^#+ (.*)$", r"<b>\1</b>", text, flags=re.MULTILINE)
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text).replace("\n", " ")


# ---- An image as the page keeps it: its 8-bit pixels, base64 (the example a tab starts with; the export's input)

def pixels(image: np.ndarray) -> np.ndarray:
    """An input in [0, 1] (on 256 levels, as preprocessing leaves it) as its 8-bit pixels: same shape, uint8."""
    return np.round(np.asarray(image) * 255).astype(np.uint8)


def image_text(image: np.ndarray) -> str:
    """An input as the page keeps it: its 8-bit pixels, base64."""
    return base64.b64encode(pixels(image).tobytes()).decode()


def read_image(text: object, shape: tuple[int, ...]) -> np.ndarray:
    """The page's copy of an input (``image_text``; the export reads it from the tab's numbers) back as the model's
    input: ``shape``, float32 in [0, 1]. Raises ValueError for anything else."""
    try:
        data = base64.b64decode(str(text), validate=True)
    except ValueError:
        raise ValueError("the image is not base64") from None
    if len(data) != int(np.prod(shape)):
        raise ValueError(f"the image has {len(data)} bytes where this model reads {int(np.prod(shape))}")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape).astype(np.float32) / 255
