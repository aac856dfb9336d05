"""What two-image activation patching costs when the page computes it (vit_demo/page/assets/page/source.js' patching: the
patching graphs, vit_demo/onnx/patching.py, run by the page's own onnxruntime-web, WebAssembly, one thread, here under
Node), beside PyTorch on the same pair in the same run (heads.patching_grid, one thread: what the server's forward
pass runs where the page can't run the graphs): the heads' grid alone, then the heads' and the residual stream's.

    python benchmarks/page_patching.py [--repeat 5]

Each figure is the page's answer's own ``ms`` (from the request to the answer, the graphs already loaded), and
patching_grid's whole work. The pairs are heads_cost.py's: a 3 and an 8, a horse and a ship.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import node_and_torch, page_source  # noqa: E402
from vit_demo import load_model  # noqa: E402
from vit_demo.page.captions import image_text  # noqa: E402
from vit_demo.interpret import heads  # noqa: E402

EXAMPLES = ROOT / "examples"
PAIRS = {"mnist": ("digits/3.png", "digits/8.png"), "cifar10": ("photos/horse.png", "photos/ship.png")}


def page_times(model: str, request: dict, repeat: int) -> list[float]:
    """The page's ``ms`` for ``request``, asked ``repeat`` times after one untimed answer (the graphs loading)."""
    with tempfile.TemporaryDirectory() as tmp:
        found = page_source(model, [("patching", request)], tmp, repeat=repeat + 1)
    if "error" in found["answers"][0]:
        raise SystemExit(f"{model}: the page says {found['answers'][0]['error']}")
    return found["ms"][0][1:]


def torch_ms(model, clean, corrupt, residual: bool, repeat: int) -> float:
    """The median ms of heads.patching_grid on the pair (one untimed run first)."""
    times = []
    for i in range(repeat + 1):
        started = time.perf_counter()
        heads.patching_grid(model, clean, corrupt, residual=residual)
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    node_and_torch(f"{args.repeat}")
    print("| model | patching | page median ms | PyTorch median ms |")
    print("|---|---|---:|---:|")
    for name in ("mnist", "cifar10"):
        classifier = load_model(name, device="cpu")
        clean, corrupt = (classifier.preprocess(EXAMPLES / path) for path in PAIRS[name])
        request = {"clean": image_text(clean), "corrupt": image_text(corrupt)}
        for residual, what in ((False, "heads"), (True, "heads and residual stream")):
            page = statistics.median(page_times(name, {**request, "residual": residual}, args.repeat))
            with torch.inference_mode():
                python = torch_ms(classifier.model, classifier.batch([clean]), classifier.batch([corrupt]), residual,
                                  args.repeat)
            print(f"| {name} | {what} | {page:.0f} | {python:.0f} |", flush=True)


if __name__ == "__main__":
    main()
