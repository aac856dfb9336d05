"""What an imported model's page graphs cost (docs/import.md): timm's ViT, random weights (the hubs may be out of reach;
the cost is the architecture's), imported as ``python -m vit_demo import`` imports it, its graphs written as
``write_onnx`` writes them.

    python benchmarks/import_cost.py [--model vit_tiny_patch16_224] [--repeat 10] [--residual]

Three tables:
- export: each graph's export, timed as write_onnx makes it, and each file's bytes;
- model graphs: one image through each model graph (model.onnx; where the lens is apart, lens.onnx, and the model's
  graph with every output as it would be without, exported here for the comparison), each set of outputs fetched, in
  onnxruntime (Python, one thread) and in the page's own onnxruntime-web under Node (WebAssembly, one thread:
  benchmarks/graph_runs.mjs); medians of --repeat rounds, the sets interleaved. The same times whatever is fetched
  say that the runtime runs every node of a graph;
- patching: one pair through patching_heads.onnx, each side; with --residual also the residual stream's graph, which
  write_onnx leaves out for a model this large: exported here, then run once each side (minutes).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vit_demo.importing import write_import  # noqa: E402
from vit_demo.onnx import export  # noqa: E402
from vit_demo.onnx.patching import PatchingGraph  # noqa: E402
from vit_demo.weights import (GRAPH_FILE, GRAPH_WEIGHTS_FILE, LENS_GRAPH_FILE, PATCHING_GRAPH_FILES,  # noqa: E402
                              RELEVANCE_GRAPH_FILE, load_weights)

# A stroke's, the first answer's (source.js: NUMBERS); None: all.
FETCHES = (("logits",), ("logits", "cls_attention", "rollout", "query_attention", "features"), None)
EVERY_OUTPUT = "every_output.onnx"  # the model's graph with the lens in it, where it is apart: not written otherwise


def import_random(name: str, folder: Path) -> Path:
    """timm's ``name`` with random weights (seed 0), imported into ``folder`` / "model" from a checkpoint."""
    import timm
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    source = timm.create_model(name, pretrained=False)
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, folder / "random.safetensors")
    write_import(f"timm:{name}", folder / "model", folder / "random.safetensors", None, "benchmarks/import_cost.py")
    return folder / "model"


def timed_write(folder: Path) -> dict[str, float]:
    """write_onnx on ``folder``, each graph's export timed: {file: seconds}, "total" the whole."""
    times, graph_onnx = {}, export.graph_onnx

    def file_of(graph: export.Graph) -> str:
        if graph.kind == "page":
            return LENS_GRAPH_FILE if graph.outputs == export.LENS_OUTPUTS else GRAPH_FILE
        return RELEVANCE_GRAPH_FILE if graph.kind == "relevance" else PATCHING_GRAPH_FILES[graph.module.kind]

    def timed(graph: export.Graph, metadata: dict[str, str]):
        start = time.perf_counter()
        proto = graph_onnx(graph, metadata)
        times[file_of(graph)] = time.perf_counter() - start
        return proto

    with mock.patch.object(export, "graph_onnx", timed):
        start = time.perf_counter()
        export.write_onnx(folder)
        times["total"] = time.perf_counter() - start
    return times


def tensor_text(array: np.ndarray) -> dict:
    return {"shape": list(array.shape), "data": base64.b64encode(array.astype("<f4").tobytes()).decode()}


def page_runs(graph: Path, feeds: dict[str, np.ndarray], fetches, repeat: int, warm: bool = True) -> dict:
    """``graph`` in the page's onnxruntime-web under Node: {load_ms, ms: per fetch, per round}."""
    with tempfile.TemporaryDirectory() as tmp:
        given, answer = Path(tmp) / "in.json", Path(tmp) / "out.json"
        data = graph.parent / GRAPH_WEIGHTS_FILE
        given.write_text(json.dumps({"graph": str(graph), "data": str(data) if data.is_file() else None,
                                     "feeds": {k: tensor_text(v) for k, v in feeds.items()},
                                     "fetches": [None if f is None else list(f) for f in fetches], "repeat": repeat,
                                     "warm": warm}))
        subprocess.run([shutil.which("node"), str(ROOT / "benchmarks" / "graph_runs.mjs"), str(given), str(answer)],
                       check=True, timeout=3600)
        return json.loads(answer.read_text())


def python_runs(graph: Path, feeds: dict[str, np.ndarray], fetches, repeat: int, warm: bool = True) -> list[list]:
    """``graph`` in onnxruntime on one thread: per fetch, its milliseconds in each round."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    wanted = [None if f is None else list(f) for f in fetches]
    for names in wanted if warm else ():
        session.run(names, feeds)
    ms = [[] for _ in wanted]
    for _ in range(repeat):
        for i, names in enumerate(wanted):
            start = time.perf_counter()
            session.run(names, feeds)
            ms[i].append(1000 * (time.perf_counter() - start))
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="vit_tiny_patch16_224", help="a timm ViT (default: vit_tiny_patch16_224)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--residual", action="store_true", help="also the residual stream's patching graph (minutes)")
    args = parser.parse_args()
    if not shutil.which("node"):
        raise SystemExit("Node 20 or later must be on the PATH: the page's runtime runs under it")
    with tempfile.TemporaryDirectory() as tmp:
        folder = import_random(args.model, Path(tmp))
        info, model = load_weights(folder)
        c = info.config
        print(f"{args.model}, random weights: {c.num_tokens} tokens ({c.prefix_tokens} prefix), {c.depth} layers, "
              f"{c.heads} heads, {c.num_classes} classes")
        times = timed_write(folder)
        print("\n| file | export s | bytes |\n|---|---:|---:|")
        for name in (*export.shared_graphs(c), GRAPH_WEIGHTS_FILE):
            shown = f"{times[name]:.1f}" if name in times else ""
            print(f"| {name} | {shown} | {(folder / name).stat().st_size:,} |")
        print(f"| all | {times['total']:.1f} | |")

        rng = np.random.default_rng(0)
        image = rng.random((1, c.in_channels, c.image_size, c.image_size), dtype=np.float32)
        feeds = {"image": image, "heads_off": np.zeros((c.depth, c.heads), np.float32),
                 "mean_ablation": np.ones(1, np.float32), "query": -np.ones(1, np.float32)}
        graphs = {GRAPH_FILE: export.model_outputs(c)}
        if export.lens_apart(c):  # and the model's graph with the lens in it, as it would be, for the comparison
            graphs[LENS_GRAPH_FILE] = export.LENS_OUTPUTS
            proto = export.to_onnx(export.PageGraph(model, None, info.temperature).eval(), {})
            (folder / EVERY_OUTPUT).write_bytes(proto.SerializeToString())
            graphs[EVERY_OUTPUT] = export.OUTPUTS
        print("\n| graph | fetched | onnxruntime median ms | onnxruntime-web median ms |\n|---|---|---:|---:|")
        for name, outputs in graphs.items():
            fetches = [f for f in FETCHES if f is None or set(f) <= set(outputs)]
            python = python_runs(folder / name, feeds, fetches, args.repeat)
            page = page_runs(folder / name, feeds, fetches, args.repeat)["ms"]
            for fetch, here, there in zip(fetches, python, page):
                print(f"| {name} | {', '.join(fetch or outputs)} | {statistics.median(here):.1f} | "
                      f"{statistics.median(there):.1f} |", flush=True)

        clean, corrupt = image, rng.random(image.shape, dtype=np.float32)
        pair = {"clean": clean, "corrupt": corrupt, "classes": np.eye(c.num_classes, dtype=np.float32)[[1, 2]]}
        kinds = ("heads", "residual") if args.residual else ("heads",)
        if args.residual and "residual" not in export.patching_kinds(c):  # left out by write_onnx: exported here
            start = time.perf_counter()
            proto = export.patching_onnx(PatchingGraph(model, "residual").eval(), {})
            print(f"\n{PATCHING_GRAPH_FILES['residual']}: exported in {time.perf_counter() - start:.1f} s")
            (folder / PATCHING_GRAPH_FILES["residual"]).write_bytes(proto.SerializeToString())
        print("\n| graph | onnxruntime s | onnxruntime-web s |\n|---|---:|---:|")
        for kind in kinds:
            graph = folder / PATCHING_GRAPH_FILES[kind]
            warm = kind == "heads"  # (one run of the residual stream's takes minutes)
            python = python_runs(graph, pair, [None], 1, warm)[0][0] / 1000
            page = page_runs(graph, pair, [None], 1, warm)["ms"][0][0] / 1000
            print(f"| {graph.name} | {python:.1f} | {page:.1f} |", flush=True)


if __name__ == "__main__":
    main()
