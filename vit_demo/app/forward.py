"""The forward pass on the server, for a page that can't run the model itself (a browser without WebAssembly,
``?model=server``, a graph that failed to load): the very graphs the page runs (vit_demo/onnx/export.py,
vit_demo/onnx/patching.py), run by PyTorch from the same modules the graphs were exported from.

The page asks for a graph by its file name in the weights folder, with its inputs, as onnxruntime-web's
``session.run(feeds, fetches)`` takes them (assets/page/model.js), and gets its raw outputs back (logits, attention,
lens, features, queries, keys and values; relevance; patching grids), never a view's numbers, which the page makes
of them wherever the forward pass ran. Tensors travel as ``{"shape": [...], "data": base64 of float32}``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import threading
from collections.abc import Callable

import numpy as np
import torch

from vit_demo.app.service import ablation_means, classifier, model_problem, models, training_run, weights_folder
from vit_demo.app.serving import SERVER_FUNCTION_SLOTS
from vit_demo.app.zerogpu import model_work
from vit_demo.onnx.export import (INPUTS, LENS_OUTPUTS, RELEVANCE_INPUTS, RELEVANCE_OUTPUTS, SNAPSHOT_OUTPUTS,
                                  PageGraph, expected_metadata, lens_apart, model_outputs)
from vit_demo.onnx.patching import INPUTS as PATCHING_INPUTS
from vit_demo.onnx.patching import OUTPUTS as PATCHING_OUTPUTS
from vit_demo.onnx.patching import PatchingGraph, patching_kinds
from vit_demo.weights import (GRAPH_FILE, LENS_GRAPH_FILE, PATCHING_GRAPH_FILES, RELEVANCE_GRAPH_FILE, SNAPSHOTS_DIR,
                              WeightsError)

MAX_BATCH = 512  # images in one call at most (the page's faithfulness scoring sends its masked images in batches)
PATCHING = threading.BoundedSemaphore(1)  # one patching grid at a time: a photo's residual grid takes seconds
PATCHING_WAIT_S = 15  # how long a patching call waits for the one before it, before it is told to retry


class Graph:
    """One graph of a model as PyTorch runs it: its function, its inputs' shapes (None: the batch) and outputs."""

    def __init__(self, fn: Callable[..., tuple[torch.Tensor, ...]], inputs: dict[str, tuple[int | None, ...]],
                 outputs: tuple[str, ...], patching: bool = False) -> None:
        self.fn, self.inputs, self.outputs, self.patching = fn, inputs, outputs, patching


@functools.cache
def graphs(model: str) -> dict[str, Graph]:
    """Every graph the page may ask ``model`` for, by its file name in the weights folder (``expected_metadata``'s
    names), built once per process."""
    clf = classifier(model)
    c = clf.info.config
    image, knockout = (c.in_channels, c.image_size, c.image_size), {"heads_off": (c.depth, c.heads),
                                                                     "mean_ablation": (1,)}
    means = ablation_means(model)
    trained = PageGraph(clf.model, means, clf.temperature, model_outputs(c)).eval()
    found = {
        GRAPH_FILE: Graph(trained, {"image": (None, *image), **knockout}, trained.outputs),
        RELEVANCE_GRAPH_FILE: Graph(trained.relevance, {"image": (1, *image), **knockout,
                                                        "target": (1, c.num_classes)}, RELEVANCE_OUTPUTS),
    }
    if lens_apart(c):
        lens = PageGraph(clf.model, means, clf.temperature, LENS_OUTPUTS).eval()
        found[LENS_GRAPH_FILE] = Graph(lens, {"image": (None, *image), **knockout}, lens.outputs)
    for kind in patching_kinds(c):
        name = PATCHING_GRAPH_FILES[kind]
        found[name] = Graph(PatchingGraph(clf.model, kind).eval(), {"clean": (1, *image), "corrupt": (1, *image),
                                                                    "classes": (2, c.num_classes)},
                            PATCHING_OUTPUTS, patching=True)
    for snapshot in training_run(model).snapshots:
        graph = PageGraph(snapshot.model, None, snapshot.temperature, SNAPSHOT_OUTPUTS).eval()
        found[f"{SNAPSHOTS_DIR}/epoch-{snapshot.epoch:04d}.onnx"] = Graph(graph, {"image": (None, *image),
                                                                                   **knockout}, graph.outputs)
    assert set(found) <= set(expected_metadata(weights_folder(model))), "a graph the weights folder does not have"
    assert all(tuple(g.inputs) in (INPUTS, RELEVANCE_INPUTS, PATCHING_INPUTS) for g in found.values())
    return found


def read_tensor(name: str, value: object, shape: tuple[int | None, ...]) -> torch.Tensor:
    """An input as the page sends it -> a float32 tensor of ``shape`` (None: any batch up to MAX_BATCH); ValueError,
    in words for the page, for anything else."""
    if not isinstance(value, dict) or not isinstance(value.get("shape"), list):
        raise ValueError(f"input {name!r} is not {{'shape': [...], 'data': base64}}")
    dims = value["shape"]
    if len(dims) != len(shape) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims) or any(
            want is not None and d != want for d, want in zip(dims, shape)) or not 1 <= dims[0] <= MAX_BATCH:
        wanted = ", ".join("B" if d is None else str(d) for d in shape)
        raise ValueError(f"input {name!r} has shape {dims}, where this graph takes ({wanted}), B at most {MAX_BATCH}")
    try:
        data = base64.b64decode(str(value.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"input {name!r} is not base64") from None
    if len(data) != 4 * int(np.prod(dims)):
        raise ValueError(f"input {name!r} has {len(data)} bytes where shape {dims} of float32 takes "
                         f"{4 * np.prod(dims)}")
    return torch.from_numpy(np.frombuffer(data, dtype="<f4").reshape(dims).copy())


def tensor_json(tensor: torch.Tensor) -> dict:
    array = tensor.detach().float().cpu().numpy().astype("<f4")
    return {"shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


@model_work
def run_graph(model: str, name: str, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Graph ``name`` of ``model`` on ``inputs`` (on the model's device), its outputs on the CPU."""
    graph, device = graphs(model)[name], classifier(model).device
    with torch.no_grad():  # (the relevance graph turns gradients on for its own backward pass)
        outputs = graph.fn(*(inputs[key].to(device) for key in graph.inputs))
    return tuple(output.detach().cpu() for output in outputs)


def forward(request: object) -> dict:
    """The page's server function (``server.forward(request)``): ``{"model": "mnist" or "cifar10", "graph": a file
    name, "inputs": {name: tensor}, "outputs": [names] (optional: all)}`` -> ``{"outputs": {name: tensor}}``, or
    ``{"error": why}`` for a request that can't be answered."""
    try:
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
        model = request.get("model")
        if model not in models():
            raise ValueError(f"there is no model {model!r}: one of {', '.join(models())}")
        problem = model_problem(model)
        if problem:
            raise ValueError(problem)
        name = request.get("graph")
        graph = graphs(model).get(name) if isinstance(name, str) else None
        if graph is None:
            raise ValueError(f"there is no graph {name!r}: this model has {', '.join(sorted(graphs(model)))}")
        given = request.get("inputs")
        if not isinstance(given, dict) or set(given) != set(graph.inputs):
            raise ValueError(f"graph {name} takes the inputs {', '.join(graph.inputs)}")
        inputs = {key: read_tensor(key, given[key], shape) for key, shape in graph.inputs.items()}
        batches = {inputs[key].shape[0] for key, shape in graph.inputs.items() if shape[0] is None}
        fetched = request.get("outputs") or list(graph.outputs)
        if not isinstance(fetched, list) or not set(fetched) <= set(graph.outputs) or len(batches) > 1:
            raise ValueError(f"graph {name} gives the outputs {', '.join(graph.outputs)}")
        if graph.patching and not PATCHING.acquire(timeout=PATCHING_WAIT_S):
            raise ValueError("the server is busy with another patching grid: try again in a moment")
        try:
            with SERVER_FUNCTION_SLOTS:
                outputs = dict(zip(graph.outputs, run_graph(model, name, inputs)))
        finally:
            if graph.patching:
                PATCHING.release()
        return {"outputs": {key: tensor_json(outputs[key]) for key in fetched}}
    except (ValueError, TypeError, WeightsError) as exc:
        return {"error": str(exc)}

