"""One user: each API endpoint (``/classify`` and ``/export``, with each model) end to end through gradio_client,
beside a do-nothing app and the bare model.

    python benchmarks/serve_latency.py [--repeat 100]

It starts the app (python app.py) and the do-nothing baseline (benchmarks/noop_app.py: the same
endpoints and components, answers made in advance) on free local ports, and times
``client.predict`` against both, alternating request by request so that both see the same machine.
A request is everything a script waits for: the upload, the queue, the handler, the answer, and for
``/export`` the slide's PNG (its default view: where [CLS] looks in every layer and head) drawn and
downloaded. The bare forward pass of the same model (in this process, logits only) shows how little of
that is the model.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import REPO, api_arguments, client, example_drawings, example_photos, p50_p95, serving, timed  # noqa: E402
from vit_demo.app.serving import TORCH_THREADS  # noqa: E402
from vit_demo.classifier import load_model, to_chw  # noqa: E402
from vit_demo.weights import WeightsError  # noqa: E402


def forward_ms(model: str, example: Path, repeat: int) -> tuple[float, float] | None:
    """p50/p95 of the model's bare forward pass on one example (as the app runs it), or None without its weights."""
    torch.set_num_threads(TORCH_THREADS)
    try:
        clf = load_model(model, "cpu")
    except WeightsError:
        return None
    x = torch.from_numpy(to_chw(clf.preprocess(example))[None])  # (1, C, H, W)
    with torch.inference_mode():
        return timed(lambda: clf.model(x), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=100, help="requests per endpoint and app")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests per endpoint and app first")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        drawings = example_drawings(Path(folder))
        photos = example_photos()
        images = {"mnist": lambda i: drawings[i % len(drawings)], "cifar10": lambda i: photos[i % len(photos)]}
        forwards = {"mnist": forward_ms("mnist", drawings[7], args.repeat),
                    "cifar10": forward_ms("cifar10", photos[0], args.repeat)}
        # row -> (api_name, the arguments of request i, the model's bare forward). /export refuses a model without
        # weights (the do-nothing app too): no row for it.
        endpoints = {
            f"{api_name} {model}": (api_name, lambda i, api_name=api_name, model=model, image=image:
                                    api_arguments(api_name, model, image(i)), forwards[model])
            for api_name in ("/classify", "/export") for model, image in images.items()
            if api_name == "/classify" or forwards[model] is not None
        }
        times: dict[tuple[str, str], list[float]] = {}
        with serving("app.py") as app, serving(REPO / "benchmarks" / "noop_app.py") as baseline:
            clients = {"app": client(app.url), "do-nothing": client(baseline.url)}
            for endpoint, (api_name, arguments, _) in endpoints.items():
                for i in range(args.warmup + args.repeat):
                    for name, session in clients.items():
                        started = time.perf_counter()
                        session.predict(*arguments(i), api_name=api_name)
                        if i >= args.warmup:
                            times.setdefault((endpoint, name), []).append((time.perf_counter() - started) * 1000)
            for session in clients.values():
                session.close()

    print(f"one user, {args.repeat} requests per endpoint and app (after {args.warmup} untimed), "
          f"end to end through gradio_client; bare forward: 1 image, CPU, torch threads {torch.get_num_threads()}")
    print("| endpoint | app p50 ms | app p95 ms | do-nothing p50 ms | do-nothing p95 ms | app / do-nothing p50 | "
          "app / do-nothing p95 | bare forward p50 ms | app p50 / forward |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for endpoint, (_, _, forward) in endpoints.items():
        (a50, a95), (n50, n95) = p50_p95(times[(endpoint, "app")]), p50_p95(times[(endpoint, "do-nothing")])
        bare = ("no weights", "-") if forward is None else (f"{forward[0]:.2f}", f"{a50 / forward[0]:.0f}x")
        print(f"| {endpoint} | {a50:.1f} | {a95:.1f} | {n50:.1f} | {n95:.1f} | **{a50 / n50:.2f}x** | {a95 / n95:.2f}x "
              f"| {bare[0]} | {bare[1]} |")
    if forwards["cifar10"] is None:
        print("Without CIFAR-10 weights, /classify answers cifar10 with an error, and /export refuses it (no row).")


if __name__ == "__main__":
    main()
