"""Attention through training: the image in hand through the model as it was at an earlier epoch (the snapshots
train.py keeps), with that epoch's test accuracy."""

from __future__ import annotations

import dataclasses

import gradio as gr
import numpy as np
import torch

from vit_demo import live_view
from vit_demo.calibration import probabilities
from vit_demo.model import ViTConfig
from vit_demo.ui.components import live_grid
from vit_demo.ui.models import Analysis, TrainingRun, classifier, training_run
from vit_demo.ui.serving import PRIVATE


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
    snapshot = run.snapshots[position - 1]
    clf = classifier(analysis.model)
    with torch.no_grad():
        logits, attention = snapshot.model(clf.batch([analysis.input]), return_attention=True)  # (1, classes), (1, L, H, T, T)
    probs = probabilities(logits[0], snapshot.temperature)  # (classes,)
    label = clf.classes[int(probs.argmax())]
    epochs = f" of {run.epochs}" if run.epochs else ""
    note = (f"**Epoch {snapshot.epoch}{epochs}**: test accuracy then **{100 * snapshot.test_accuracy:.2f}%**. "
            f"For this image it said **{label}** ({100 * float(probs.max()):.1f}%).")
    return attention[0].float().cpu().numpy(), snapshot.epoch, note


def training_views(model: str, analysis: Analysis | None, position: int) -> tuple:
    """The grid and note for slider ``position`` (1-based; the last is the trained model): the grid as the numbers
    the page draws it from, "" for the trained model's (the tab's own, which the page has)."""
    run = training_run(model)
    if run.problem or analysis is None:
        return "", run.problem or ""
    attention, epoch, note = snapshot_attention(analysis, position)
    return ("" if epoch is None else live_view.grid_payload(attention)), note


@dataclasses.dataclass
class TrainingView:
    position: gr.Slider
    picture: gr.HTML  # a layer x head grid drawn in the page
    note: gr.Markdown

    @property
    def outputs(self) -> list:
        return [self.picture, self.note]

    def wire(self, model: str, state: gr.State) -> None:
        self.position.change(lambda analysis, position: training_views(model, analysis, position),
                             [state, self.position], self.outputs, **PRIVATE)


def build_training(prefix: str, model: str, config: ViTConfig) -> TrainingView:
    """A row: where [CLS] looks through training, with a slider over the snapshots (hidden where there are none)."""
    run = training_run(model)
    with gr.Row(equal_height=False):
        with gr.Column():
            gr.Markdown("### Attention through training\nThe same image through the model as it was during "
                        "training: watch the heads learn where to look.")
            # Hidden where there are no snapshots (one position; Gradio wants a slider's minimum below its maximum).
            position = gr.Slider(1, max(run.positions, 2), value=run.positions, step=1,
                                 label="Training progress (snapshot)", visible=not run.problem,
                                 elem_id=f"{prefix}-training-position")
            note = gr.Markdown(run.problem or "", elem_id=f"{prefix}-training-note")
            picture = live_grid(f"{prefix}-training", prefix, config.depth, config.heads,
                                "where [CLS] looked in every layer and head at this point of training",
                                visible=not run.problem)
    return TrainingView(position, picture, note)
