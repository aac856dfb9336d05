"""How fast ``python -m vit_demo predict`` gets through many files (MNIST test digits written as PNGs).

    python benchmarks/cli_throughput.py --data-dir DIR [--files 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from vit_demo.data.datasets import load_split  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="a folder with MNIST/raw/")
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    images, labels = load_split("mnist", args.data_dir, "test", download=False)
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i in range(args.files):
            path = Path(folder) / f"{i:05d}_{int(labels[i])}.png"
            Image.fromarray(255 - images[i, 0].numpy()).resize((112, 112)).save(path)  # dark ink on white
            paths.append(str(path))
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "vit_demo", "predict", "--model", "mnist", *paths],
                                cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    correct = sum(line.get("label") == Path(line["file"]).stem.split("_")[1] for line in lines)
    print("| files | wall s (incl. start-up) | files/s | correct |")
    print("|---:|---:|---:|---:|")
    print(f"| {len(lines)} | {seconds:.1f} | {len(lines) / seconds:.0f} | {correct / len(lines):.2%} |")


if __name__ == "__main__":
    main()
