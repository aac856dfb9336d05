"""What each model costs per image on one CPU thread, as the app's server runs it: the shipped models beside the
architectures the recipes train (random weights: the time does not depend on their values).

    python benchmarks/model_cost.py [--repeat 300] [--threads 1] [--onednn]

The models take turns, one forward pass each per round, so a busy or throttled machine slows them alike and
their ratios hold even when the milliseconds move.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import p50_p95  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)
from vit_demo import load_model  # noqa: E402
from vit_demo.model import VisionTransformer  # noqa: E402
from vit_demo.training.recipes import RECIPES  # noqa: E402


def describe(model: VisionTransformer) -> str:
    c = model.config
    return f"width {c.dim}, {c.depth} layers, {c.heads} heads, MLP {c.mlp_dim}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the app's server uses 1)")
    parser.add_argument("--onednn", action="store_true", help="with oneDNN on, torch's default (the app's server "
                        "turns it off: vit_demo/app/serving.py)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.mkldnn.enabled = args.onednn

    models = {f"shipped {name}": load_model(name, device="cpu").model for name in ("mnist", "cifar10")}
    models.update({f"{name} recipe": VisionTransformer(recipe.vit).eval() for name, recipe in RECIPES.items()})
    inputs = {name: torch.rand(1, m.config.in_channels, m.config.image_size, m.config.image_size)
              for name, m in models.items()}
    times: dict[tuple[str, bool], list[float]] = {(name, a): [] for name in models for a in (False, True)}
    with torch.inference_mode():
        for round_ in range(args.repeat + 5):
            for (name, attention), samples in times.items():
                started = time.perf_counter()
                models[name].forward_activations(inputs[name], attention=attention)
                if round_ >= 5:  # the first rounds warm up
                    samples.append((time.perf_counter() - started) * 1000)

    print(f"torch {torch.__version__}, {args.threads} thread(s), oneDNN {'on' if args.onednn else 'off'}, "
          f"{args.repeat} rounds, models taking turns")
    print("| model | architecture | parameters | forward median ms | p95 ms | with attention median ms | p95 ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, model in models.items():
        fast, attention = p50_p95(times[name, False]), p50_p95(times[name, True])
        print(f"| {name} | {describe(model)} | {sum(p.numel() for p in model.parameters()):,} | {fast[0]:.2f} | "
              f"{fast[1]:.2f} | {attention[0]:.2f} | {attention[1]:.2f} |")


if __name__ == "__main__":
    main()
