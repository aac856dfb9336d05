"""What every graph the project exports shares (the model's and relevance's, vit_demo/onnx/export.py; the patching
graphs, vit_demo/onnx/patching.py): the opset, ``finish``, which strips what the exporter notes of the exporting
machine, stores the weights float16 holds exactly as float16 (and those int8 holds, where the weights were rounded
so), and writes the metadata; and ``share_weights``, which keeps the weights that several graphs of one model hold in
one file beside them (ONNX external data)."""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import torch
from onnx import TensorProto, external_data_helper, helper, numpy_helper

INTERFACE = "3"  # the graphs' interface (export.py's docstring); a change the page must know about bumps it
EXPORTER_VERSION = "2"  # the project's way of exporting (a change that alters the graphs' bytes bumps it)
SHARED_BYTES = 1024  # initializers this large or larger go to the shared file; smaller ones stay in their graph
ALIGNMENT = 64  # bytes: where each tensor starts in the shared file
OPSET = 18  # LayerNormalization needs 17; 18 is the dynamo exporter's own default from torch 2.8 on
INT8_MAX = 127  # an int8 weight's largest magnitude (symmetric: -127 to 127), export.rounded_weights


def exporter_name() -> str:
    return f"vit_demo.onnx.export {EXPORTER_VERSION}; torch {torch.__version__} dynamo exporter; opset {OPSET}"


def finish(proto: onnx.ModelProto, metadata: dict[str, str]) -> onnx.ModelProto:
    _strip_provenance(proto)
    if metadata.get("graph_weights") == "int8":
        _store_exact_int8(proto)
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


def _store_exact_int8(proto: onnx.ModelProto) -> None:
    """Store each float32 weight (2 or more dimensions) that is exactly int8 times a scale per channel, the scale its
    channel's largest magnitude over 127 (``export.rounded_weights``), as the int8 values and the scales, read back
    through a Cast to float32 and a Mul placed first in the graph: the graph computes with the very same numbers. The
    channel is the first axis, or the second where the exporter laid a linear layer's weight out (in, out)."""
    steps, scales = [], []
    for index, tensor in enumerate(proto.graph.initializer):
        if tensor.data_type != TensorProto.FLOAT or len(tensor.dims) < 2:
            continue
        values = numpy_helper.to_array(tensor)
        for axis in (0, 1) if values.ndim == 2 else (0,):
            others = tuple(a for a in range(values.ndim) if a != axis)
            largest = np.abs(values).max(axis=others, keepdims=True)  # (out, 1, ...) or (1, out)
            scale = np.where(largest > 0, largest / np.float32(INT8_MAX), np.float32(1)).astype(np.float32)
            steps_of = values / scale
            levels = np.rint(steps_of)
            if np.array_equal(levels, steps_of) and np.array_equal(levels.astype(np.float32) * scale, values):
                break
        else:
            continue
        name = tensor.name
        stored = numpy_helper.from_array(levels.astype(np.int8), f"{name}.int8")
        scales.append(numpy_helper.from_array(scale, f"{name}.scale"))
        steps += [helper.make_node("Cast", [stored.name], [f"{name}.levels"], to=TensorProto.FLOAT,
                                   name=f"{name}.to_fp32"),
                  helper.make_node("Mul", [f"{name}.levels", f"{name}.scale"], [name], name=f"{name}.scaled")]
        proto.graph.initializer[index].CopyFrom(stored)  # ``tensor`` is this very message: read it before
    proto.graph.initializer.extend(scales)
    for node in reversed(steps):
        proto.graph.node.insert(0, node)


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


def share_weights(graphs: list[onnx.ModelProto], location: str) -> bytes:
    """Move the weights of ``graphs`` (graphs of one model) into one file, each tensor once, and point the graphs at
    it as ONNX external data (``location``: the file's name, beside the graphs); return the file's bytes.

    The exporter folds a linear layer's weight into (in, out) in some graphs and keeps PyTorch's (out, in) in
    others: a weight found transposed is read back through a Transpose, which the runtime folds once when it loads
    the graph. The graphs compute with the very same numbers.
    """
    data, offsets = bytearray(), {}  # the file; a tensor's (dtype, shape, bytes) digest -> its offset there

    def digest(values: np.ndarray) -> str:
        return hashlib.sha256(f"{values.dtype}{values.shape}".encode() + values.tobytes()).hexdigest()

    def place(tensor: onnx.TensorProto, values: np.ndarray, key: str) -> None:
        if key not in offsets:
            data.extend(b"\0" * (-len(data) % ALIGNMENT))
            offsets[key] = len(data)
            data.extend(values.tobytes())
        external_data_helper.set_external_data(tensor, location, offsets[key], values.nbytes)
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL

    for proto in graphs:
        transposes = []
        for tensor in proto.graph.initializer:
            values = numpy_helper.to_array(tensor)
            if values.nbytes < SHARED_BYTES:
                continue
            key = digest(values)
            if values.ndim == 2 and key not in offsets:
                flipped = np.ascontiguousarray(values.T)
                if (flipped_key := digest(flipped)) in offsets:
                    name = tensor.name
                    tensor.CopyFrom(numpy_helper.from_array(flipped, f"{name}.shared"))
                    transposes.append(helper.make_node("Transpose", [tensor.name], [name], perm=[1, 0],
                                                       name=f"{name}.from_shared"))
                    values, key = flipped, flipped_key
            place(tensor, values, key)
        for node in reversed(transposes):
            proto.graph.node.insert(0, node)
    return bytes(data)
