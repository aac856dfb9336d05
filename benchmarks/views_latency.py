"""Server time for one drawing and one photo where the page asks the server to run the model (a browser without
WebAssembly, ``?model=server``), step by step, beside the bare model forward pass.

    python benchmarks/views_latency.py [--repeat 100] [--glibc-mmap-threshold] [--photo-recipe]

It runs as the server does (torch threads and glibc's mmap threshold set by ``vit_demo.app.serving``) and feeds the
app's server function what the page sends it (vit_demo/app/forward.py: the model's graph, with the image the page
preprocessed, every head on): its answer is the graph's raw outputs (logits, [CLS]'s attention rows, rollout, a
patch's rows, features), from which the page computes every view's numbers itself.
``--photo-recipe`` adds a column: the photo path with the architecture today's ``cifar10`` recipe trains, with
random weights (the time does not depend on their values), beside the shipped photo model in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import example_photos, forward_request, timed  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)

from vit_demo.app import forward, service, serving  # noqa: E402
from vit_demo.classifier import Classifier, to_chw  # noqa: E402
from vit_demo.data.datasets import dataset_spec  # noqa: E402
from vit_demo.interpret import explain  # noqa: E402
from vit_demo.model import VisionTransformer  # noqa: E402
from vit_demo.training.recipes import RECIPES  # noqa: E402
from vit_demo.weights import WeightsInfo  # noqa: E402


def drawing() -> np.ndarray:
    """A 7 as the browser canvas reads it: 112x112 bytes, ink = 255."""
    image = Image.new("L", (336, 336), 255)
    ImageDraw.Draw(image).line([(90, 70), (250, 70), (150, 280)], fill=0, width=18, joint="curve")
    return (255 - np.asarray(image.resize((112, 112), Image.BILINEAR))).astype(np.uint8)


def page_request(model: str, image: np.ndarray) -> dict:
    c = service.classifier(model).info.config
    return forward_request(model, image, c.depth, c.heads)


@contextlib.contextmanager
def recipe_photo_model() -> Iterator[None]:
    """While inside, the app's photo model is the cifar10 recipe's architecture, with random weights."""
    vit = RECIPES["cifar10"].vit
    spec = dataset_spec("cifar10")
    recipe_model = Classifier(WeightsInfo(Path("recipe"), spec, vit, spec.classes, spec.preprocessing),
                              VisionTransformer(vit).to(service.classifier("mnist").device).eval())
    shipped = service.classifier
    service.classifier = lambda name: recipe_model if name == "cifar10" else shipped(name)
    try:
        yield
    finally:
        service.classifier = shipped


def photo_name(recipe: bool) -> str:
    parameters = sum(p.numel() for p in service.classifier("cifar10").model.parameters())
    return f"photo ({'recipe' if recipe else 'shipped'} {parameters / 1e6:.1f}M)"


def step_rows(model: str, decode: Callable[[], Any], repeat: int) -> list[tuple[str, tuple[float, float]]]:
    """Median and p95 of each step: ``decode`` gives the model's input as the page holds it."""
    clf = service.classifier(model)
    image = clf.preprocess(decode())
    x = torch.from_numpy(to_chw(image)[None]).to(clf.device)  # (1, C, H, W)
    request = page_request(model, image)

    with torch.inference_mode():
        bare = timed(lambda: clf.model(x), repeat)
        forward_attention = timed(lambda: clf.model.forward_activations(x, attention=True), repeat)
    relevance = timed(lambda: explain.relevance_forward(clf.model, x, torch.tensor([explain.PREDICTED])), repeat)
    return [
        ("bare model forward (logits only)", bare),
        ("model forward with attention weights", forward_attention),
        ("model forward + backward: attention and relevance", relevance),
        ("decode + preprocess the input (the page does this)", timed(lambda: clf.preprocess(decode()), repeat)),
        ("whole server function: the graph's outputs for the page", timed(lambda: forward.forward(request), repeat)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--glibc-mmap-threshold", action="store_true",
                        help="leave glibc's mmap threshold as glibc sets it, to see what the server's fixed one costs")
    parser.add_argument("--photo-recipe", action="store_true",
                        help="also the photo path with the cifar10 recipe's architecture (random weights)")
    args = parser.parse_args()
    if not args.glibc_mmap_threshold:
        serving.return_large_buffers_to_the_os()
    torch.set_num_threads(serving.TORCH_THREADS)

    ink = drawing()
    photo = str(example_photos()[0])
    tables = {"drawing (mnist)": step_rows("mnist", lambda: ink, args.repeat)}
    photo_steps = ("cifar10", lambda: photo, args.repeat)
    if service.model_problem("cifar10") is None:
        tables[photo_name(recipe=False)] = step_rows(*photo_steps)
    if args.photo_recipe:
        with recipe_photo_model():
            tables[photo_name(recipe=True)] = step_rows(*photo_steps)

    print(f"device {service.classifier('mnist').device}, torch threads {torch.get_num_threads()}, "
          f"{args.repeat} runs each, as the server runs"
          + (" but with glibc's own mmap threshold" if args.glibc_mmap_threshold else ""))
    print("| step | " + " | ".join(f"{name} median ms | {name} p95 ms" for name in tables) + " |")
    print("|---|" + "---:|---:|" * len(tables))
    for i, (step, _) in enumerate(next(iter(tables.values()))):
        print(f"| {step} | " + " | ".join(f"{rows[i][1][0]:.2f} | {rows[i][1][1]:.2f}" for rows in tables.values())
              + " |")
    for name, rows in tables.items():
        print(f"{name}: server time / bare forward {rows[-1][1][0] / rows[0][1][0]:.1f}x")
    sizes = {"drawing": forward.forward(page_request("mnist", service.classifier("mnist").preprocess(ink)))}
    if service.model_problem("cifar10") is None:
        sizes["photo"] = forward.forward(page_request("cifar10", service.classifier("cifar10").preprocess(photo)))
    print("the server's answer to the page, once per image: "
          + ", ".join(f"{name} {len(json.dumps(reply)) / 1024:.1f} KB" for name, reply in sizes.items()))


if __name__ == "__main__":
    main()
