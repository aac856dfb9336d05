"""Server time for one drawing and one photo in the app, step by step, beside the bare model forward pass.

    python benchmarks/views_latency.py [--repeat 100] [--glibc-mmap-threshold] [--photo-recipe]

It runs as the server does (torch threads and glibc's mmap threshold set by ``vit_demo.app.serving``) and feeds
the app's own handlers what the browser sends (for a drawing, the canvas value of a 112x112 drawing; for a
photo, the uploaded file). Their answer is the prediction and the numbers the page draws every view from: no
picture to encode.
``--photo-recipe`` adds a column: the photo path with the architecture today's ``cifar10`` recipe trains, with
random weights (the time does not depend on their values), beside the shipped photo model in the same run.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import example_photos, timed  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)

from vit_demo.app import service, serving  # noqa: E402
from vit_demo.app.canvas import decode_drawing  # noqa: E402
from vit_demo.app.digit_tab import on_drawing  # noqa: E402
from vit_demo.app.panel import page_answer  # noqa: E402
from vit_demo.app.photo_tab import on_photo  # noqa: E402
from vit_demo.classifier import Classifier, to_chw  # noqa: E402
from vit_demo.data.datasets import dataset_spec  # noqa: E402
from vit_demo.interpret import explain  # noqa: E402
from vit_demo.model import VisionTransformer  # noqa: E402
from vit_demo.training.recipes import RECIPES  # noqa: E402
from vit_demo.weights import WeightsInfo  # noqa: E402


def canvas_value() -> str:
    """A 7 as the browser canvas sends it: 112x112 bytes, ink = 255, base64."""
    image = Image.new("L", (336, 336), 255)
    ImageDraw.Draw(image).line([(90, 70), (250, 70), (150, 280)], fill=0, width=18, joint="curve")
    small = 255 - np.asarray(image.resize((112, 112), Image.BILINEAR))
    return base64.b64encode(small.astype(np.uint8).tobytes()).decode()


@contextlib.contextmanager
def recipe_photo_model() -> Iterator[None]:
    """While inside, the app's photo model is the cifar10 recipe's architecture, with random weights."""
    vit = RECIPES["cifar10"].vit
    recipe_model = Classifier(WeightsInfo(Path("recipe"), dataset_spec("cifar10"), vit),
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


def step_rows(model: str, decode: Callable[[], Any], handler: Callable[[], tuple], repeat: int
              ) -> list[tuple[str, tuple[float, float]]]:
    """Median and p95 of each step of one request: ``decode`` gives the model's input, ``handler`` the page's
    answer."""
    clf = service.classifier(model)
    x = torch.from_numpy(to_chw(clf.preprocess(decode()))[None]).to(clf.device)  # (1, C, H, W)
    analysis = service.analyse(model, decode())

    with torch.inference_mode():
        forward = timed(lambda: clf.model(x), repeat)
        forward_attention = timed(lambda: clf.model(x, return_attention=True), repeat)
    relevance = timed(lambda: explain.relevance_forward(clf.model, x, torch.tensor([explain.PREDICTED])), repeat)
    return [
        ("bare model forward (logits only)", forward),
        ("model forward with attention weights", forward_attention),
        ("model forward + backward: attention and relevance", relevance),
        ("decode + preprocess the input", timed(lambda: clf.preprocess(decode()), repeat)),
        ("analyse: preprocess + model + attention + relevance",
         timed(lambda: service.analyse(model, decode()), repeat)),
        ("explanation maps ([CLS], patch, rollout)", timed(lambda: (explain.token_attention_maps(analysis.attention),
                                                                   explain.token_attention_maps(analysis.attention, 1),
                                                                   explain.attention_rollout(analysis.attention)),
                                                           repeat)),
        ("the numbers of every view (JSON)", timed(lambda: page_answer(analysis, ""), repeat)),
        ("whole handler = server time", timed(handler, repeat)),
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

    value = canvas_value()
    photo = str(example_photos()[0])
    tables = {"drawing (mnist)": step_rows("mnist", lambda: decode_drawing(value), lambda: on_drawing(value),
                                           args.repeat)}
    photo_steps = ("cifar10", lambda: photo, lambda: on_photo(photo), args.repeat)
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
    sizes = {"drawing": page_answer(service.analyse("mnist", decode_drawing(value)), "")}
    if service.model_problem("cifar10") is None:
        sizes["photo"] = page_answer(service.analyse("cifar10", photo), "")
    print("the numbers of every view, sent once per image: "
          + ", ".join(f"{name} {len(text) / 1024:.1f} KB" for name, text in sizes.items()))


if __name__ == "__main__":
    main()
