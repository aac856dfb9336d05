"""What two-image activation patching costs when the page computes it (vit_demo/app/assets/page/source.js' patching: the
patching graphs, vit_demo/onnx/patching.py, run by the page's own onnxruntime-web, WebAssembly, one thread, here under
Node), beside the app's server function on the same pair in the same run (heads_view.patching_answer, torch, one
thread): the heads' grid alone, then the heads' and the residual stream's.

    python benchmarks/page_patching.py [--repeat 5]

Each figure is the answer's own ``ms`` (the page's: from the request to the answer, the graphs already loaded; the
server's: the function's whole work). The pairs are heads_cost.py's: a 3 and an 8, a horse and a ship.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import node_and_torch  # noqa: E402
from vit_demo import load_model  # noqa: E402
from vit_demo.app import page_numbers
from vit_demo.app import heads_view, page_model  # noqa: E402

EXAMPLES = ROOT / "examples"
PAIRS = {"mnist": ("digits/3.png", "digits/8.png"), "cifar10": ("photos/horse.png", "photos/ship.png")}
RUNNER = ROOT / "tests" / "page_patching.mjs"  # the page's answer under Node


def page_times(model: str, request: dict, repeat: int) -> list[float]:
    """The page's ``ms`` for ``request``, asked ``repeat`` times after one untimed answer (the graphs loading)."""
    described = page_model.description(model, "", "", lambda path: path.resolve().as_uri())
    with tempfile.TemporaryDirectory() as tmp:
        source, answer = Path(tmp) / "in.json", Path(tmp) / "out.json"
        source.write_text(json.dumps({"model": described, "requests": [request], "repeat": repeat + 1}))
        subprocess.run([shutil.which("node"), str(RUNNER), str(source), str(answer)], check=True, cwd=ROOT)
        [result] = json.loads(answer.read_text())
    if "error" in result["answer"]:
        raise SystemExit(f"{model}: the page says {result['answer']['error']}")
    return result["ms"][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    node_and_torch(f"{args.repeat}")
    print("| model | patching | page median ms | server median ms |")
    print("|---|---|---:|---:|")
    for name in ("mnist", "cifar10"):
        classifier = load_model(name, device="cpu")
        clean, corrupt = (classifier.preprocess(EXAMPLES / path) for path in PAIRS[name])
        request = {"clean": page_numbers.image_text(clean), "corrupt": page_numbers.image_text(corrupt)}
        for residual, what in ((False, "heads"), (True, "heads and residual stream")):
            page = statistics.median(page_times(name, {**request, "residual": residual}, args.repeat))
            heads_view.patching_answer(name, clean, corrupt, residual)  # warm
            server = statistics.median(heads_view.patching_answer(name, clean, corrupt, residual)["ms"]
                                       for _ in range(args.repeat))
            print(f"| {name} | {what} | {page:.0f} | {server:.0f} |", flush=True)


if __name__ == "__main__":
    main()
