"""What reduced weights change: a model with its weights rounded to float16, or its weight matrices to int8 (as a
graph storing them so computes: ``export.rounded_weights``, what ``python -m vit_demo import --graph-weights KIND``
exports), against the model itself, on real images.

    python benchmarks/reduced_weights.py --data-dir DIR [--n 1000] [--model mnist --model cifar10 --model DIR]

The shipped models are measured on their test sets' first ``--n`` images; any other weights folder (an imported
ImageNet ViT) on the outside photos (``data/outside_photos``: the sample photos scikit-image and matplotlib install,
and their quarters), each through the model's own preprocessing. Prints, per model and kind, the share of labels that stay
the same, the largest change of a calibrated probability and of an attention weight, and the accuracies where the
images have labels. The shipped models' graphs keep float32 weights: the page's numbers are held to Python's within
1e-4 (docs/methods.md), which rounded weights would break.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vit_demo import load_model  # noqa: E402
from vit_demo.data.datasets import load_split  # noqa: E402
from vit_demo.data.outside_photos import outside_photos  # noqa: E402
from vit_demo.onnx.export import rounded_weights  # noqa: E402
from vit_demo.weights import GRAPH_WEIGHT_TYPES, SHIPPED  # noqa: E402

BATCH = 50


def images_for(clf, model: str, data_dir: str, n: int) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    """(N, C, H, W) in [0, 1], their labels (None: unlabelled) and what they are."""
    if model in SHIPPED:
        images, labels = load_split(model, data_dir, "test")
        return images[:n].float().div(255), labels[:n], "test images"
    photos = [clf.preprocess(photo) for _, photo in outside_photos()[:n]]
    return clf.batch(photos), None, "outside photos"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="images per model, at most")
    parser.add_argument("--data-dir", required=True, help="where MNIST and CIFAR-10 are (downloaded if missing)")
    parser.add_argument("--model", action="append", help="mnist, cifar10 or a weights folder (default: both shipped)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | weights | images | same label | max change of a probability | max change of an attention weight "
          "| accuracy, float32 | accuracy, reduced |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for model in args.model or SHIPPED:
        clf = load_model(model, device="cpu")
        x, labels, what = images_for(clf, model, args.data_dir, args.n)
        for kind in GRAPH_WEIGHT_TYPES[1:]:
            rounded = rounded_weights(clf.model, kind)
            probs, attention = ([], []), 0.0
            with torch.no_grad():
                for i in range(0, len(x), BATCH):
                    exact, reduced = (m.forward_activations(x[i : i + BATCH], attention=True)
                                      for m in (clf.model, rounded))
                    for found, into in zip((exact, reduced), probs):
                        into.append((found.logits / clf.temperature).softmax(-1))  # (B, K)
                    attention = max(attention, *(float((a - b).abs().max())
                                                 for a, b in zip(exact.attentions, reduced.attentions)))
            p, q = (torch.cat(found) for found in probs)  # (N, K) each
            same = float((p.argmax(-1) == q.argmax(-1)).float().mean())
            accuracy = ["-", "-"] if labels is None else [
                f"{100 * float((r.argmax(-1) == labels).float().mean()):.1f}%" for r in (p, q)]
            print(f"| {Path(model).name} | {kind} | {len(x)} {what} | {100 * same:.1f}% | "
                  f"{100 * float((p - q).abs().max()):.2f} points | {attention:.1e} | {accuracy[0]} | {accuracy[1]} |",
                  flush=True)


if __name__ == "__main__":
    main()
