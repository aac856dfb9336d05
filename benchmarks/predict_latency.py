"""How long one prediction takes on this machine: bare forward passes and the whole predict() path.

    python benchmarks/predict_latency.py [--model mnist] [--device cpu] [--repeat 200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import timed  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)
from vit_demo import load_model  # noqa: E402
from vit_demo.classifier import to_chw  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mnist")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()

    clf = load_model(args.model, args.device)
    canvas = Image.new("RGB", (800, 800), "white")
    ImageDraw.Draw(canvas).line([(250, 200), (550, 200), (380, 650)], fill="black", width=40, joint="curve")
    drawing = np.asarray(canvas)
    x = torch.from_numpy(to_chw(clf.preprocess(drawing))[None]).to(clf.device)  # (1, C, H, W)
    n_params = sum(p.numel() for p in clf.model.parameters())

    with torch.inference_mode():
        rows = [
            ("forward, fast path (logits only)", timed(lambda: clf.model(x), args.repeat)),
            ("forward with attention weights", timed(lambda: clf.model.forward_activations(x, attention=True), args.repeat)),
        ]
    rows += [
        ("preprocess an 800x800 drawing", timed(lambda: clf.preprocess(drawing), args.repeat)),
        ("predict(): preprocess + forward + attention", timed(lambda: clf.predict(drawing), args.repeat)),
    ]
    print(f"model {args.model}: {n_params:,} parameters, device {clf.device}, torch threads {torch.get_num_threads()}")
    print(f"| step ({args.repeat} runs) | median ms | p95 ms |")
    print("|---|---:|---:|")
    for name, (median, p95) in rows:
        print(f"| {name} | {median:.2f} | {p95:.2f} |")


if __name__ == "__main__":
    main()
