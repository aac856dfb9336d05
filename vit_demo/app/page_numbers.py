"""The page's numbers: what ``assets/page/live.js`` draws every view of an image from, made here alone.

One function, ``numbers``, turns an analysis (one image through the model, ``service.Analysis``) into the page's
numbers (``PageNumbers``, some 7 KB as JSON for a digit, 14 KB for a photo): the input (its 8-bit pixels: exactly
what the model read), each layer's [CLS] map for every head and the heads' mean, quantised to uint8 (each map scaled
to its own maximum, as ``render.overlays`` scales it), the colour map and the overlay's rule, the prediction (the
probabilities, the info line, the notice for an unfamiliar image) and a few single views' answers: rollout, the
relevance of the class shown, where the first query patch looks. The page draws every view from them: changing the
layer, the head, the class shown, the query patch or the training slider costs no request when the page has its
numbers. What it lacks (another patch, another class, a training snapshot, heads off, the lens) it asks for once,
sending the image's pixels to one of the tab's server functions, whose answer is made here too, by the same parts
(``query_answer``, ``relevance_answer``, ``map_answer``, ``cls_maps``...), and kept with the image's ``key``: an
answer that comes late for an earlier image is never drawn over a later one.

Each part is a frozen dataclass (``Part``); ``to_json`` gives what the page reads (a field that is None is left
out). ``render.overlay`` stays the server's picture of the same view (export, CLI, the API), and the JS follows it
step for step: the input upsampled (nearest for digits, bicubic for photos), the map upsampled bicubic (torch's
``F.interpolate``, ``align_corners=False``), coloured through the same 256-entry lookup table, and blended with
``render.HEAT_ALPHA``'s shares. A browser test compares the two.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
import re

import numpy as np

from vit_demo.app.service import Analysis, Knockout, calibration_report
from vit_demo.classifier import Prediction
from vit_demo.data.datasets import dataset_spec
from vit_demo.data.preprocess import InputError, NothingDrawn
from vit_demo.interpret import explain
from vit_demo.pictures import render

LARGE = 336  # pixels a side of the large views (the page's canvas, the server's pictures)

# ---- The captions the numbers carry, filled in here and by the page's own model (page/numbers.js fills the same
# templates, which vit_demo/app/page_model.py hands it).
INFO_TEXT = "**{label}** ({percent}%) · model {ms} ms {where}"
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


# ---- How an image and its maps travel ---------------------------------------------------------------------------

def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.uint8).tobytes()).decode()


def pixels(image: np.ndarray) -> np.ndarray:
    """An input in [0, 1] (on 256 levels, as preprocessing leaves it) as its 8-bit pixels: same shape, uint8."""
    return np.round(np.asarray(image) * 255).astype(np.uint8)


def image_text(image: np.ndarray) -> str:
    """An input as the page keeps it (``PageNumbers.image``) and sends it back to ask for more: its pixels, base64."""
    return _b64(pixels(image))


def image_key(image: np.ndarray) -> str:
    """A short name for an input, from its pixels: what the page keeps the numbers of each image under."""
    return hashlib.sha1(pixels(image).tobytes()).hexdigest()[:16]


def read_image(text: object, shape: tuple[int, ...]) -> np.ndarray:
    """The page's copy of an input (``image_text``) back as the model's input: ``shape``, float32
    in [0, 1]. Raises ValueError for anything else."""
    try:
        data = base64.b64decode(str(text), validate=True)
    except ValueError:
        raise ValueError("the image is not base64") from None
    if len(data) != int(np.prod(shape)):
        raise ValueError(f"the image has {len(data)} bytes where this model reads {int(np.prod(shape))}")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape).astype(np.float32) / 255


def grid_maps(attention: np.ndarray, token: int = 0) -> np.ndarray:
    """Where a token attends (0: [CLS], 1 + i: patch i), per layer: every head, then the heads' mean, as
    ``render.attention_grid`` shows it: (L, H, T, T) -> (L, H + 1, g, g)."""
    maps = explain.token_attention_maps(attention, token)  # (L, H, g, g)
    return np.concatenate([maps, maps.mean(axis=1, keepdims=True)], axis=1)


def quantise(maps: np.ndarray) -> np.ndarray:
    """Each (g, g) map scaled to its own maximum and rounded to 0..255: (..., g, g) float -> uint8."""
    peaks = np.maximum(maps.max(axis=(-2, -1), keepdims=True), 1e-12)
    return np.round(maps * (255 / peaks)).astype(np.uint8)


def cls_maps(attention: np.ndarray, token: int = 0) -> str:
    """Every layer's maps of one token (``grid_maps``), quantised, as the page reads them: a grid view's "maps"."""
    return _b64(quantise(grid_maps(attention, token)))


# ---- The parts ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Part:
    """Numbers for the page; ``to_json`` is what it reads (a field that is None is left out)."""

    def to_json(self) -> dict:
        return dataclasses.asdict(self, dict_factory=lambda items: {k: v for k, v in items if v is not None})


@dataclasses.dataclass(frozen=True)
class MapAnswer(Part):
    """One (g, g) map for a view drawn over the tab's image (rollout), quantised."""

    grid: int
    map: str


def map_answer(heatmap: np.ndarray) -> MapAnswer:
    return MapAnswer(heatmap.shape[-1], _b64(quantise(heatmap)))


@dataclasses.dataclass(frozen=True)
class RelevanceAnswer(Part):
    """The relevance view's numbers: the relevance of ``label`` and its caption (HTML)."""

    label: str
    title: str
    grid: int
    map: str


def relevance_answer(analysis: Analysis) -> RelevanceAnswer:
    """The relevance the image was analysed for (``analysis.relevance_label``)."""
    label, heatmap = analysis.relevance_label, map_answer(analysis.relevance)
    return RelevanceAnswer(label, caption_html(relevance_title(analysis, label)), heatmap.grid, heatmap.map)


@dataclasses.dataclass(frozen=True)
class QueryAnswer(Part):
    """Where ``patch`` looks, in every layer and head (``cls_maps`` of its token), and the caption (HTML)."""

    patch: int
    title: str
    maps: str


def query_answer(attention: np.ndarray, patch: int) -> QueryAnswer:
    """Where ``patch`` attends in every layer and head."""
    return QueryAnswer(patch, caption_html(query_title(patch)), cls_maps(attention, 1 + patch))


@dataclasses.dataclass(frozen=True)
class SnapshotAnswer(Part):
    """Where [CLS] looked in the training snapshot at slider ``position``, and what the note says of it (HTML)."""

    position: int
    note: str
    maps: str


def snapshot_answer(attention: np.ndarray, position: int, note: str) -> SnapshotAnswer:
    return SnapshotAnswer(position, caption_html(note), cls_maps(attention))


@dataclasses.dataclass(frozen=True)
class Answers(Part):
    """The single views' answers that come with an image's numbers: kind -> which (the map, the patch, the class)."""

    rollout: dict[str, MapAnswer]  # {"map": ...}
    query: dict[str, QueryAnswer]  # the first query patch (as a str) -> where it looks
    relevance: dict[str, RelevanceAnswer] | None = None  # the class analysed for; None: not asked for


@dataclasses.dataclass(frozen=True)
class PageNumbers(Part):
    """An analysed image's numbers: the large view's value, which every view of the page draws from."""

    key: str  # image_key
    label: str  # the predicted class
    patch: int  # the first query patch
    answers: Answers
    probs: dict[str, float]  # the prediction view's: calibrated probabilities, the info line, the notice (HTML)
    info: str
    notice: str
    size: int  # the large view's side, in pixels
    layers: int
    heads: int
    grid: int
    height: int  # the input's
    width: int
    channels: int
    smooth: bool  # upsample the input bicubic (photos), not nearest
    alpha: list[float]  # the heat map's share of an overlay pixel where the map is 0 and at its maximum
    image: str  # image_text
    maps: str  # cls_maps: (L, H + 1, g, g)
    colormap: str  # the heat map's 256 RGB entries


@dataclasses.dataclass(frozen=True)
class Message(Part):
    """What the page says in place of a prediction (HTML)."""

    message: str


def numbers(result: Analysis | InputError | str, blank_message: str) -> PageNumbers | Message:
    """The page's answer to a new image: for an analysed one, the prediction and the numbers every view draws from,
    with the answers for rollout, the first query patch and the class it was analysed for (where it was); else a
    ``Message``: ``blank_message`` for a blank image, why one can't be read, or ``result`` itself (a str: no model,
    nothing yet).

    An image that can't be read is answered, not raised: the page shows why in place of the prediction, and in a
    batch it fails no one else's request.
    """
    if not isinstance(result, Analysis):
        return Message(caption_html(message_text(result, blank_message)))
    image, attention = result.input, result.attention
    patch = explain.first_query_patch(result.rollout)
    answers = Answers({"map": map_answer(result.rollout)},
                      {str(patch): query_answer(attention, patch)},
                      None if result.relevance_label is None else {result.relevance_label: relevance_answer(result)})
    layers, heads = attention.shape[:2]
    return PageNumbers(
        key=image_key(image), label=result.label, patch=patch, answers=answers, probs=result.probs,
        info=caption_html(info_text(result)),
        notice=caption_html(unfamiliar_text(result.model)) if result.unfamiliar else "",
        size=LARGE, layers=layers, heads=heads, grid=result.grid, height=image.shape[0], width=image.shape[1],
        channels=1 if image.ndim == 2 else 3, smooth=image.ndim == 3, alpha=list(render.HEAT_ALPHA),
        image=image_text(image), maps=cls_maps(attention), colormap=_b64(render.colormap(render.HEAT)))


def starting_numbers(first: Analysis | None, prompt: str) -> str:
    """The numbers a tab's page starts with (JSON; "" for none): those of the example ``first``, which the page shows
    until the user gives an image of their own."""
    if first is None:
        return ""
    info = caption_html(f"An example: **{first.label}** ({100 * first.probs[first.label]:.1f}%). {prompt}")
    return json.dumps(dataclasses.replace(numbers(first, prompt), info=info).to_json())


@dataclasses.dataclass(frozen=True)
class Reading(Part):
    """The prediction alone, while the pen is down."""

    label: str
    probs: dict[str, float]
    info: str
    notice: str = ""
    reading: bool = True


def reading(prediction: Prediction) -> Reading:
    """The page's answer while the pen is down: the prediction alone, from one forward pass without attention (a few
    hundred bytes); the other views wait for the pen to lift."""
    info = READING_TEXT.format(label=prediction.label, percent=f"{100 * prediction.confidence:.1f}")
    return Reading(prediction.label, prediction.probs, caption_html(info))


@dataclasses.dataclass(frozen=True)
class Intact(Part):
    """The intact model's answer: its class and that class's calibrated probability."""

    label: str
    probability: float


@dataclasses.dataclass(frozen=True)
class LogitDiff(Part):
    """The intact model's class against its runner-up, in logits: with every head on, and with the heads off."""

    intact: float
    ablated: float


@dataclasses.dataclass(frozen=True)
class KnockoutAnswer(Part):
    """The board's numbers: the image with some heads off, in the form of an image's own numbers (its prediction,
    ``maps`` and ``rollout``), so that the prediction and the attention views redraw for the knocked-out model."""

    off: list[list[int]]  # every head off, [layer, head], 0-based
    mode: str
    label: str  # the ablated model's class, and its calibrated probabilities
    probs: dict[str, float]
    intact: Intact  # with every head on
    predicted: str  # the intact model's class and runner-up, whose logit difference is followed
    runner_up: str
    logit_diff: LogitDiff
    info: str
    maps: str  # cls_maps of the ablated run
    rollout: MapAnswer


def knockout_answer(knockout: Knockout) -> KnockoutAnswer:
    """The image with the heads ``knockout.off`` switched off: the ablated prediction (calibrated, as the prediction
    view shows it), the logit difference before and after, and the ablated run's [CLS] maps and rollout."""
    names, intact, ablated = knockout.classes, knockout.intact, knockout.ablated
    label, predicted, runner_up = names[int(ablated.argmax())], names[knockout.predicted], names[knockout.runner_up]
    info = KNOCKOUT_TEXT.format(label=label, percent=f"{100 * float(ablated.max()):.1f}", count=len(knockout.off),
                                total=knockout.heads, mode=knockout.mode, intact=predicted,
                                intact_percent=f"{100 * float(intact.max()):.1f}", runner_up=runner_up,
                                before=f"{knockout.logit_diff:.2f}", after=f"{knockout.ablated_logit_diff:.2f}")
    return KnockoutAnswer(
        off=[list(pair) for pair in knockout.off], mode=knockout.mode, label=label,
        probs={name: float(p) for name, p in zip(names, ablated)},
        intact=Intact(names[int(intact.argmax())], float(intact.max())), predicted=predicted, runner_up=runner_up,
        logit_diff=LogitDiff(round(knockout.logit_diff, 4), round(knockout.ablated_logit_diff, 4)),
        info=caption_html(info), maps=cls_maps(knockout.attention),
        rollout=map_answer(explain.attention_rollout(knockout.attention)))


@dataclasses.dataclass(frozen=True)
class LensLayer(Part):
    """What [CLS] would answer after one layer: its top class, that class's probability and the final answer's."""

    label: str
    probability: float
    answer: float


@dataclasses.dataclass(frozen=True)
class LensAnswer(Part):
    """The lens strip's numbers: the final answer ``label``, each layer's ``LensLayer``, and per patch the final
    answer's probability after each layer as levels of 0..255 for 0 to 1 (one scale for all), base64."""

    label: str
    layers: list[LensLayer]
    grid: int
    maps: str


def lens_answer(names: list[str], cls: np.ndarray, maps: np.ndarray) -> LensAnswer:
    """The logit lens of an image: ``cls`` (L, classes), what [CLS] would answer after each layer as calibrated
    probabilities; ``maps`` (L, g, g), per patch the probability of the model's answer after each layer."""
    final = int(cls[-1].argmax())
    layers = [LensLayer(names[int(row.argmax())], round(float(row.max()), 4), round(float(row[final]), 4))
              for row in cls]
    return LensAnswer(names[final], layers, int(maps.shape[-1]), image_text(np.clip(maps, 0, 1)))
