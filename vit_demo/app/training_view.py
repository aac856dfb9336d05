"""Attention through training: the image in hand through the model as it was at an earlier epoch (the snapshots
train.py keeps), with that epoch's test accuracy."""

from __future__ import annotations

import gradio as gr
import numpy as np
import torch

from vit_demo.app.captions import caption_html
from vit_demo.app.components import live_grid
from vit_demo.app.service import Analysis, TrainingRun, classifier, training_run
from vit_demo.app.zerogpu import model_work
from vit_demo.interpret.calibration import probabilities
from vit_demo.model import ViTConfig


def trained_note(run: TrainingRun) -> str:
    epochs = f"epoch {run.epochs}" if run.epochs else "the end of training"
    accuracy = f", test accuracy **{100 * run.test_accuracy:.2f}%**" if run.test_accuracy is not None else ""
    return (f"**The trained model** ({epochs}{accuracy}): the views above. Move the slider left to see the image "
            "through the model earlier in training.")


def snapshot_attention(analysis: Analysis, position: int) -> tuple[np.ndarray, int | None, str]:
    """The analysed image through the model at slider ``position`` (clamped; the last is the trained model): its
    attention (L, H, T, T), the snapshot's epoch (None: the trained model) and the note that says what it is."""
    run = training_run(analysis.model)
    position = min(max(int(position), 1), run.positions)
    if position == run.positions:
        return analysis.attention, None, trained_note(run)
    return through_snapshot(analysis.model, analysis.input, position)


@model_work
def through_snapshot(model: str, image: np.ndarray, position: int) -> tuple[np.ndarray, int, str]:
    """A preprocessed image through the snapshot at slider ``position`` (1 to the number of snapshots): its
    attention (L, H, T, T), the snapshot's epoch, and the note that says what it is."""
    run = training_run(model)
    snapshot = run.snapshots[position - 1]
    clf = classifier(model)
    with torch.no_grad():
        logits, attention = snapshot.model(clf.batch([image]), return_attention=True)  # (1, classes), (1, L, H, T, T)
    probs = probabilities(logits[0], snapshot.temperature)  # (classes,)
    note = snapshot_note(run, position, clf.classes[int(probs.argmax())], f"{100 * float(probs.max()):.1f}")
    return attention[0].float().cpu().numpy(), snapshot.epoch, note


def snapshot_note(run: TrainingRun, position: int, label: str, percent: str) -> str:
    """What the training view says of the snapshot at slider ``position``, for an image it read as ``label`` with
    ``percent``% (the page's own model fills in the same note: vit_demo/app/page_model.py)."""
    snapshot = run.snapshots[position - 1]
    epochs = f" of {run.epochs}" if run.epochs else ""
    return (f"**Epoch {snapshot.epoch}{epochs}**: test accuracy then **{100 * snapshot.test_accuracy:.2f}%**. "
            f"For this image it said **{label}** ({percent}%).")


# A move of the slider redraws the training view in the page (which asks for a snapshot it lacks).
TRAIN_JS = "(position) => {{ window.vdLive?.[{prefix!r}]?.train(position); }}"


TRAINING_TITLE = ("### Attention through training\nThe same image through the model as it was during training: "
                  "watch the heads learn where to look.")


def training_grid(prefix: str, config: ViTConfig, run: TrainingRun, visible: bool = True) -> gr.HTML:
    """The view the page draws itself: the trained model's [CLS] grid, or a snapshot's."""
    return live_grid(f"{prefix}-training", prefix, "training", config.depth, config.heads,
                     "where [CLS] looked in every layer and head at this point of training",
                     visible=visible, positions=str(run.positions), note=caption_html(trained_note(run)))


def build_training(prefix: str, model: str, config: ViTConfig) -> gr.Slider:
    """A column: where [CLS] looks through training, with a slider over the snapshots (hidden where there are none);
    the page draws it, the trained model's from the tab's numbers, a snapshot's from that snapshot's graph."""
    run = training_run(model)
    gr.Markdown(TRAINING_TITLE)
    # Hidden where there are no snapshots (one position; Gradio wants a slider's minimum below its maximum).
    position = gr.Slider(1, max(run.positions, 2), value=run.positions, step=1, label="Training progress (snapshot)",
                         visible=not run.problem, elem_id=f"{prefix}-training-position")
    if run.problem:
        gr.Markdown(run.problem, elem_id=f"{prefix}-training-note")
    training_grid(prefix, config, run, visible=not run.problem)
    position.change(None, position, None, js=TRAIN_JS.format(prefix=prefix))
    return position
