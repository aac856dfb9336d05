"""What the head views (interpret/heads/) cost in PyTorch per image, on one CPU thread, beside the plain forward pass
they must not slow: a head toggle (one batched pass of the image with and without the heads), the logit lens, its
per-patch maps, and the two-image patching grids (both directions; heads only, then heads and residual stream): what
the server runs where the page asks it to (vit_demo/app/forward.py), and what ``residual_at_once``
(vit_demo/page/layout.py) decides by.

    python benchmarks/heads_cost.py [--repeat 30] [--threads 1]

The plain forward pass is timed with no head view in flight, as the drawing path runs it, before and after the head
views: they pass their edits to the model's forward pass and leave the model as it was, so the two should read the
same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import timed  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)
from vit_demo import load_model  # noqa: E402
from vit_demo.interpret import heads



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the app's server uses 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.repeat} repeats each")
    print("| model | what | forward passes | median ms | p95 ms |")
    print("|---|---|---|---:|---:|")
    for name in ("mnist", "cifar10"):
        classifier = load_model(name, device="cpu")
        model, folder = classifier.model, classifier.info.folder
        c = model.config
        means = heads.read_head_means(folder, model)
        generator = torch.Generator().manual_seed(0)
        image, other = (torch.rand(1, c.in_channels, c.image_size, c.image_size, generator=generator) for _ in "ab")
        logits = model(image)
        classes = (int(logits.argmax()), int(logits.topk(2).indices[0, 1]))  # a pair the grid can compare
        L, H, T = c.depth, c.heads, c.num_tokens
        cases = [
            ("plain forward pass (the drawing path)", "1 image", lambda: model(image)),
            ("head toggle: 1 head off, mean-ablated", "1 batch of 2",
             lambda: heads.knockout(model, image, [(0, 0)], means)),
            ("head toggle: a whole layer off", "1 batch of 2",
             lambda: heads.knockout(model, image, [(L - 1, None)], means)),
            ("logit lens ([CLS] after each layer)", "1 image", lambda: heads.logit_lens(model, image)),
            ("logit lens per patch (maps)", "1 image", lambda: heads.lens_maps(model, image)),
            ("patching grid, heads, both directions", f"1 batch of 2, then 2 x {L * H} partial",
             lambda: heads.patching_grid(model, image, other, classes, residual=False)),
            ("patching grid, heads and residual stream, both directions",
             f"1 batch of 2, then 2 x {L * (H + T)} partial",
             lambda: heads.patching_grid(model, image, other, classes)),
            ("plain forward pass again, after the head views", "1 image", lambda: model(image)),
        ]
        with torch.inference_mode():
            for what, passes, fn in cases:
                median, p95 = timed(fn, args.repeat)
                print(f"| {name} | {what} | {passes} | {median:.2f} | {p95:.2f} |", flush=True)


if __name__ == "__main__":
    main()
