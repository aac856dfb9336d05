"""What the page says, in the app's markdown: the captions of the prediction and of the views, and the templates with
{fields} that the page fills in with its own numbers (vit_demo/page/description.py hands them to it, as HTML:
``caption_html``).
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np

from vit_demo.app.service import calibration_report, classifier

TEXTS = {  # the templates, by the key the page reads each by (its ``texts``)
    "unreadable": "Can't read this image: {why}",
    "query": "### Where patch {patch} looks\nIn every layer and head; click a patch in *The patches it reads* to "
             "choose another.",
    "info": "**{label}** ({percent}%) · model {ms} ms {where}",
    "guess": "No percentage: the model cannot read this image · model {ms} ms {where}",  # (its label: a guess)
    "features": "Features, not classes · model {ms} ms {where}",  # (no head: DINO's)
    "example": "An example: **{label}**.",  # the image a tab starts with (its bars: the percentages)
    "reading": "**{label}** ({percent}%) · the views follow when the pen lifts",
    "knockout": "**{label}** ({percent}%) with {count} of {total} heads off (replaced by {mode}s); with every head on, "
                "{intact} ({intact_percent}%) · logit difference {intact} − {runner_up}: {before} → {after}",
    # (no percentage: the answer beside it has the model's, or says it has none for an image it cannot read)
    "why": "### Why {label}?\nThe patches whose attention pushed the model towards **{label}**, its answer: "
           "class-specific relevance (Chefer et al., 2021).",
    "why_not": "### Why not {label}?\nThe patches that speak for **{label}** ({percent}%); the model says "
               "**{predicted}**. Class-specific relevance (Chefer et al., 2021).",
}


def unfamiliar_text(model: str) -> str:
    """The notice above an unfamiliar image's label. For a drawing: that it does not look like a digit. For a photo:
    that it looks unlike the photos the model knows, with how often the model reads such photos right (the share of
    its own test photos this unfamiliar that it classified right, from calibration.json)."""
    if classifier(model).info.config.in_channels == 1:
        return ("**This does not look like a digit.** The model only knows the digits 0 to 9, so its answer is a "
                "guess.")
    classes = ", ".join(classifier(model).classes)
    found = (calibration_report(model) or {}).get("unfamiliar") or {}
    odds = ""
    if "accuracy_on_flagged" in found:  # (measured on the first of its familiar sets: its own test photos)
        photos, count = next(iter(found["familiar_images"].items()))
        flagged = round(found["flagged"][photos] * count)
        odds = (f" Of the {flagged:,} of its {count:,} {photos} that look this unfamiliar to it, it reads "
                f"{100 * found['accuracy_on_flagged']:.0f}% right.")
    return (f"**This looks unlike the photos the model knows.** It only knows {classes}, so its answer is a "
            f"guess.{odds}")


def caption_html(markdown: str) -> str:
    """A view's note in the app's markdown (a ``###`` title, ``**bold**``, ``*italic*``) as HTML for its caption in
    the page: the title in bold, `code` as code, then the text."""
    text = html.escape(markdown, quote=False)
    text = re.sub(r"^#+ (.*)$", r"<b>\1</b>", text, flags=re.MULTILINE)
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text).replace("\n", " ")


def image_text(image: np.ndarray) -> str:
    """An input in [0, 1] (on 256 levels, as preprocessing leaves it) as the page keeps it: its 8-bit pixels, base64."""
    return base64.b64encode(np.round(np.asarray(image) * 255).astype(np.uint8).tobytes()).decode()
