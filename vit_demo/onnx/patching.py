"""Two-image activation patching as ONNX graphs, for the page that runs the model itself (assets/page/source.js).

Activation patching (Heimersheim & Nanda, 2024, "How to use and interpret activation patching"): a clean and a
corrupt image; each head's output, and the residual stream after each layer at each token, is copied from one run into
the other, one part at a time, and the logit difference (clean class against corrupt class) of each patched run is
normalised as (patched - corrupt) / (clean - corrupt): 0 is the corrupt run, 1 the clean one. The graphs compute
exactly what ``heads.patching_base`` and ``heads.restored_fractions`` compute for ``heads.patching_grid``, by
tracing that very code (the patches are the model's own ``Edits``) rather than a second copy of it.

Two graphs per weights folder, beside model.onnx (``weights.PATCHING_GRAPH_FILES``), the second where the page can
run it:

- ``patching_heads.onnx``: every head, both directions (L * H patched runs each);
- ``patching_residual.onnx``: every position of the residual stream after every layer, both directions (L * T each):
  for the photo model some ten times the heads' work, so the page runs it only when asked (the view's button), as
  the server computes it only then. Written only where its grid takes at most ``RESIDUAL_MACS`` multiply-adds
  (``patching_kinds``): not for an imported ViT-Ti at 224 pixels, whose grid would take some five minutes in the
  page (docs/import.md).

Inputs (both graphs)
    ``clean``, ``corrupt``  float32 (1, C, H, W), values in [0, 1]: the two images.
    ``classes``             float32 (2, K): row 0 the one-hot of the clean class, row 1 of the corrupt class (the
                            page passes what the model reads each image as, as ``patching_grid`` does by default).

Outputs
    ``logit_diff``          float32 (2,): the raw logit difference (not divided by the temperature) of the clean and
                            of the corrupt run: ``patching_grid``'s "logit_diff" clean, corrupt.
    ``clean_into_corrupt``  float32 (L, H) or (L, T): the corrupt run with one part from the clean run.
    ``corrupt_into_clean``  float32 (L, H) or (L, T): the clean run with one part from the corrupt run.

Where the two logit differences are equal the fractions are not defined (the graph divides by zero): the page says so,
as the server does, from ``logit_diff``. Metadata as export.py's graphs', without temperature and head means
(neither enters: the logits are raw, and nothing is ablated).
"""

from __future__ import annotations

import tempfile

import onnx
import torch
from torch import nn

from vit_demo.interpret import heads
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.onnx.graph import OPSET, finish

INPUTS = ("clean", "corrupt", "classes")
OUTPUTS = ("logit_diff", "clean_into_corrupt", "corrupt_into_clean")
KINDS = ("heads", "residual")  # one graph each
# The residual grid's work at most for its graph to be written: the photo model's takes 9.7e10 multiply-adds, 11 s in
# the page (docs/benchmarks.md, patching); twice that is some 20 s. An imported ViT-Ti at 224 pixels: 2.7e12.
RESIDUAL_MACS = 2e11


def residual_macs(config: ViTConfig) -> int:
    """Multiply-adds of the residual grid's patched runs, both directions: L * T runs each, a run patched after
    block l running the L - 1 - l blocks after it, T * L * (L - 1) block runs in all (``ViTConfig.block_macs``; the
    final norm and head left out)."""
    return config.num_tokens * config.depth * (config.depth - 1) * config.block_macs


def patching_kinds(config: ViTConfig) -> tuple[str, ...]:
    """The patching graphs a model gets (``KINDS``): the heads', and the residual stream's where its grid takes at
    most ``RESIDUAL_MACS`` (``residual_macs``): beyond that the page could not compute it in reasonable time. None
    for a model without a head: it has no logits to compare."""
    if not config.num_classes:
        return ()
    return KINDS if residual_macs(config) <= RESIDUAL_MACS else ("heads",)


class PatchingGraph(nn.Module):
    """``heads.patching_grid`` for one kind of part ("heads" or "residual") and a given pair of classes."""

    def __init__(self, model: VisionTransformer, kind: str) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"no patching graph of {kind!r}: {', '.join(KINDS)}")
        self.model, self.kind = model, kind

    def forward(self, clean: torch.Tensor, corrupt: torch.Tensor,
                classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        base = heads.patching_base(self.model, clean, corrupt)
        direction = classes[0] - classes[1]  # (K,): +1 at the clean class, -1 at the corrupt one
        grids = heads.restored_fractions(self.model, base, direction, kinds=(self.kind,))
        return (base.logits @ direction, grids["clean_into_corrupt"][self.kind],
                grids["corrupt_into_clean"][self.kind])


def patching_onnx(graph: PatchingGraph, metadata: dict[str, str]) -> onnx.ModelProto:
    """Export ``graph`` (its model in eval mode, on the CPU) as described above, with ``metadata``."""
    c = graph.model.config
    image = (1, c.in_channels, c.image_size, c.image_size)
    example = (torch.rand(image), torch.rand(image),
               torch.nn.functional.one_hot(torch.tensor([0, 1]), c.num_classes).float())
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        program = torch.onnx.export(
            graph, example, dynamo=True, opset_version=OPSET, input_names=list(INPUTS), output_names=list(OUTPUTS),
            external_data=False, optimize=True, verbose=False, artifacts_dir=tmp)
        proto = program.model_proto
    share_initializers(proto)
    return finish(proto, metadata)


def share_initializers(proto: onnx.ModelProto) -> int:
    """Keep one copy of each constant: the patched runs call the same blocks many times, and the exporter's constant
    folding gives each call its own copy of a folded weight (a transposed matrix): the same bytes, many times over.
    Each node then reads the first copy. Returns how many copies were dropped."""
    first: dict[tuple, str] = {}
    renamed: dict[str, str] = {}
    kept = []
    for tensor in proto.graph.initializer:
        key = (tensor.data_type, tuple(tensor.dims), tensor.raw_data, tuple(tensor.float_data),
               tuple(tensor.int64_data), tuple(tensor.int32_data))
        if key in first and tensor.raw_data:
            renamed[tensor.name] = first[key]
        else:
            first.setdefault(key, tensor.name)
            kept.append(tensor)
    if not renamed:
        return 0
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    for node in proto.graph.node:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
    assert not {value.name for value in proto.graph.output} & set(renamed), "a graph output is a constant"
    kept_info = [info for info in proto.graph.value_info if info.name not in renamed]
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(kept_info)
    return len(renamed)
