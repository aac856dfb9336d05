"""What every graph the project exports shares (the model's and relevance's, vit_demo/onnx/export.py; the patching
graphs, vit_demo/onnx/patching.py): the opset, and ``finish``, which strips what the exporter notes of the exporting
machine, stores the weights float16 holds exactly as float16, and writes the metadata."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

INTERFACE = "1"  # the graphs' interface (export.py's docstring); a change the page must know about bumps it
EXPORTER_VERSION = "1"  # the project's way of exporting (a change that alters the graphs' bytes bumps it)
OPSET = 18  # LayerNormalization needs 17; 18 is the dynamo exporter's own default from torch 2.8 on


def exporter_name() -> str:
    return f"vit_demo.onnx.export {EXPORTER_VERSION}; torch {torch.__version__} dynamo exporter; opset {OPSET}"


def finish(proto: onnx.ModelProto, metadata: dict[str, str]) -> onnx.ModelProto:
    _strip_provenance(proto)
    _store_exact_halves(proto)
    onnx.helper.set_model_props(proto, {"vit_demo.interface": INTERFACE, "exporter": exporter_name(), **metadata})
    onnx.checker.check_model(proto)
    return proto


def _strip_provenance(proto: onnx.ModelProto) -> None:
    """Drop what the exporter notes on each node (the exporting machine's stack traces, FX node names) and in doc
    strings: not needed to run the graph, and they hold local paths."""
    proto.doc_string = ""
    proto.graph.doc_string = ""
    for node in proto.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    for function in proto.functions:
        for node in function.node:
            del node.metadata_props[:]
            node.doc_string = ""
    for info in (*proto.graph.input, *proto.graph.output, *proto.graph.value_info):
        del info.metadata_props[:]
        info.doc_string = ""
    del proto.graph.metadata_props[:]
    for tensor in proto.graph.initializer:
        del tensor.metadata_props[:]


def _store_exact_halves(proto: onnx.ModelProto) -> None:
    """Store each float32 initializer that float16 holds exactly as float16, read back through a Cast to float32
    placed first in the graph: the graph computes with the very same numbers."""
    casts = []
    for index, tensor in enumerate(proto.graph.initializer):
        if tensor.data_type != TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(tensor)
        halves = values.astype(np.float16)
        if values.size < 16 or not np.array_equal(halves.astype(np.float32), values):
            continue
        name = tensor.name
        stored = numpy_helper.from_array(halves, f"{name}.fp16")
        casts.append(helper.make_node("Cast", [stored.name], [name], to=TensorProto.FLOAT, name=f"{name}.to_fp32"))
        proto.graph.initializer[index].CopyFrom(stored)  # ``tensor`` is this very message: read it before
    for node in reversed(casts):
        proto.graph.node.insert(0, node)
