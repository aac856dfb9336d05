"""Charts, drawn with matplotlib's object API (a Figure on an Agg canvas) and returned as RGB PIL images.

No pyplot: its global figure registry is not thread-safe, and the app draws in several worker threads at once.
Every chart sets its own font sizes rather than changing matplotlib's global settings, for the same reason.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from vit_demo.interpret.faithfulness import Curves

DPI = 100
FONT_SIZE = 12  # points; at 100 dpi large enough to read on a projector
KIND_STYLES = {  # one look per kind of map, the same in both panels; random is the floor, grey and dashed
    "attention": {"color": "tab:blue"},
    "rollout": {"color": "tab:orange"},
    "relevance": {"color": "tab:green"},
    "random": {"color": "grey", "linestyle": "--"},
}


def _figure(width: int, height: int, scale: float = 1.0) -> Figure:
    """A white figure of width x height pixels, laid out tightly when drawn; ``scale`` enlarges it, text and lines
    included (a chart for a slide)."""
    return Figure(figsize=(width / DPI, height / DPI), dpi=DPI * scale, facecolor="white", layout="tight")


def _label(ax: Axes, title: str, xlabel: str, ylabel: str = "") -> None:
    """Title, axis labels and ticks at a readable size, and a light grid."""
    ax.set_title(title, fontsize=FONT_SIZE)
    ax.set_xlabel(xlabel, fontsize=FONT_SIZE)
    ax.set_ylabel(ylabel, fontsize=FONT_SIZE)
    ax.tick_params(labelsize=FONT_SIZE)
    ax.grid(alpha=0.3)


def _picture(fig: Figure) -> Image.Image:
    """Render a figure to an RGB picture of its own size in pixels."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy())  # (H, W, 3) uint8


FAITHFULNESS_WIDTH = 760  # pixels of faithfulness_plot at scale 1


def faithfulness_plot(curves: dict[str, Curves], image_index: int = 0, scale: float = 1.0) -> Image.Image:
    """One image's deletion and insertion curves, every kind of map in both panels (about 760 x 400 px times
    ``scale``).

    ``curves``: {kind: Curves}, as ``faithfulness.faithfulness`` returns; ``image_index`` picks the image (row).
    """
    fig = _figure(FAITHFULNESS_WIDTH, 400, scale)
    deletion, insertion = fig.subplots(1, 2, sharey=True)
    panels = ((deletion, "deletion", "Deletion (lower AUC = more faithful)", "% of patches removed"),
              (insertion, "insertion", "Insertion (higher AUC = more faithful)", "% of patches added"))
    for ax, field, title, xlabel in panels:
        for kind, kind_curves in curves.items():
            curve = getattr(kind_curves, field)[image_index]  # (STEPS + 1,)
            auc = getattr(kind_curves, f"{field}_auc")[image_index]
            ax.plot(np.linspace(0, 100, len(curve)), curve, label=f"{kind}  AUC {auc:.2f}", linewidth=2,
                    **KIND_STYLES[kind])
        _label(ax, title, xlabel)
        ax.set(xlim=(0, 100), ylim=(-0.02, 1.02), xticks=range(0, 101, 25))
        # Under the panel, clear of the tick labels and the axis label (3.2 font sizes), so it hides no curve.
        ax.legend(fontsize=FONT_SIZE, loc="upper left", bbox_to_anchor=(0, 0), frameon=False, handlelength=1.5,
                  handletextpad=0.5, labelspacing=0.15, borderaxespad=3.2)
    deletion.set_ylabel("P(predicted class)", fontsize=FONT_SIZE)
    return _picture(fig)


def reliability_diagram(before: dict, after: dict, temperature: float) -> Image.Image:
    """Reliability diagrams before and after temperature scaling, side by side (about 760 x 380 px), as in Guo et
    al. (2017), Figure 1: per bin of top probability, the share classified right, against the diagonal where the
    two agree.

    ``before``, ``after``: ``calibration.Reliability.to_dict()`` records (count, confidence, accuracy, ece per bin).
    """
    fig = _figure(760, 380)
    panels = fig.subplots(1, 2, sharey=True)
    for ax, record, title in ((panels[0], before, "Before: softmax(logits)"),
                              (panels[1], after, f"After: softmax(logits / {temperature:.2f})")):
        bins = len(record["count"])
        edges = np.linspace(0, 1, bins + 1)[:-1]  # (bins,): each bin's left edge
        filled = np.asarray(record["count"]) > 0
        accuracy, confidence = np.asarray(record["accuracy"])[filled], np.asarray(record["confidence"])[filled]
        ax.bar(edges[filled], accuracy, width=1 / bins, align="edge", color="tab:blue", edgecolor="white",
               label="share right")
        ax.bar(edges[filled], np.abs(confidence - accuracy), bottom=np.minimum(confidence, accuracy), width=1 / bins,
               align="edge", color=(0.84, 0.15, 0.16, 0.25), edgecolor="tab:red", hatch="//", linewidth=0.8,
               label="gap to mean top prob.")
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1.5)
        _label(ax, f"{title}\nECE {100 * record['ece']:.1f}%, NLL {record['nll']:.3f}", "top probability")
        ax.set(xlim=(0, 1), ylim=(0, 1))
    panels[0].set_ylabel("share classified right", fontsize=FONT_SIZE)
    panels[0].legend(fontsize=FONT_SIZE - 2, loc="upper left", frameon=True)
    return _picture(fig)


def attention_distance_plot(distance: np.ndarray) -> Image.Image:
    """How far each head looks: one dot per head over its layer, each head in a colour of its own and always at the
    same place in its layer (head 1 leftmost), with a legend (about 480 x 320 px).

    ``distance``: (L, H) mean attention distance in pixels, as ``inside.read_attention_distance`` returns.
    """
    L, H = distance.shape
    jitter = np.linspace(-0.2, 0.2, H) if H > 1 else np.zeros(1)  # (H,): the heads of a layer side by side
    fig = _figure(480, 320)
    ax = fig.subplots()
    colours = matplotlib.colormaps["tab10"]
    for h in range(H):
        ax.scatter(np.arange(1, L + 1) + jitter[h], distance[:, h], s=36, color=colours(h % 10), alpha=0.9,
                   edgecolors="white", linewidths=0.5, label=f"head {h + 1}")
    ax.legend(fontsize=FONT_SIZE - 3, loc="upper left", ncol=min(H, 4), frameon=True, handletextpad=0.1,
              columnspacing=0.6)
    _label(ax, "How far each head looks", "layer", "mean attention distance (px)")
    ax.set(xticks=range(1, L + 1), xlim=(0.5, L + 0.5), ylim=(0, 1.45 * max(float(distance.max()), 1e-6)))  # room for the legend
    return _picture(fig)


def training_curves(history: list[dict], title: str) -> Image.Image:
    """Loss and accuracy per epoch, train and test, from a training run's history (1000 x 400 px)."""
    epochs = [h["epoch"] for h in history]
    fig = _figure(1000, 400)
    ax_loss, ax_acc = fig.subplots(1, 2)
    ax_loss.plot(epochs, [h["train_loss"] for h in history], label="train (augmented, label-smoothed)")
    ax_loss.plot(epochs, [h["test_loss"] for h in history], label="test")
    _label(ax_loss, "Loss", "epoch", "cross-entropy loss")
    ax_acc.plot(epochs, [100 * h["train_accuracy"] for h in history], label="train (augmented)")
    ax_acc.plot(epochs, [100 * h["test_accuracy"] for h in history], label="test")
    # Zoom in on the last few percent, where the runs differ.
    best = max(h["test_accuracy"] for h in history)
    ax_acc.set_ylim(max(0.0, 100 * best - 10), 100)
    _label(ax_acc, "Accuracy", "epoch", "accuracy (%)")
    for ax in (ax_loss, ax_acc):
        ax.legend(fontsize=FONT_SIZE)
    fig.suptitle(title, fontsize=FONT_SIZE + 2)
    return _picture(fig)


def head_importance_plot(record: dict) -> Image.Image:
    """Which heads matter (about 900 x 380 px): each head's importance as a layer x head heatmap, its value written in
    each cell, beside the pruning curves that test it, the accuracy as heads are switched off cumulatively, most
    important first, against random orders (Michel et al., 2019).

    ``record``: ``heads.read_head_importance``'s: "importance" (L, H), "curves" {"importance", "random"} (L * H + 1
    accuracies each), "images", "split", "ablation", "random_orders".
    """
    importance = np.asarray(record["importance"], dtype=float)  # (L, H)
    L, H = importance.shape
    fig = _figure(900, 380)
    grid, curves = fig.subplots(1, 2, width_ratios=[2, 3])
    scaled = importance / max(float(importance.max()), 1e-12)
    grid.imshow(scaled, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for (layer, head), value in np.ndenumerate(importance):
        grid.text(head, layer, f"{100 * scaled[layer, head]:.0f}", ha="center", va="center", fontsize=FONT_SIZE - 3,
                  color="black" if scaled[layer, head] > 0.6 else "white")
    grid.set_title("Importance (% of the top head's)", fontsize=FONT_SIZE)
    grid.set_xlabel("head", fontsize=FONT_SIZE)
    grid.set_ylabel("layer", fontsize=FONT_SIZE)
    grid.set(xticks=range(H), xticklabels=range(1, H + 1), yticks=range(L), yticklabels=range(1, L + 1))
    grid.tick_params(labelsize=FONT_SIZE - 1)
    removed = np.arange(L * H + 1)
    curves.plot(removed, 100 * np.asarray(record["curves"]["importance"]), color="tab:red", linewidth=2,
                label="most important first")
    curves.plot(removed, 100 * np.asarray(record["curves"]["random"]), color="grey", linestyle="--", linewidth=2,
                label=f"random order (mean of {record.get('random_orders', 'several')})")
    _label(curves, f"Switching heads off ({record['ablation']}-ablation)", "heads switched off",
           f"accuracy (%, {record['images']} {record['split']} images)")
    curves.set(xlim=(0, L * H), ylim=(0, 101))
    curves.legend(fontsize=FONT_SIZE - 2, loc="best", frameon=True)  # where it hides the least of the curves
    return _picture(fig)


def reconstruction_figure(images: np.ndarray, hidden: np.ndarray, filled: np.ndarray, title: str) -> Image.Image:
    """What a masked autoencoder fills in (vit_demo/training/mae.py), one column an image (about 110 px wide each, 3
    rows): the image, what the encoder saw (the hidden patches grey) and the image with its hidden patches as the
    decoder predicted them. ``images`` and ``filled`` (N, H, W, C) in [0, 1], ``hidden`` (N, H, W, 1) 1 where hidden."""
    n = len(images)
    fig = _figure(110 * n + 120, 420)
    axes = fig.subplots(3, n, squeeze=False)
    rows = (("image", images), ("encoder saw", images * (1 - hidden) + 0.5 * hidden), ("filled in", filled))
    for r, (name, pictures) in enumerate(rows):
        for i in range(n):
            ax = axes[r, i]
            ax.imshow(np.clip(pictures[i], 0, 1).squeeze(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=FONT_SIZE)
    fig.suptitle(title, fontsize=FONT_SIZE + 2)
    return _picture(fig)
