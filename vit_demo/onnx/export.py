"""The model as an ONNX graph, for the page that runs it in the browser (onnxruntime-web, WebAssembly).

Graph interface (``INTERFACE`` 3; ONNX opset ``OPSET``, 18):

Inputs
    ``image``          float32 (B, C, H, W), values in [0, 1]; B is dynamic (one image, or a batch).
    ``heads_off``      float32 (L, H): a nonzero entry switches that head off (knockout), for every image of the
                       batch; all zeros: the intact model. Nonzero, as ``heads.head_mask`` reads a mask.
    ``mean_ablation``  float32 (1,): nonzero: a head switched off is replaced by its stored mean (the weights folder's
                       ``head_means.safetensors``, baked into the graph as a constant; zeros where the folder has
                       none for these weights, as for training snapshots); 0: by zeros.
    ``query``          float32 (1,): the patch whose attention ``query_attention`` gives, for every image of the
                       batch; negative: for each image the patch where its rollout peaks (``explain.first_query_patch``),
                       the query view's first patch; one past the last patch is read as the last.

Outputs
    ``logits``     float32 (B, K): the model's logits divided by the weights' temperature (calibration.py), so
                   softmax(logits) is the probability the app shows.
    ``cls_attention``    float32 (B, L, H, T): where [CLS] attends, every layer's and head's row of the attention
                   weights at token 0, as the knockout leaves them (``VisionTransformer.forward_activations(...,
                   attention=True)`` under ``heads.switched_off``); token 0 is [CLS], token P + i patch i in reading
                   order (P: the model's ``config.prefix_tokens``, 1 for the models trained here).
    ``rollout``    float32 (B, N): attention rollout over the N patches, summing to 1 (``explain.attention_rollout``,
                   its [CLS] row carried from the last layer down: T * T a layer where the whole product costs T^3).
    ``query_attention``  float32 (B, L, H, T): as ``cls_attention``, the row of the query patch's token (P + patch).
                   The graph never gives the whole attention (B, L, H, T, T): a ViT-Ti's at 224 pixels is 5.6 MB an
                   image, a ViT-B's 22 MB, where these rows are 28 and 111 kB.
    ``lens``       float32 (B, L, T, K): the final norm and head applied to the residual stream after each block, at
                   every token, raw (not divided by the temperature). Token 0 is the model's answer there, the logit
                   lens (``heads.logit_lens``: [CLS]'s, or with a distillation token the mean of the two heads'); the
                   softmax of tokens P.. gives ``heads.lens_maps``.
    ``features``   float32 (B, L, D): [CLS] after each block through the final norm (what the lens reads at [CLS]),
                   for the unfamiliar-image rule (interpret/unfamiliar.py).
    ``qkv``        float32 (B, L, 3, H, T, Dh): every layer's queries, keys and values, per head, as the knockout
                   leaves them: how attention is computed, step by step (``explain.attention_steps``). The
                   snapshots' graphs, which the training slider reads, give the logits and ``cls_attention``
                   alone (``SNAPSHOT_OUTPUTS``).
                   The model's graph and its snapshots' record their outputs in the metadata (``outputs``).

The lens graph (``LENS_GRAPH_FILE``), only where the lens is costly (``lens_apart``: a large head, as an imported
ImageNet model's 1,000 classes): onnxruntime runs every node of a graph whatever outputs are fetched, so a lens in
model.onnx would cost every first answer (ViT-Ti's at 224 pixels: 43 ms where it takes 35, docs/import.md). There
model.onnx stops before it (``model_outputs``) and the lens graph, with the same inputs, gives ``logits`` and ``lens``
as above.

The relevance graph (``RELEVANCE_GRAPH_FILE``, beside the model's) gives what the page cannot get from the first: the
model's gradients. Inputs ``image`` (1, C, H, W), ``heads_off``, ``mean_ablation`` as above, and ``target`` float32
(1, K), the one-hot of the class to explain; outputs ``logits`` (1, K) as above and ``relevance`` (1, N): each
patch's class-specific relevance, ``explain.relevance_maps`` (Chefer et al., 2021) with the heads switched off.
The backward pass is traced into plain operators (``make_fx`` over ``torch.autograd.grad``, as AOTAutograd builds a
joint graph) and that graph exported: the ONNX runtime needs no autograd.

The patching graphs (``PATCHING_GRAPH_FILES``: one for the heads, one for the residual stream) give two-image activation
patching (Heimersheim & Nanda, 2024), ``heads.patching_grid``'s grids: vit_demo/onnx/patching.py says what they take
and give.

Knockout is that of ``heads.switched_off`` and ``heads.knockout``: a head's output, its attention-weighted values
before the output projection, is replaced at every token. The graph goes through the model's own forward pass
(``VisionTransformer.forward_activations`` with ``Edits``, the explicit attention path), which applies the
replacement inside ``Attention.forward``, as ``heads.switched_off`` has it do for every forward pass in PyTorch.

The trained model's graphs (``shared_graphs``: the model's, the lens' where it is apart, relevance's and the patching
ones) keep their weights in one file beside them, ``GRAPH_WEIGHTS_FILE``, each tensor once (ONNX external data,
``graph.share_weights``): a runtime opens a graph with that file (onnxruntime finds it beside the graph;
onnxruntime-web is handed it, ``externalData``). The snapshots' graphs, each of its own weights, hold theirs.

Any weights folder has graphs: a model trained here, or one imported (vit_demo/importing.py; no head means, snapshots
or calibration there: zeros for the means, temperature 1). A model without a head (DINO's, DINOv2's encoders) has the
model's graph alone, without logits or lens (``HEADLESS_OUTPUTS``): the page shows its attention, and no answer.
Prefix tokens (DeiT's distillation token, registers) are the model's: the attention, lens and queries cover every
token, token ``config.prefix_tokens + i`` being patch i; relevance covers the patches alone.

Metadata (the model's ``metadata_props``, all strings): ``vit_demo.interface`` ("3"), ``exporter`` (this module's
version, torch's, the exporter and opset), ``weights_file`` (relative to the weights folder) and ``weights_sha256``
(its SHA-256: config.json's ``weights_sha256``, or the snapshot's in snapshots.json), ``head_means_sha256`` (of the
head_means.safetensors baked in, or "none" for zeros), ``dataset``, ``classes`` (a JSON list), ``temperature``
(repr of the float), ``epoch`` (snapshots only) and ``vit`` (the architecture, JSON); the patching graphs, which
use neither head means nor temperature, have neither; the graphs that share weights, ``graph_weights_sha256`` (of
``GRAPH_WEIGHTS_FILE``), and ``graph_weights`` ("float16", "int8") where config.json asks for the weights rounded
(``rounded_weights``: a half or a quarter of the bytes to download, computed in float32 as before; ``python -m vit_demo
import --graph-weights``, docs/import.md measures what it changes). ``stale_graphs`` reads them back to tell whether a
folder's graphs match its weights.

The exporter is torch.onnx.export's dynamo one (``dynamo=True``, needs onnxscript): the default since PyTorch 2.9,
while the TorchScript one (``dynamo=False``) warns that it will be removed. It exports this model with a dynamic
batch and matches PyTorch within about 1e-6 (tests/test_onnx_export.py). Its nodes carry the exporting machine's
stack traces as metadata; they are stripped. Weights that are exact in float16 (training snapshots, kept as fp16,
and the fp16 head means) are stored as float16 with a Cast to float32: the same numbers in half the bytes.

References: PyTorch's "torch.onnx" documentation (``torch.onnx.export``, ``dynamic_shapes``); the ONNX operator
specification (opset 18); onnxruntime-web for the page (the project's notes on running the model in the page).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx
import torch
from torch import nn

from vit_demo.atomic import atomic_write
from vit_demo.interpret import explain
from vit_demo.interpret.heads import layer_answers, read_head_means
from vit_demo.model import Edits, ViTConfig, VisionTransformer
from vit_demo.onnx import patching
from vit_demo.onnx.graph import INT8_MAX, INTERFACE, OPSET, finish, share_weights
from vit_demo.onnx.patching import PatchingGraph, patching_kinds, patching_onnx
from vit_demo.progress import Steps
from vit_demo.weights import (GRAPH_FILE, GRAPH_WEIGHT_TYPES, GRAPH_WEIGHTS_FILE, HEAD_MEANS_FILE, LENS_GRAPH_FILE,
                              PATCHING_GRAPH_FILES, RELEVANCE_GRAPH_FILE, SNAPSHOTS_DIR, SNAPSHOTS_INDEX, WEIGHTS_FILE,
                              Snapshot, load_snapshots, load_weights, read_weights_info,
                              resolve_weights_folder, shown_path)

KNOCKOUT_INPUTS = ("image", "heads_off", "mean_ablation")
INPUTS = (*KNOCKOUT_INPUTS, "query")
OUTPUTS = ("logits", "cls_attention", "rollout", "query_attention", "lens", "features", "qkv")
SNAPSHOT_OUTPUTS = ("logits", "cls_attention")  # the training slider's graphs: where [CLS] looked, and the answer
LENS_OUTPUTS = ("logits", "lens")  # the lens graph's, where the lens is apart
HEADLESS_OUTPUTS = OUTPUTS[1:4] + OUTPUTS[5:]  # the model graph's for a model without a head (DINO's): no logits, lens
RELEVANCE_INPUTS = (*KNOCKOUT_INPUTS, "target")
RELEVANCE_OUTPUTS = ("logits", "relevance")
UNSAID = {"graph_weights": GRAPH_WEIGHT_TYPES[0]}  # what a graph whose metadata leaves these keys out holds
# The lens' share of the forward pass beyond which it gets a graph of its own: the shipped models' is 1.6% (digits) and
# 0.6% (photos), an imported ViT-Ti's at 224 pixels 37%.
LENS_SHARE = 0.1


def lens_apart(config: ViTConfig) -> bool:
    """Whether the logit lens has a graph of its own (``LENS_GRAPH_FILE``): where the head applied at every token
    after every block (T * D * K multiply-adds a block) costs more than ``LENS_SHARE`` of the blocks themselves
    (``ViTConfig.block_macs``)."""
    return config.num_tokens * config.dim * config.num_classes > LENS_SHARE * config.block_macs


def model_outputs(config: ViTConfig) -> tuple[str, ...]:
    """The model graph's outputs for a model of ``config``: ``OUTPUTS``, less the lens where it is apart, and less
    the logits and the lens for a model without a head (``HEADLESS_OUTPUTS``)."""
    if not config.num_classes:
        return HEADLESS_OUTPUTS
    return tuple(name for name in OUTPUTS if name != "lens") if lens_apart(config) else OUTPUTS


def shared_graphs(config: ViTConfig) -> tuple[str, ...]:
    """The trained model's graphs, which share ``GRAPH_WEIGHTS_FILE``, for a model of ``config``: the model's, the
    lens' where it is apart, relevance's, and the patching graphs (``patching_kinds``); the model's alone for a model
    without a head."""
    if not config.num_classes:
        return (GRAPH_FILE,)
    lens = (LENS_GRAPH_FILE,) if lens_apart(config) else ()
    return (GRAPH_FILE, *lens, RELEVANCE_GRAPH_FILE, *(PATCHING_GRAPH_FILES[kind] for kind in patching_kinds(config)))


class PageGraph(nn.Module):
    """What the graph computes: the model with heads switched off, its attention and its logit lens.

    ``means``: (L, H, T, Dh), the heads' mean outputs (None: zeros); ``temperature``: the calibration the logits
    are divided by; ``outputs``: which of ``OUTPUTS`` it gives, in that order.
    """

    def __init__(self, model: VisionTransformer, means: torch.Tensor | None, temperature: float,
                 outputs: tuple[str, ...] = OUTPUTS) -> None:
        super().__init__()
        c = model.config
        self.model, self.outputs = model, outputs
        if means is None:
            means = torch.zeros(c.depth, c.heads, c.num_tokens, c.dim // c.heads)
        device = model.pos_embed.device  # (the server's models may be on a GPU; head means are read to the CPU)
        self.register_buffer("means", means.float().contiguous().to(device))  # (L, H, T, Dh)
        self.temperature = float(temperature)

    def edits_for(self, heads_off: torch.Tensor, mean_ablation: torch.Tensor) -> Edits:
        """The edits that replace the heads ``heads_off`` by their means or zeros."""
        off = (heads_off != 0)[None]  # (1, L, H) bool
        values = (self.means * (mean_ablation != 0).to(self.means.dtype))[None]  # (1, L, H, T, Dh): means or zeros
        return Edits(head_mask=off, head_values=values)

    def forward(self, image: torch.Tensor, heads_off: torch.Tensor, mean_ablation: torch.Tensor, query: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
        found = self.model.forward_activations(image, attention=True, stream=True, qkv="qkv" in self.outputs,
                                               edits=self.edits_for(heads_off, mean_ablation))
        normed = self.model.norm(found.stream)  # (B, L, T, D)
        lens = self.model.head(normed)  # (B, L, T, K): the head on every token after every block
        if self.model.head_dist is not None:  # at token 0 the model's answer there: its two heads' mean
            lens = torch.cat([layer_answers(self.model, normed)[:, :, None], lens[:, :, 1:]], 2)
        prefix, attention = self.model.config.prefix_tokens, found.attention  # (B, L, H, T, T)
        rollout = carried_rollout(attention, prefix)  # (B, N)
        patch = torch.where(query < 0, rollout.argmax(-1), query.long().clamp(0, rollout.shape[-1] - 1))  # (B,)
        token = (patch + prefix).view(-1, 1, 1, 1, 1).expand(*attention.shape[:3], 1, attention.shape[-1])
        every = {"logits": found.logits / self.temperature,  # (B, K)
                 "cls_attention": attention[:, :, :, 0],  # (B, L, H, T)
                 "rollout": rollout,
                 "query_attention": attention.gather(3, token)[:, :, :, 0],  # (B, L, H, T)
                 "lens": lens,
                 "features": normed[:, :, 0],  # (B, L, D)
                 "qkv": found.qkv}  # (B, L, 3, H, T, Dh)
        return tuple(every[name] for name in self.outputs)

    def relevance(self, image: torch.Tensor, heads_off: torch.Tensor, mean_ablation: torch.Tensor,
                  target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Calibrated logits (B, K) and each patch's relevance for the class ``target`` (B, K) one-hot, (B, N), as
        ``explain.relevance_forward`` computes it."""
        with torch.enable_grad():
            x = image.detach().requires_grad_(True)  # the graph starts at the image, as relevance_forward's
            found = self.model.forward_activations(x, attention=True, edits=self.edits_for(heads_off, mean_ablation))
            gradients = torch.autograd.grad((found.logits * target).sum(), found.attentions)  # L x (B, H, T, T)
        prefix = self.model.config.prefix_tokens  # the patches follow
        relevance = explain.accumulate_relevance(found.attentions, gradients)[:, prefix:]  # (B, N)
        return found.logits.detach() / self.temperature, relevance


def carried_rollout(attention: torch.Tensor, prefix: int) -> torch.Tensor:
    """``explain.attention_rollout`` of every image, (B, L, H, T, T) -> (B, N), summing to 1, in float32: [CLS]'s row
    of the product of the layers' mixed matrices, carried from the last layer down (row 0 of M_L, times M_(L-1), ...,
    times M_1), which is all of the product that rollout reads."""
    tokens = attention.shape[-1]
    mixed = 0.5 * attention.mean(2) + 0.5 * torch.eye(tokens, device=attention.device)  # (B, L, T, T)
    mixed = mixed / mixed.sum(-1, keepdim=True)
    row = mixed[:, -1, :1]  # (B, 1, T)
    for layer in range(mixed.shape[1] - 2, -1, -1):
        row = row @ mixed[:, layer]
    patches = row[:, 0, prefix:]  # (B, N)
    return patches / patches.sum(-1, keepdim=True)


@dataclasses.dataclass(frozen=True)
class Graph:
    """One graph of a weights folder as PyTorch computes it: ``module``, a ``PageGraph`` run as it is (``kind``
    "page": the model's, the lens', a snapshot's) or by its ``relevance`` ("relevance"), or a ``PatchingGraph``
    ("patching"); its inputs' shapes (None: any batch) and its outputs, in order."""

    kind: str
    module: nn.Module
    inputs: dict[str, tuple[int | None, ...]]
    outputs: tuple[str, ...]

    @property
    def run(self) -> Callable[..., tuple[torch.Tensor, ...]]:
        return self.module.relevance if self.kind == "relevance" else self.module


def snapshot_graph(epoch: int) -> str:
    """The graph of the training snapshot of ``epoch``, by its name in the weights folder."""
    return f"{SNAPSHOTS_DIR}/epoch-{epoch:04d}.onnx"


def folder_graphs(model: VisionTransformer, means: torch.Tensor | None, temperature: float,
                  snapshots: Sequence[Snapshot]) -> dict[str, Graph]:
    """Every graph of a weights folder, by its file name there (``expected_metadata``'s names): the trained
    ``model``'s ``shared_graphs`` (with its head ``means`` and ``temperature``), then each of its ``snapshots``'.
    ``write_onnx`` exports them; the app's server runs them for a page that can't (vit_demo/app/forward.py)."""
    c = model.config
    image, knockout = (c.in_channels, c.image_size, c.image_size), ((c.depth, c.heads), (1,))

    def page(model: VisionTransformer, means: torch.Tensor | None, temperature: float, outputs: tuple[str, ...]):
        module = PageGraph(model, means, temperature, outputs).eval()
        return Graph("page", module, dict(zip(INPUTS, ((None, *image), *knockout, (1,)))), outputs)

    found = {GRAPH_FILE: page(model, means, temperature, model_outputs(c))}
    if lens_apart(c):
        found[LENS_GRAPH_FILE] = page(model, means, temperature, LENS_OUTPUTS)
    if RELEVANCE_GRAPH_FILE in shared_graphs(c):
        found[RELEVANCE_GRAPH_FILE] = Graph("relevance", found[GRAPH_FILE].module, dict(zip(
            RELEVANCE_INPUTS, ((1, *image), *knockout, (1, c.num_classes)))), RELEVANCE_OUTPUTS)
    for kind in patching_kinds(c):
        found[PATCHING_GRAPH_FILES[kind]] = Graph("patching", PatchingGraph(model, kind).eval(), dict(zip(
            patching.INPUTS, ((1, *image), (1, *image), (2, c.num_classes)))), patching.OUTPUTS)
    for snapshot in snapshots:
        found[snapshot_graph(snapshot.epoch)] = page(snapshot.model, None, snapshot.temperature, SNAPSHOT_OUTPUTS)
    return found


def graph_onnx(graph: Graph, metadata: dict[str, str]) -> onnx.ModelProto:
    """Export one of ``folder_graphs`` with ``metadata``, by its kind."""
    if graph.kind == "relevance":
        return relevance_onnx(graph.module, metadata)
    if graph.kind == "patching":
        return patching_onnx(graph.module, metadata)
    return to_onnx(graph.module, metadata)


def to_onnx(graph: PageGraph, metadata: dict[str, str]) -> onnx.ModelProto:
    """Export ``graph`` (its model in eval mode, on the CPU) as described above, with ``metadata`` in its
    metadata_props (``vit_demo.interface`` and ``exporter`` are added)."""
    c = graph.model.config
    example = (torch.rand(2, c.in_channels, c.image_size, c.image_size),  # a batch of 2: B stays symbolic
               torch.zeros(c.depth, c.heads), torch.ones(1), -torch.ones(1))
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        program = torch.onnx.export(
            graph, example, dynamo=True, opset_version=OPSET, input_names=list(INPUTS),
            output_names=list(graph.outputs),
            dynamic_shapes=({0: torch.export.Dim("batch")}, None, None, None), external_data=False, optimize=True,
            verbose=False, artifacts_dir=tmp)
        proto = program.model_proto
    return finish(proto, metadata)


class _Traced(nn.Module):
    """A traced function (an FX graph of plain operators) as a module, for the exporter."""

    def __init__(self, traced: nn.Module) -> None:
        super().__init__()
        self.traced = traced

    def forward(self, *inputs: torch.Tensor):
        return self.traced(*inputs)


def relevance_onnx(graph: PageGraph, metadata: dict[str, str]) -> onnx.ModelProto:
    """Export ``graph``'s relevance as described above, for one image (its backward pass traced by ``make_fx``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    c = graph.model.config
    example = (torch.rand(1, c.in_channels, c.image_size, c.image_size), torch.zeros(c.depth, c.heads), torch.ones(1),
               torch.nn.functional.one_hot(torch.tensor([0]), c.num_classes).float())
    def relevance(image, heads_off, mean_ablation, target):  # a plain function: make_fx reads its arguments
        return graph.relevance(image, heads_off, mean_ablation, target)

    traced = make_fx(relevance)(*example)  # forward and backward, as aten operators
    with tempfile.TemporaryDirectory() as tmp:
        program = torch.onnx.export(
            _Traced(traced).eval(), example, dynamo=True, opset_version=OPSET, input_names=list(RELEVANCE_INPUTS),
            output_names=list(RELEVANCE_OUTPUTS), external_data=False, optimize=True, verbose=False,
            artifacts_dir=tmp)
        proto = program.model_proto
    return finish(proto, metadata)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _save(proto: onnx.ModelProto, path: Path) -> int:
    blob = proto.SerializeToString()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(blob))
    return len(blob)


def expected_metadata(folder: str | Path) -> dict[str, dict[str, str]]:
    """What each graph of a weights folder should say about the weights it was exported from: {path relative to the
    folder: metadata}, for its ``shared_graphs`` and each snapshot listed in snapshots.json. Checks nothing itself."""
    folder = resolve_weights_folder(folder)
    info, checksum = read_weights_info(folder)
    # (what the weights were trained on, or imported from: not the folder's name, which may change)
    common = {"dataset": info.dataset.name if info.dataset else info.imported["source"],
              "classes": json.dumps(list(info.classes)),
              "vit": json.dumps(info.config.to_dict(), separators=(",", ":"))}
    means_file = folder / HEAD_MEANS_FILE
    model = VisionTransformer(info.config)
    means_sha = _sha256(means_file) if read_head_means(folder, model) is not None else "none"
    kept = {"weights_file": WEIGHTS_FILE, "weights_sha256": checksum, **common}
    if info.graph_weights != UNSAID["graph_weights"]:  # (left unsaid where they are kept as they are)
        kept["graph_weights"] = info.graph_weights
    trained = {**kept, "head_means_sha256": means_sha, "temperature": repr(info.temperature)}
    expected = {GRAPH_FILE: {**trained, "outputs": ",".join(model_outputs(info.config))}}
    if lens_apart(info.config):
        expected[LENS_GRAPH_FILE] = {**trained, "outputs": ",".join(LENS_OUTPUTS)}
    if RELEVANCE_GRAPH_FILE in shared_graphs(info.config):
        expected[RELEVANCE_GRAPH_FILE] = trained
    for kind in patching_kinds(info.config):  # raw logits, nothing ablated: no temperature, no head means
        expected[PATCHING_GRAPH_FILES[kind]] = kept
    index = folder / SNAPSHOTS_INDEX
    if index.is_file():
        for entry in json.loads(index.read_text(encoding="utf-8")):
            expected[snapshot_graph(entry["epoch"])] = {
                "weights_file": entry["file"], "weights_sha256": entry["sha256"], "head_means_sha256": "none",
                "temperature": repr(float(entry.get("temperature", 1.0))), "epoch": str(entry["epoch"]),
                "outputs": ",".join(SNAPSHOT_OUTPUTS), **common}
    return expected


def read_metadata(path: str | Path) -> dict[str, str]:
    """An ONNX file's metadata_props as a dict."""
    proto = onnx.load(str(path), load_external_data=False)
    return {prop.key: prop.value for prop in proto.metadata_props}


def stale_graphs(folder: str | Path) -> list[str]:
    """Why a weights folder's graphs are not in sync with its weights: one line per graph that is missing, or whose
    metadata names other weights, head means, temperature, classes or architecture, or another interface. Empty:
    every graph matches (a folder that has no graphs at all lists each as missing)."""
    folder = resolve_weights_folder(folder)
    shared = folder / GRAPH_WEIGHTS_FILE
    shared_sha = _sha256(shared) if shared.is_file() else "missing"
    sharing = shared_graphs(read_weights_info(folder)[0].config)
    problems = []
    for name, expected in expected_metadata(folder).items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
            continue
        found = read_metadata(path)
        if found.get("vit_demo.interface") != INTERFACE:
            problems.append(f"{name}: interface {found.get('vit_demo.interface')}, not {INTERFACE}")
        for key in {**expected, **UNSAID}:
            value, said = (metadata.get(key, UNSAID.get(key)) for metadata in (expected, found))
            if said != value:
                problems.append(f"{name}: {key} is {said!r}, the weights' is {value!r}")
        if name in sharing and found.get("graph_weights_sha256") != shared_sha:
            problems.append(f"{name}: {GRAPH_WEIGHTS_FILE} is {'missing' if shared_sha == 'missing' else 'another'}")
    return problems


def rounded_weights(model: VisionTransformer, kind: str) -> VisionTransformer:
    """A copy of ``model`` whose parameters are rounded as config.json's ``graph_weights`` ``kind`` asks and kept in
    float32: exported, its graphs store them so (``graph.finish``) and compute in float32 as before.

    "float16": every parameter rounded to float16 (half the bytes). "int8": each weight matrix (the linear layers'
    and the patch embedding's) rounded to int8 times a scale per output channel, symmetric, the scale the channel's
    largest magnitude over 127 rounded down to bfloat16's 8 significant bits (so that int8 times the scale is exact
    in float32 and the graph reads the scale back from the largest value); the other parameters to float16 (about a
    quarter of the bytes). "float32": ``model`` itself.
    """
    if kind == GRAPH_WEIGHT_TYPES[0]:
        return model
    rounded = copy.deepcopy(model)
    matrices = {module.weight for module in rounded.modules() if isinstance(module, (nn.Linear, nn.Conv2d))}
    with torch.no_grad():
        for parameter in rounded.parameters():
            if kind == "int8" and parameter in matrices:
                parameter.copy_(_rounded_to_int8(parameter))
            else:
                parameter.copy_(parameter.half().float())
    return rounded


def _rounded_to_int8(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (out, ...) as int8 times a float32 scale per output channel (``rounded_weights``), in float32."""
    largest = weight.abs().amax(dim=tuple(range(1, weight.ndim)), keepdim=True)  # (out, 1, ...)
    scale = (largest / INT8_MAX).view(torch.int32).bitwise_and(~0xFFFF).view(torch.float32)  # rounded down, 8 bits
    scale = torch.where(largest > 0, scale, torch.ones_like(scale))
    return (weight / scale).round().clamp(-INT8_MAX, INT8_MAX) * scale  # the largest at +-127 (scale rounded down)


def write_onnx(folder: str | Path, progress: Steps | None = None) -> list[dict]:
    """Write a weights folder's graphs: its ``shared_graphs`` beside its weights (``model.onnx``, ``lens.onnx`` where
    the lens is apart, and ``relevance.onnx`` with its head means and temperature; the patching graphs,
    vit_demo/onnx/patching.py), and ``snapshots/epoch-XXXX.onnx`` for each snapshot in snapshots.json (its own
    temperature, zeros for the means). Snapshot graphs no longer listed there are removed. Returns one record per
    file: its path (as users see it), bytes, and what it was exported from. Each export (some seconds to minutes) is
    said to ``progress``, if given, as it begins.

    Raises:
        WeightsError: the folder's weights cannot be loaded.
    """
    folder = resolve_weights_folder(folder)
    info, model = load_weights(folder, "cpu")  # (before any step is said: what is no weights folder, in one line)
    expected = expected_metadata(folder)
    progress = progress or Steps()
    progress.expect(1)
    progress.step("reading its head means and training snapshots")
    records = []

    def save(name: str, proto: onnx.ModelProto) -> None:
        found = {"file": str(shown_path(folder / name)), "bytes": _save(proto, folder / name),
                 "weights": expected[name]["weights_file"]}
        if "temperature" in expected[name]:  # (the patching graphs' logits are raw, nothing ablated)
            found.update(temperature=float(expected[name]["temperature"]),
                         ablation="zeros" if expected[name]["head_means_sha256"] == "none" else "mean")
        records.append(found)

    means = read_head_means(folder, model)
    model = rounded_weights(model, info.graph_weights)
    graphs = folder_graphs(model, means, info.temperature, load_snapshots(folder, "cpu"))
    sharing = shared_graphs(info.config)
    progress.expect(len(graphs) + 1)  # each graph exported, and the trained model's weights written once for all
    trained = {}
    for name in sharing:
        progress.step(f"exporting {name}")
        trained[name] = graph_onnx(graphs[name], expected[name])
    progress.step(f"writing {GRAPH_WEIGHTS_FILE}, the weights {', '.join(sharing)} share")
    shared = share_weights(list(trained.values()), GRAPH_WEIGHTS_FILE)
    atomic_write(folder / GRAPH_WEIGHTS_FILE, lambda f: f.write(shared))
    records.append({"file": str(shown_path(folder / GRAPH_WEIGHTS_FILE)), "bytes": len(shared),
                    "weights": WEIGHTS_FILE, "shared_by": list(trained)})
    sha = hashlib.sha256(shared).hexdigest()
    for name, proto in trained.items():
        proto.metadata_props.add(key="graph_weights_sha256", value=sha)
        save(name, proto)
    for name in [name for name in graphs if name not in sharing]:  # the snapshots'
        progress.step(f"exporting {name}")
        save(name, graph_onnx(graphs[name], expected[name]))
    for path in sorted((folder / SNAPSHOTS_DIR).glob("epoch-*.onnx")):
        if f"{SNAPSHOTS_DIR}/{path.name}" not in expected:
            path.unlink()
            records.append({"file": str(shown_path(path)), "removed": "its snapshot is not in snapshots.json"})
    return records
