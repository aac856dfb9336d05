"""What the page says, in the app's markdown: the captions of the prediction and of the views, and the templates with
{fields} that the page fills in with its own numbers (vit_demo/page/description.py hands them to it, as HTML:
``caption_html``).
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np

from vit_demo.app.service import TrainingRun, calibration_report
from vit_demo.data.datasets import dataset_spec
from vit_demo.interpret.faithfulness import RANDOM_RANKINGS, Verdict

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


def query_title(patch: int | str | None) -> str:
    if patch is None:
        return "### Where a patch looks"
    return (f"### Where patch {patch} looks\nIn every layer and head; click a patch in "
            "*What the model sees* to choose another.")


def caption_html(markdown: str) -> str:
    """A view's note in the app's markdown (a ``###`` title, ``**bold**``, ``*italic*``) as HTML for its caption in
    the page: the title in bold, `code` as code, then the text."""
    text = html.escape(markdown, quote=False)
    text = re.sub(r"^#+ (.*)$", r"<b>\1</b>", text, flags=re.MULTILINE)
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text).replace("\n", " ")


# ---- Training snapshots

def trained_note(run: TrainingRun) -> str:
    epochs = f"epoch {run.epochs}" if run.epochs else "the end of training"
    accuracy = f", test accuracy **{100 * run.test_accuracy:.2f}%**" if run.test_accuracy is not None else ""
    return (f"**The trained model** ({epochs}{accuracy}): the views above. Move the slider left to see the image "
            "through the model earlier in training.")


def snapshot_note(run: TrainingRun, position: int, label: str, percent: str) -> str:
    """What the training view says of the snapshot at slider ``position``, for an image it read as ``label`` with
    ``percent``% (the page's own model fills in the same note: vit_demo/page/description.py)."""
    snapshot = run.snapshots[position - 1]
    epochs = f" of {run.epochs}" if run.epochs else ""
    return (f"**Epoch {snapshot.epoch}{epochs}**: test accuracy then **{100 * snapshot.test_accuracy:.2f}%**. "
            f"For this image it said **{label}** ({percent}%).")


# ---- How far to trust each map

# The verdict's words, filled in by the page (assets/page/faithfulness.js, which gets them from
# description.py and follows the rules of ``verdict_parts``): {fields} are numbers shown
# with two decimals, percentages with one, map names, or other entries of this table, filled in first.
VERDICT_TEXTS = {
    "spread": "the spread of the area under the curve over {rankings} random rankings of this image",
    "noise": "the noise (±{deletion} on deletion, ±{insertion} on insertion: {spread})",
    "scores": "deletion {deletion}, insertion {insertion}",
    "flat_why": "with every patch removed, the blank image still reads **{label}** at {blank}% ({whole}% for the "
                "whole image)",
    "winner": "For this image, **{winner}** is the map to trust: it leads on both curves by more than {noise} "
              "({scores}; lower deletion and higher insertion are better).",
    "split": "No map wins for this image: **{deletion_leader}** leads on deletion ({deletion_auc}, lower is better) "
             "and **{insertion_leader}** on insertion ({insertion_auc}, higher is better), each by more than "
             "{noise}.",
    "one": "No map wins for this image: **{lead}** leads on {curve} by more than the noise (±{curve_noise}, "
           "{spread}; {scores}), but on {other} the maps tie, within ±{other_noise}.",
    "one_flat": "No map wins for this image: **{lead}** leads on {curve} by more than the noise (±{curve_noise}, "
                "{spread}; {scores}), but on {other} no map can lead: {flat_why}, and every {other} curve stays "
                "between {low}% and {high}%.",
    "tie": "The maps tie for this image: on both curves they differ by less than {noise}.",
    "tie_flat": "The maps tie for this image: on {curve} they differ by less than the noise (±{curve_noise}, "
                "{spread}), and on {other} no map can lead: {flat_why}, and every {other} curve stays between "
                "{low}% and {high}%.",
    "flat": "The maps can't be told apart on this image: {flat_why}, so deletion has nowhere to fall and insertion "
            "nowhere to rise. Every ranking of the patches, random ones too, keeps the prediction between {low}% "
            "and {high}%: the areas under their curves differ by noise, not by anything the maps found.",
}


def verdict_parts(v: Verdict, label: str) -> tuple[str, dict[str, str]]:
    """Which of ``VERDICT_TEXTS`` says the verdict on an image the model reads as ``label``, and its fields: a
    winner only where one map leads on both curves by more than the noise; no leader on a flat curve (FLAT)."""
    def two(x: float) -> str:
        return f"{x:.2f}"

    def pc(x: float) -> str:
        return f"{100 * x:.1f}"

    spread = VERDICT_TEXTS["spread"].format(rankings=RANDOM_RANKINGS)
    noise = VERDICT_TEXTS["noise"].format(deletion=two(v.deletion_noise), insertion=two(v.insertion_noise),
                                          spread=spread)
    flat_why = VERDICT_TEXTS["flat_why"].format(label=label, blank=pc(v.blank), whole=pc(v.whole))
    curves = {"deletion": (v.deletion_leader, v.deletion_noise, v.deletion_flat, v.deletion_band),
              "insertion": (v.insertion_leader, v.insertion_noise, v.insertion_flat, v.insertion_band)}

    def scores(kind: str) -> str:
        return VERDICT_TEXTS["scores"].format(deletion=two(v.deletion_auc[kind]), insertion=two(v.insertion_auc[kind]))

    if v.deletion_flat and v.insertion_flat:
        low, high = min(v.deletion_band[0], v.insertion_band[0]), max(v.deletion_band[1], v.insertion_band[1])
        return "flat", {"flat_why": flat_why, "low": pc(low), "high": pc(high)}
    if v.winner:
        return "winner", {"winner": v.winner, "noise": noise, "scores": scores(v.winner)}
    if v.deletion_leader and v.insertion_leader:
        return "split", {"deletion_leader": v.deletion_leader, "insertion_leader": v.insertion_leader,
                         "deletion_auc": two(v.deletion_auc[v.deletion_leader]),
                         "insertion_auc": two(v.insertion_auc[v.insertion_leader]), "noise": noise}
    # At most one curve has a leader, or is judged at all: ``curve`` is that one (deletion first), ``other`` the rest.
    curve = next((c for c in curves if curves[c][0]), next((c for c in curves if not curves[c][2]), "deletion"))
    other = "insertion" if curve == "deletion" else "deletion"
    lead, curve_noise = curves[curve][:2]
    other_noise, other_flat, (low, high) = curves[other][1:]
    fields = {"curve": curve, "other": other, "curve_noise": two(curve_noise), "spread": spread}
    flat_fields = {"flat_why": flat_why, "low": pc(low), "high": pc(high)}
    if lead:
        fields = {**fields, "lead": lead, "scores": scores(lead)}
        if other_flat:
            return "one_flat", {**fields, **flat_fields}
        return "one", {**fields, "other_noise": two(other_noise)}
    if other_flat:
        return "tie_flat", {**fields, **flat_fields}
    return "tie", {"noise": noise}


def verdict_text(v: Verdict, label: str) -> str:
    """The verdict in words (markdown), for an image the model reads as ``label``."""
    key, fields = verdict_parts(v, label)
    return VERDICT_TEXTS[key].format(**fields)


# ---- An image as the page keeps it: its 8-bit pixels, base64 (the example a tab starts with)

def pixels(image: np.ndarray) -> np.ndarray:
    """An input in [0, 1] (on 256 levels, as preprocessing leaves it) as its 8-bit pixels: same shape, uint8."""
    return np.round(np.asarray(image) * 255).astype(np.uint8)


def image_text(image: np.ndarray) -> str:
    """An input as the page keeps it: its 8-bit pixels, base64."""
    return base64.b64encode(pixels(image).tobytes()).decode()
