"""The forward pass on the server, for a page that can't run the model itself (a browser without WebAssembly,
``?model=server``, a graph that failed to load): the very graphs the page runs (vit_demo/onnx/export.py,
vit_demo/onnx/patching.py), run by PyTorch from the same modules the graphs were exported from.

The page asks for a graph by its file name in the weights folder, with its inputs, as onnxruntime-web's
``session.run(feeds, fetches)`` takes them (assets/page/model.js), and gets its raw outputs back (logits, [CLS]'s and
a query patch's attention, rollout, lens, features, queries, keys and values; relevance; patching grids), never a
view's numbers, which the page makes of them wherever the forward pass ran. Tensors travel as ``{"shape": [...], "data": base64 of float32}``.
"""

from __future__ import annotations

import base64
import functools
import threading

import numpy as np
import torch

from vit_demo.app.service import ablation_means, classifier, model_problem, models, training_run
from vit_demo.app.serving import SERVER_FUNCTION_SLOTS
from vit_demo.app.zerogpu import model_work
from vit_demo.onnx.export import Graph, folder_graphs
from vit_demo.weights import WeightsError

MAX_BATCH = 512  # images in one call at most (the page's faithfulness scoring sends its masked images in batches)
PATCHING = threading.BoundedSemaphore(1)  # one patching grid at a time: a photo's residual grid takes seconds
PATCHING_WAIT_S = 15  # how long a patching call waits for the one before it, before it is told to retry


@functools.cache
def graphs(model: str) -> dict[str, Graph]:
    """Every graph the page may ask ``model`` for, by its file name in the weights folder (export.folder_graphs),
    built once per process."""
    clf = classifier(model)
    return folder_graphs(clf.model, ablation_means(model), clf.temperature, training_run(model).snapshots)


def read_tensor(name: str, value: object, shape: tuple[int | None, ...]) -> torch.Tensor:
    """An input as the page sends it -> a float32 tensor of ``shape`` (None: any batch up to MAX_BATCH); ValueError,
    in words for the page, for anything else."""
    if not isinstance(value, dict) or not isinstance(value.get("shape"), list):
        raise ValueError(f"input {name!r} is not {{'shape': [...], 'data': base64}}")
    dims = value["shape"]
    fits = len(dims) == len(shape) and all(type(d) is int and want in (None, d) for d, want in zip(dims, shape))
    if not fits or not 1 <= dims[0] <= MAX_BATCH:
        wanted = ", ".join("B" if d is None else str(d) for d in shape)
        raise ValueError(f"input {name!r} has shape {dims}, where this graph takes ({wanted}), B at most {MAX_BATCH}")
    try:
        data = base64.b64decode(str(value.get("data", "")), validate=True)
    except ValueError:  # (binascii.Error is one)
        raise ValueError(f"input {name!r} is not base64") from None
    if len(data) != (size := 4 * int(np.prod(dims))):
        raise ValueError(f"input {name!r} has {len(data)} bytes where shape {dims} of float32 takes {size}")
    return torch.from_numpy(np.frombuffer(data, dtype="<f4").reshape(dims).copy())


def tensor_json(tensor: torch.Tensor) -> dict:
    array = tensor.detach().float().cpu().numpy().astype("<f4")
    return {"shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


@model_work
def run_graph(model: str, name: str, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Graph ``name`` of ``model`` on ``inputs`` (on the model's device), its outputs on the CPU."""
    graph, device = graphs(model)[name], classifier(model).device
    with torch.no_grad():  # (the relevance graph turns gradients on for its own backward pass)
        outputs = graph.run(*(inputs[key].to(device) for key in graph.inputs))
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
        if problem := model_problem(model):
            raise ValueError(problem)
        name = request.get("graph")
        graph = graphs(model).get(name) if isinstance(name, str) else None
        if graph is None:
            raise ValueError(f"there is no graph {name!r}: this model has {', '.join(sorted(graphs(model)))}")
        given = request.get("inputs")
        if not isinstance(given, dict) or set(given) != set(graph.inputs):
            raise ValueError(f"graph {name} takes the inputs {', '.join(graph.inputs)}")
        inputs = {key: read_tensor(key, given[key], shape) for key, shape in graph.inputs.items()}
        fetched = request.get("outputs") or list(graph.outputs)
        if not isinstance(fetched, list) or not set(fetched) <= set(graph.outputs):
            raise ValueError(f"graph {name} gives the outputs {', '.join(graph.outputs)}")
        patching = graph.kind == "patching"
        if patching and not PATCHING.acquire(timeout=PATCHING_WAIT_S):
            raise ValueError("the server is busy with another patching grid: try again in a moment")
        try:
            with SERVER_FUNCTION_SLOTS:
                outputs = dict(zip(graph.outputs, run_graph(model, name, inputs)))
        finally:
            if patching:
                PATCHING.release()
        return {"outputs": {key: tensor_json(outputs[key]) for key in fetched}}
    except (ValueError, TypeError, WeightsError) as exc:
        return {"error": str(exc)}

