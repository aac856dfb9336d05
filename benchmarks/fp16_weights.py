"""What float16 weights would change: each shipped model with its weights rounded to float16 (as a graph storing them
so would compute) against the model itself, on real test images.

    python benchmarks/fp16_weights.py --data-dir DIR [--n 1000]

Prints, per model, the share of labels that stay the same, the largest change of a calibrated probability and of an
attention weight, and both accuracies. The page's graphs keep float32 weights: the page's numbers are held to
Python's within 1e-4 (docs/methods.md), which rounded weights would break.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vit_demo import load_model  # noqa: E402
from vit_demo.data.datasets import load_split  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="test images per model")
    parser.add_argument("--data-dir", required=True, help="where MNIST and CIFAR-10 are (downloaded if missing)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | images | same label | max change of a probability | max change of an attention weight | "
          "accuracy, float32 | accuracy, float16 weights |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ("mnist", "cifar10"):
        clf, rounded = load_model(name, device="cpu"), load_model(name, device="cpu").model
        images, labels = load_split(name, args.data_dir, "test")
        x, labels = images[: args.n].float().div(255), labels[: args.n]  # (N, C, H, W) in [0, 1]
        with torch.no_grad():
            for parameter in rounded.parameters():
                parameter.copy_(parameter.half().float())
            exact, half = (m.forward_activations(x, attention=True) for m in (clf.model, rounded))
        p, q = ((found.logits / clf.temperature).softmax(-1) for found in (exact, half))  # (N, K) each
        attention = max(float((a - b).abs().max()) for a, b in zip(exact.attentions, half.attentions))
        same = float((p.argmax(-1) == q.argmax(-1)).float().mean())
        accuracy = [float((r.argmax(-1) == labels).float().mean()) for r in (p, q)]
        print(f"| {name} | {len(x)} | {100 * same:.1f}% | {100 * float((p - q).abs().max()):.2f} points | "
              f"{attention:.1e} | {100 * accuracy[0]:.1f}% | {100 * accuracy[1]:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
