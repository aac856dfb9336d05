"""The ONNX graphs the page runs (vit_demo/onnx/export.py), run in onnxruntime on the CPU against the PyTorch model:
the shipped models and their training snapshots, intact, with heads switched off and through the logit lens; the
relevance and patching graphs against explain.py and heads/; each committed graph in sync with the weights it was
exported from; and an imported model's graphs (prefix tokens, a lens graph of its own, no head means or calibration)
on real photos."""

import json
import shutil

import numpy as np
import onnx
import pytest
import skimage.data
import torch
from conftest import HAS_SHARED_CIFAR, HAS_SHARED_MNIST, REPO, SHARED_DATA
from PIL import Image

from vit_demo.data.datasets import load_split
from vit_demo.interpret import explain, heads
from vit_demo.onnx import patching
from vit_demo.onnx.graph import INTERFACE
from vit_demo.cli import main
from vit_demo.data.preprocess import Preprocessing
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.onnx.export import (GRAPH_FILE, GRAPH_WEIGHTS_FILE, INPUTS, LENS_GRAPH_FILE, LENS_OUTPUTS, OUTPUTS,
                                  PATCHING_GRAPH_FILES, RELEVANCE_GRAPH_FILE, RELEVANCE_OUTPUTS, expected_metadata,
                                  model_outputs, read_metadata, rounded_weights, shared_graphs, stale_graphs,
                                  write_onnx)
from vit_demo.weights import (CONFIG_FILE, HEAD_MEANS_FILE, WEIGHTS_FILE, WEIGHTS_ROOT, WeightsError, load_snapshots,
                              load_weights, read_weights_info, save_imported, update_config)

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -r requirements-dev.txt)")

SHIPPED = ("mnist", "cifar10")
PARITY_IMAGES = 300  # 30 a class of CIFAR-10; the first 300 of MNIST
BATCH = 100  # images per run: PyTorch's whole attention, the reference, is 9 x 6 x 65 x 65 floats a CIFAR-10 image
LOGITS_TOL, ATTENTION_TOL, LENS_TOL = 1e-4, 1e-5, 1e-4


@pytest.fixture(scope="module")
def sessions():
    """One onnxruntime session per graph file, opened on first use."""
    opened = {}

    def session(path):
        if path not in opened:
            assert path.is_file(), f"{path.relative_to(WEIGHTS_ROOT.parent)} is missing: python -m vit_demo onnx"
            options = ort.SessionOptions()
            options.log_severity_level = 3
            opened[path] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return opened[path]
    return session


@pytest.fixture(scope="module")
def shipped():
    """Each shipped model: its weights info, the model (eval, CPU) and its head means."""
    loaded = {}
    for name in SHIPPED:
        info, model = load_weights(name, "cpu")
        loaded[name] = info, model, heads.read_head_means(info.folder, model)
    return loaded


def real_test_images(name: str, n: int, mnist_root=None) -> torch.Tensor:
    """The first n real test images of MNIST (from the mnist_root fixture), or n CIFAR-10 test photos spread over
    the classes (n / 10 of each, read from the shared folder); uint8 (n, C, H, W). Skips where the real set isn't
    there."""
    if name == "mnist":
        if not HAS_SHARED_MNIST:
            pytest.skip("the real MNIST test set is not in ../shared/data")
        return load_split("mnist", mnist_root, "test", download=False)[0][:n]
    if not HAS_SHARED_CIFAR:
        pytest.skip("the real CIFAR-10 test set is not in ../shared/data")
    classes = sorted(p for p in (SHARED_DATA / "cifar10" / "test").iterdir() if p.is_dir())
    photos = [np.array(Image.open(path).convert("RGB"))
              for folder in classes for path in sorted(folder.glob("*.png"))[: n // len(classes)]]
    return torch.from_numpy(np.stack(photos)).permute(0, 3, 1, 2).contiguous()  # (n, 3, 32, 32)


@pytest.fixture(scope="module")
def images(mnist_root):
    """Each dataset's real test images for the parity test (uint8), read once."""
    cache = {}

    def get(name: str, n: int = PARITY_IMAGES) -> torch.Tensor:
        if name not in cache:
            cache[name] = real_test_images(name, PARITY_IMAGES, mnist_root)
        return cache[name][:n]
    return get


def run_graph(session, x: torch.Tensor, off: torch.Tensor | None = None, mean: bool = True,
              query: int = -1) -> dict[str, np.ndarray]:
    """The graph's outputs for images x (B, C, H, W) in [0, 1], heads ``off`` (L, H) bool (None: none), the query
    patch ``query`` (-1: where rollout peaks)."""
    L, H = session.get_inputs()[1].shape
    off = torch.zeros(L, H) if off is None else off.float()
    feeds = {"image": x.numpy(), "heads_off": off.numpy().astype(np.float32),
             "mean_ablation": np.array([1.0 if mean else 0.0], np.float32), "query": np.array([query], np.float32)}
    return dict(zip([value.name for value in session.get_outputs()], session.run(None, feeds)))


def max_diff(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def attention_diff(out: dict[str, np.ndarray], attention, prefix: int = 1, query: int = -1) -> float:
    """How far the graph's attention outputs are from what they are made of, PyTorch's whole attention (B, L, H, T,
    T): [CLS]'s rows, rollout (explain.attention_rollout) and the query patch's rows, the largest difference of any.
    The query patch at -1 is where the graph's rollout peaks, which is Python's peak up to float32 rounding."""
    attention = np.asarray(attention)
    rollout = np.stack([explain.attention_rollout(a, prefix).ravel() for a in attention])  # (B, N)
    patch = out["rollout"].argmax(-1) if query < 0 else np.full(len(attention), query)  # (B,)
    if query < 0:
        assert np.allclose(rollout[np.arange(len(patch)), patch], rollout.max(-1), atol=1e-6)
    rows = attention[np.arange(len(patch)), :, :, prefix + patch]  # (B, L, H, T)
    return max(max_diff(out["cls_attention"], attention[:, :, :, 0]), max_diff(out["rollout"], rollout),
               max_diff(out["query_attention"], rows))


@pytest.mark.parametrize("name", SHIPPED)
def test_graph_matches_pytorch_on_300_real_test_images(name, shipped, sessions, images):
    info, model, _ = shipped[name]
    session = sessions(info.folder / GRAPH_FILE)
    x_all = images(name).float() / 255
    worst = {"logits": 0.0, "attention": 0.0, "features": 0.0, "qkv": 0.0}
    for x in x_all.split(BATCH):
        out = run_graph(session, x)
        with torch.no_grad():
            found = model.forward_activations(x, attention=True, stream=True, qkv=True)
            logits, attention = found.logits, found.attention  # (B, K), (B, L, H, T, T): as the app shows them
            features = model.norm(found.stream[:, :, 0])  # (B, L, D): what the unfamiliar rule measures
        worst["logits"] = max(worst["logits"], max_diff(out["logits"], logits / info.temperature))
        worst["attention"] = max(worst["attention"], attention_diff(out, attention))
        worst["features"] = max(worst["features"], max_diff(out["features"], features))
        worst["qkv"] = max(worst["qkv"], max_diff(out["qkv"], found.qkv))  # (B, L, 3, H, T, Dh)
        assert (out["logits"].argmax(1) == logits.argmax(1).numpy()).all(), "a class differs"
        assert out["lens"].shape == (len(x), info.config.depth, info.config.num_tokens, info.config.num_classes)
    print(f"{name}: {len(x_all)} images, max |logits diff| {worst['logits']:.2e}, "
          f"max |attention diff| {worst['attention']:.2e}, max |features diff| {worst['features']:.2e}, "
          f"max |qkv diff| {worst['qkv']:.2e}")
    assert len(x_all) == PARITY_IMAGES
    assert worst["logits"] <= LOGITS_TOL and worst["attention"] <= ATTENTION_TOL, worst
    assert worst["features"] <= LENS_TOL and worst["qkv"] <= LENS_TOL, worst
    one = run_graph(session, x_all[:1])  # a batch of one, as the page runs a drawing: the same numbers
    assert max_diff(one["logits"], run_graph(session, x_all[:BATCH])["logits"][:1]) <= 1e-5
    x, patch = x_all[:20], info.config.grid_size ** 2 - 1  # a patch asked for: its rows, whatever rollout says
    with torch.no_grad():
        attention = model.forward_activations(x, attention=True).attention
    assert attention_diff(run_graph(session, x, query=patch), attention, query=patch) <= ATTENTION_TOL


# A single head, a whole layer, many heads (a seeded third of them).
def knockout_masks(model) -> dict[str, torch.Tensor]:
    L, H = model.config.depth, model.config.heads
    many = torch.rand(L, H, generator=torch.Generator().manual_seed(0)) < 1 / 3
    return {"one head": heads.head_mask(model, [(L // 2, 1)]), "a layer": heads.head_mask(model, [(1, None)]),
            "many heads": many}


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_graph_switches_heads_off_as_heads_knockout_does(name, ablation, shipped, sessions, images):
    info, model, means = shipped[name]
    assert means is not None, f"{name} has no {HEAD_MEANS_FILE} for its weights"
    session = sessions(info.folder / GRAPH_FILE)
    x = images(name)[:: PARITY_IMAGES // 20].float() / 255  # 20 images, spread over CIFAR-10's classes
    for label, mask in knockout_masks(model).items():
        out = run_graph(session, x, mask, mean=ablation == "mean")
        knocked = heads.knockout(model, x, mask, means if ablation == "mean" else None, attention=True)
        assert max_diff(out["logits"], knocked.ablated / info.temperature) <= LOGITS_TOL, label
        assert attention_diff(out, knocked.ablated_attention) <= ATTENTION_TOL, label
        assert max_diff(knocked.ablated, knocked.logits) > 1e-3, f"{label}: switching heads off changed nothing"
    mask = knockout_masks(model)["many heads"]
    with heads.switched_off(model, mask, means if ablation == "mean" else None), torch.no_grad():
        found = model.forward_activations(x, attention=True)  # what the app's views show with those heads off
        logits, attention = found.logits, found.attention
        lens = heads.logit_lens(model, x)  # (B, L, K), under the knockout too
    out = run_graph(session, x, mask, mean=ablation == "mean")
    assert max_diff(out["logits"], logits / info.temperature) <= LOGITS_TOL
    assert attention_diff(out, attention) <= ATTENTION_TOL
    assert max_diff(out["lens"][:, :, 0], lens) <= LENS_TOL


@pytest.mark.parametrize("name", SHIPPED)
def test_graph_lens_is_heads_logit_lens_and_lens_maps(name, shipped, sessions, images):
    info, model, _ = shipped[name]
    session = sessions(info.folder / GRAPH_FILE)
    x = images(name)[:: PARITY_IMAGES // 50].float() / 255  # 50 images
    out = run_graph(session, x)
    lens = torch.from_numpy(out["lens"])  # (B, L, T, K), raw logits
    assert max_diff(lens[:, :, 0], heads.logit_lens(model, x)) <= LENS_TOL  # [CLS] after each layer
    assert max_diff(lens[:, -1, 0] / info.temperature, out["logits"]) <= LOGITS_TOL  # the last layer's is the model's
    g = info.config.grid_size
    predicted = torch.from_numpy(out["logits"]).argmax(-1)  # (B,)
    probs = lens[:, :, 1:].softmax(-1)  # (B, L, N, K)
    maps = probs[torch.arange(len(x)), :, :, predicted].reshape(len(x), -1, g, g)  # (B, L, g, g)
    assert max_diff(maps, heads.lens_maps(model, x)) <= 1e-5


@pytest.mark.parametrize("name", SHIPPED)
def test_snapshot_graphs_match_their_snapshots(name, sessions, images):
    snapshots = load_snapshots(name, "cpu")
    assert snapshots, f"{name} has no snapshots"
    x = images(name)[:: PARITY_IMAGES // 10].float() / 255  # 10 images, one of each CIFAR-10 class
    for snapshot in snapshots:
        session = sessions(WEIGHTS_ROOT / name / "snapshots" / f"epoch-{snapshot.epoch:04d}.onnx")
        model = snapshot.model
        with torch.no_grad():
            found = model.forward_activations(x, attention=True)
            logits, attention = found.logits, found.attention
        out = run_graph(session, x)
        assert max_diff(out["logits"], logits / snapshot.temperature) <= LOGITS_TOL, snapshot.epoch
        assert max_diff(out["cls_attention"], attention[:, :, :, 0]) <= ATTENTION_TOL, snapshot.epoch
    mask = heads.head_mask(model, [(0, None)])  # a snapshot has no means: mean-ablation is zero-ablation
    knocked = heads.knockout(model, x, mask, None)
    for mean in (True, False):
        out = run_graph(session, x, mask, mean)
        assert max_diff(out["logits"], knocked.ablated / snapshot.temperature) <= LOGITS_TOL


RELEVANCE_IMAGES = 100
RELEVANCE_TOL = 1e-4  # of each map's own maximum


def run_relevance(session, x: torch.Tensor, target: int, off: torch.Tensor | None = None,
                  mean: bool = True) -> dict[str, np.ndarray]:
    """The relevance graph's outputs for one image x (1, C, H, W) in [0, 1] and class ``target``."""
    L, H = session.get_inputs()[1].shape
    K = session.get_inputs()[3].shape[1]
    off = torch.zeros(L, H) if off is None else off.float()
    feeds = {"image": x.numpy(), "heads_off": off.numpy().astype(np.float32),
             "mean_ablation": np.array([1.0 if mean else 0.0], np.float32),
             "target": np.eye(K, dtype=np.float32)[[target]]}
    return dict(zip(RELEVANCE_OUTPUTS, session.run(None, feeds)))


@pytest.mark.parametrize("name", SHIPPED)
def test_relevance_graph_matches_explain_on_100_real_test_images(name, shipped, sessions, images):
    """The relevance graph (its backward pass traced in) against explain.relevance_maps, for the predicted class
    and for another, on 100 real test images (CIFAR-10's spread over its classes); and with heads switched off,
    against the relevance the app computes through heads.switched_off."""
    info, model, means = shipped[name]
    session = sessions(info.folder / RELEVANCE_GRAPH_FILE)
    x = images(name)[:: PARITY_IMAGES // RELEVANCE_IMAGES].float() / 255  # (100, C, H, W)
    worst = 0.0
    for i in range(len(x)):
        target = i % len(info.dataset.classes) if i % 2 else int(model(x[i : i + 1]).argmax())
        out = run_relevance(session, x[i : i + 1], target)
        expected = explain.relevance_maps(model, x[i : i + 1], torch.tensor([target])).reshape(1, -1)
        worst = max(worst, max_diff(out["relevance"], expected) / max(float(np.abs(expected).max()), 1e-12))
    assert worst <= RELEVANCE_TOL, worst
    mask = knockout_masks(model)["many heads"]
    with heads.switched_off(model, mask, means):
        expected = explain.relevance_maps(model, x[:1], torch.tensor([3])).reshape(1, -1)
    out = run_relevance(session, x[:1], 3, mask)
    assert max_diff(out["relevance"], expected) <= RELEVANCE_TOL * float(np.abs(expected).max())
    assert max_diff(out["relevance"], run_relevance(session, x[:1], 3)["relevance"]) > 1e-6  # it changed something


PATCHING_PAIRS = 2
PATCHING_TOL = 1e-4  # of the logit difference between the two runs: the grids' own scale, 0 corrupt to 1 clean


def different_pairs(model, x: torch.Tensor, count: int) -> list[tuple[int, int]]:
    """``count`` pairs (i, j) of images in x that the model reads as different classes, each image in one pair."""
    with torch.no_grad():
        classes = model(x).argmax(-1).tolist()
    pairs, used = [], set()
    for i in range(len(x)):
        j = next((j for j in range(i + 1, len(x)) if j not in used and classes[j] != classes[i]), None)
        if i in used or j is None:
            continue
        used |= {i, j}
        pairs.append((i, j))
        if len(pairs) == count:
            return pairs
    raise AssertionError(f"fewer than {count} pairs read as different classes")


@pytest.mark.parametrize("name", SHIPPED)
def test_patching_graphs_match_heads_patching_grid_on_real_pairs(name, shipped, sessions, images):
    """The patching graphs (every head; every residual-stream position) against heads.patching_grid, both directions,
    on real test images the model reads as different classes (CIFAR-10's from different classes' folders)."""
    info, model, _ = shipped[name]
    x = images(name)[:: PARITY_IMAGES // 20].float() / 255  # 20 images, spread over CIFAR-10's classes
    K = info.config.num_classes
    worst = {kind: 0.0 for kind in PATCHING_GRAPH_FILES}
    for i, j in different_pairs(model, x, PATCHING_PAIRS):
        grid = heads.patching_grid(model, x[i], x[j])
        feeds = {"clean": x[i : i + 1].numpy(), "corrupt": x[j : j + 1].numpy(),
                 "classes": np.eye(K, dtype=np.float32)[list(grid.classes)]}
        for kind, file in PATCHING_GRAPH_FILES.items():
            out = dict(zip(patching.OUTPUTS, sessions(info.folder / file).run(None, feeds)))
            expected = [grid.logit_diff["clean"], grid.logit_diff["corrupt"]]
            assert max_diff(out["logit_diff"], expected) <= LOGITS_TOL, (kind, i, j)
            for direction in ("clean_into_corrupt", "corrupt_into_clean"):
                assert out[direction].shape == tuple(getattr(grid, direction)[kind].shape)
                worst[kind] = max(worst[kind], max_diff(out[direction], getattr(grid, direction)[kind]))
    print(f"{name}: {PATCHING_PAIRS} pairs, max |grid diff| {worst}")
    assert max(worst.values()) <= PATCHING_TOL, worst


@pytest.mark.parametrize("name", SHIPPED)
def test_patching_graphs_interface(name, shipped):
    info, _, _ = shipped[name]
    c = info.config
    shapes = {"heads": [c.depth, c.heads], "residual": [c.depth, c.num_tokens]}
    for kind, file in PATCHING_GRAPH_FILES.items():
        graph = onnx.load(str(info.folder / file)).graph
        dims = {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
                for value in (*graph.input, *graph.output)}
        assert [value.name for value in graph.input] == list(patching.INPUTS)
        assert [value.name for value in graph.output] == list(patching.OUTPUTS)
        image = [1, c.in_channels, c.image_size, c.image_size]
        assert [dims[name] for name in (*patching.INPUTS, *patching.OUTPUTS)] == [
            image, image, [2, c.num_classes], [2], shapes[kind], shapes[kind]]
        assert str(REPO).encode() not in (info.folder / file).read_bytes()


@pytest.mark.parametrize("name", SHIPPED)
def test_the_trained_graphs_share_one_file_of_weights(name):
    """The model's, relevance and both patching graphs read their weights from GRAPH_WEIGHTS_FILE, each tensor once
    (a weight one graph holds transposed is read through a Transpose); what stays in a graph is small."""
    folder, stored = WEIGHTS_ROOT / name, set()
    info, model = load_weights(folder, "cpu")
    assert shared_graphs(info.config) == (GRAPH_FILE, RELEVANCE_GRAPH_FILE, *PATCHING_GRAPH_FILES.values())
    for file in shared_graphs(info.config):
        graph = onnx.load(str(folder / file), load_external_data=False).graph
        inline = sum(len(tensor.raw_data) for tensor in graph.initializer)
        assert inline < 300_000, (file, inline)  # constants, masks, small biases
        for tensor in graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                place = {entry.key: entry.value for entry in tensor.external_data}
                assert place["location"] == GRAPH_WEIGHTS_FILE
                stored.add((int(place["offset"]), int(place["length"])))
    ends = sorted(stored)
    assert all(a[0] + a[1] <= b[0] for a, b in zip(ends, ends[1:]))  # no tensor stored twice, none overlapping
    data = (folder / GRAPH_WEIGHTS_FILE).stat().st_size
    assert data == ends[-1][0] + ends[-1][1] and sum(length for _, length in stored) > 0.95 * data
    parameters = sum(p.numel() * 4 for p in model.parameters())
    assert data < 1.1 * parameters  # the model's weights once (and the head means), not once a graph


@pytest.mark.parametrize("name", SHIPPED)
def test_committed_graphs_are_in_sync_with_their_weights(name):
    # A graph exported from other weights (or head means, or temperature) fails here: export again with
    # python -m vit_demo onnx --model NAME.
    assert stale_graphs(WEIGHTS_ROOT / name) == []
    folder = WEIGHTS_ROOT / name
    config = json.loads((folder / CONFIG_FILE).read_text())
    metadata = read_metadata(folder / GRAPH_FILE)
    assert metadata["weights_sha256"] == config["weights_sha256"]
    assert metadata["dataset"] == name and json.loads(metadata["classes"]) == config["classes"]
    assert float(metadata["temperature"]) == config["temperature"]
    assert metadata["vit_demo.interface"] == INTERFACE and "torch" in metadata["exporter"]


@pytest.mark.parametrize("name", SHIPPED)
def test_graph_interface(name, shipped):
    info, _, _ = shipped[name]
    c = info.config
    graph = onnx.load(str(info.folder / GRAPH_FILE)).graph
    dtypes = {value.name: value.type.tensor_type.elem_type for value in (*graph.input, *graph.output)}
    assert [value.name for value in graph.input] == list(INPUTS)
    assert [value.name for value in graph.output] == list(OUTPUTS)
    assert set(dtypes.values()) == {onnx.TensorProto.FLOAT}

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    image, heads_off, mean_ablation, query = graph.input
    batch = dims(image)[0]
    assert isinstance(batch, str)  # the batch is dynamic
    assert dims(image) == [batch, c.in_channels, c.image_size, c.image_size]
    assert dims(heads_off) == [c.depth, c.heads] and dims(mean_ablation) == dims(query) == [1]
    T, K, rows = c.num_tokens, c.num_classes, [batch, c.depth, c.heads, c.num_tokens]
    assert [dims(value) for value in graph.output] == [[batch, K], rows, [batch, c.grid_size ** 2], rows,
                                                        [batch, c.depth, T, K], [batch, c.depth, c.dim],
                                                        [batch, c.depth, 3, c.heads, T, c.dim // c.heads]]
    opset = {entry.domain: entry.version for entry in onnx.load(str(info.folder / GRAPH_FILE)).opset_import}
    assert opset[""] >= 17
    model = onnx.load(str(info.folder / GRAPH_FILE))
    assert not any(node.metadata_props for node in model.graph.node)  # the exporter's stack traces are stripped
    assert str(REPO).encode() not in (info.folder / GRAPH_FILE).read_bytes()


def test_a_stale_graph_is_told_apart(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    sharing = shared_graphs(read_weights_info(WEIGHTS_ROOT / "mnist")[0].config)
    for file in (CONFIG_FILE, WEIGHTS_FILE, HEAD_MEANS_FILE, GRAPH_WEIGHTS_FILE, *sharing):
        shutil.copy(WEIGHTS_ROOT / "mnist" / file, folder / file)
    assert stale_graphs(folder) == []
    (folder / GRAPH_WEIGHTS_FILE).write_bytes(b"other weights")
    assert stale_graphs(folder) == [f"{name}: {GRAPH_WEIGHTS_FILE} is another" for name in sharing]
    (folder / GRAPH_WEIGHTS_FILE).unlink()
    assert stale_graphs(folder) == [f"{name}: {GRAPH_WEIGHTS_FILE} is missing" for name in sharing]
    shutil.copy(WEIGHTS_ROOT / "mnist" / GRAPH_WEIGHTS_FILE, folder / GRAPH_WEIGHTS_FILE)
    shipped = json.loads((folder / CONFIG_FILE).read_text())["temperature"]  # the graphs' own
    update_config(folder, temperature=0.75)
    assert stale_graphs(folder) == [f"{name}: temperature is '{shipped}', the weights' is '0.75'"
                                    for name in (GRAPH_FILE, RELEVANCE_GRAPH_FILE)]
    (folder / HEAD_MEANS_FILE).unlink()  # now the graph's means belong to no file: zeros were expected
    problems = stale_graphs(folder)
    assert len(problems) == 4 and "head_means_sha256" in problems[0] and "temperature" in problems[1]
    update_config(folder, weights_sha256="0" * 64)  # other weights: every graph, the patching graphs too
    assert {problem.split(":")[0] for problem in stale_graphs(folder)} == {
        GRAPH_FILE, RELEVANCE_GRAPH_FILE, *PATCHING_GRAPH_FILES.values()}
    (folder / GRAPH_FILE).unlink()
    assert stale_graphs(folder)[0] == "model.onnx: missing"


# ---- imported models -------------------------------------------------------------------------------------------------

def save_random_import(folder, config: ViTConfig) -> None:
    """A model of ``config`` with random weights (seeded) as the import saves one: numbered classes, a timm-like
    preprocessing, no head means, snapshots or calibration."""
    torch.manual_seed(0)
    model = VisionTransformer(config).eval()
    save_imported(folder, model, tuple(f"class {i}" for i in range(config.num_classes)),
                  Preprocessing("resize_crop", config.image_size + 6, "bicubic", "pil"),
                  {"source": "timm:random", "command": "python -m vit_demo import ..."})


# DeiT's distillation token and two registers at once (four prefix tokens), layer scale, position embeddings on the
# patches only and patches of 14 pixels, as DINOv2's, with a head; its 40 classes make the lens costly enough to get a
# graph of its own (``lens_apart``), as an ImageNet head's 1,000 do for ViT-Ti. Tiny, so that its graphs export in
# seconds: ViT-Ti's take minutes (docs/import.md).
TINY = ViTConfig(image_size=42, patch_size=14, in_channels=3, num_classes=40, dim=32, depth=2, heads=2, mlp_dim=64,
                 mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), norm_eps=1e-6, distillation_token=True,
                 register_tokens=2, layer_scale=0.5, prefix_pos_embed=False)
VIT_TINY = ViTConfig(image_size=224, patch_size=16, in_channels=3, num_classes=1000, dim=192, depth=12, heads=3,
                     mlp_dim=768, mean=(0.5,) * 3, std=(0.5,) * 3, norm_eps=1e-6)  # timm's vit_tiny_patch16_224


@pytest.fixture(scope="session")  # (not module: its tests share a worker, but not one after another)
def tiny_import(tmp_path_factory):
    """The TINY model imported (random weights) and its graphs written: (folder, write_onnx's records)."""
    folder = tmp_path_factory.mktemp("imported") / "tiny"
    save_random_import(folder, TINY)
    return folder, write_onnx(folder)


def photos(info) -> torch.Tensor:
    """skimage's astronaut, chelsea and coffee as the model reads them: (3, C, S, S) in [0, 1]."""
    size = info.config.image_size
    return torch.stack([torch.from_numpy(info.preprocessing.apply(getattr(skimage.data, name)(), size)).permute(2, 0, 1)
                        for name in ("astronaut", "chelsea", "coffee")]).float()


def test_what_graphs_each_model_gets():
    # The shipped models: every output in model.onnx, both patching graphs (as committed). ViT-Ti at 224: the lens
    # apart (a third of the forward pass), no residual-stream patching (some 2.7e12 multiply-adds).
    for name in SHIPPED:
        config = read_weights_info(WEIGHTS_ROOT / name)[0].config
        assert model_outputs(config) == OUTPUTS
        assert shared_graphs(config) == (GRAPH_FILE, RELEVANCE_GRAPH_FILE, *PATCHING_GRAPH_FILES.values())
    assert model_outputs(VIT_TINY) == ("logits", "cls_attention", "rollout", "query_attention", "features", "qkv")
    assert shared_graphs(VIT_TINY) == (GRAPH_FILE, LENS_GRAPH_FILE, RELEVANCE_GRAPH_FILE, PATCHING_GRAPH_FILES["heads"])
    assert shared_graphs(TINY) == (GRAPH_FILE, LENS_GRAPH_FILE, RELEVANCE_GRAPH_FILE, *PATCHING_GRAPH_FILES.values())


@pytest.mark.xdist_group("tiny_import")  # (the import's tests in one process: it is written once)
def test_an_imported_folders_graphs_are_told_stale_or_in_sync(tiny_import, tmp_path):
    folder, records = tiny_import
    assert stale_graphs(folder) == []
    assert list(expected_metadata(folder)) == list(shared_graphs(TINY))  # no snapshots
    written = {record["file"].rpartition("/")[2]: record for record in records}
    assert set(written) == {*shared_graphs(TINY), GRAPH_WEIGHTS_FILE}
    for name in (GRAPH_FILE, LENS_GRAPH_FILE, RELEVANCE_GRAPH_FILE):  # no calibration, no head means
        assert (written[name]["temperature"], written[name]["ablation"]) == (1.0, "zeros")
    metadata = read_metadata(folder / GRAPH_FILE)
    assert metadata["dataset"] == "timm:random" and metadata["head_means_sha256"] == "none"  # (its source)
    assert stale_graphs(shutil.copytree(folder, tmp_path / "renamed")) == []  # (a folder renamed keeps its graphs)
    assert metadata["outputs"] == ",".join(model_outputs(TINY))
    assert read_metadata(folder / LENS_GRAPH_FILE)["outputs"] == ",".join(LENS_OUTPUTS)
    # A folder of ViT-Ti's shape (random weights, no graphs yet): what it would get, each missing.
    save_random_import(tmp_path / "vit", VIT_TINY)
    assert stale_graphs(tmp_path / "vit") == [f"{name}: missing" for name in shared_graphs(VIT_TINY)]


@pytest.mark.xdist_group("tiny_import")
@pytest.mark.parametrize(("kind", "share"), [("float16", 0.6), ("int8", 0.35)])
def test_graphs_of_rounded_weights_take_fewer_bytes_and_compute_as_the_rounded_model(tiny_import, sessions, tmp_path,
                                                                                    kind, share):
    # config.json's graph_weights (import --graph-weights): the weights rounded, stored as float16 or int8, computed
    # in float32; a folder whose graphs were written otherwise is told stale.
    folder = shutil.copytree(tiny_import[0], tmp_path / "tiny")
    update_config(folder, graph_weights=kind)
    assert f"{GRAPH_FILE}: graph_weights is 'float32', the weights' is '{kind}'" in stale_graphs(folder)
    write_onnx(folder)
    assert stale_graphs(folder) == [] and read_metadata(folder / GRAPH_FILE)["graph_weights"] == kind
    full, rounded_bytes = ((f / GRAPH_WEIGHTS_FILE).stat().st_size for f in (tiny_import[0], folder))
    assert rounded_bytes < share * full
    info, model = load_weights(folder)
    x = photos(info)
    logits = run_graph(sessions(folder / GRAPH_FILE), x)["logits"]
    with torch.no_grad():
        rounded, exact = rounded_weights(model, kind)(x), model(x)
    assert max_diff(logits, rounded) <= LOGITS_TOL < max_diff(logits, exact)
    if kind == "int8":  # every weight matrix (linear layers', the patch embedding's) is stored as int8
        stored = onnx.load(str(folder / GRAPH_FILE), load_external_data=False).graph.initializer
        matrices = [m.weight for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
        assert len(matrices) == 11 and sum(np.prod(t.dims) for t in stored if t.data_type == onnx.TensorProto.INT8) \
            >= sum(w.numel() for w in matrices)
    update_config(folder, graph_weights="float32")
    assert f"{GRAPH_FILE}: graph_weights is '{kind}', the weights' is 'float32'" in stale_graphs(folder)
    update_config(folder, graph_weights="bfloat16")
    with pytest.raises(WeightsError, match="graph_weights 'bfloat16' is not one of float32, float16, int8"):
        load_weights(folder)


@pytest.mark.xdist_group("tiny_import")
def test_an_imported_models_graphs_match_pytorch_on_real_photos(tiny_import, sessions):
    """Every graph of the TINY import against PyTorch on three real photos: the model's and the lens', intact and with
    heads switched off (zeros: an import has no head means), relevance over the patches alone, both patching
    grids; token P + i is patch i (P = 4 prefix tokens)."""
    folder, _ = tiny_import
    info, model = load_weights(folder)
    P, g, K = TINY.prefix_tokens, TINY.grid_size, TINY.num_classes
    assert (P, TINY.num_tokens) == (4, 13)
    x = photos(info)
    out = run_graph(sessions(folder / GRAPH_FILE), x)
    assert tuple(out) == model_outputs(TINY)
    with torch.no_grad():
        found = model.forward_activations(x, attention=True, stream=True, qkv=True)
        features = model.norm(found.stream[:, :, 0])  # (B, L, D)
    assert max_diff(out["logits"], found.logits) <= LOGITS_TOL  # temperature 1
    assert attention_diff(out, found.attention, P) <= ATTENTION_TOL
    assert max_diff(out["features"], features) <= LENS_TOL
    assert max_diff(out["qkv"], found.qkv) <= LENS_TOL
    lens = run_graph(sessions(folder / LENS_GRAPH_FILE), x)
    assert tuple(lens) == LENS_OUTPUTS and max_diff(lens["logits"], out["logits"]) <= 1e-6
    assert lens["lens"].shape == (3, TINY.depth, TINY.num_tokens, K)
    assert max_diff(lens["lens"][:, :, 0], heads.logit_lens(model, x)) <= LENS_TOL  # the answer after each layer:
    assert max_diff(lens["lens"][:, -1, 0], found.logits) <= LENS_TOL  # the last, the model's (its two heads' mean)
    predicted = torch.from_numpy(out["logits"]).argmax(-1)
    maps = torch.from_numpy(lens["lens"])[:, :, P:].softmax(-1)[torch.arange(3), :, :, predicted]  # (B, L, N)
    assert max_diff(maps.reshape(3, -1, g, g), heads.lens_maps(model, x)) <= 1e-5

    mask = heads.head_mask(model, [(0, 1), (1, 0)])
    knocked = heads.knockout(model, x, mask, None, attention=True)
    for mean in (True, False):  # no head means: mean-ablation is zero-ablation
        out = run_graph(sessions(folder / GRAPH_FILE), x, mask, mean)
        assert max_diff(out["logits"], knocked.ablated) <= LOGITS_TOL
        assert attention_diff(out, knocked.ablated_attention, P) <= ATTENTION_TOL
    assert max_diff(knocked.ablated, knocked.logits) > 1e-3

    relevance = sessions(folder / RELEVANCE_GRAPH_FILE)
    for i in range(3):
        for target in (int(predicted[i]), 7):
            found = run_relevance(relevance, x[i : i + 1], target)["relevance"]  # (1, N): the patches alone
            expected = explain.relevance_maps(model, x[i : i + 1], torch.tensor([target])).reshape(1, g * g)
            assert max_diff(found, expected) <= RELEVANCE_TOL * float(np.abs(expected).max())
    with heads.switched_off(model, mask, None):
        expected = explain.relevance_maps(model, x[:1], torch.tensor([7])).reshape(1, g * g)
    assert max_diff(run_relevance(relevance, x[:1], 7, mask)["relevance"], expected) <= (
        RELEVANCE_TOL * float(np.abs(expected).max()))

    for i, j in ((0, 1), (1, 2)):
        gap = torch.from_numpy(run_graph(sessions(folder / GRAPH_FILE), x[[i, j]])["logits"])  # (2, K)
        classes = (int((gap[0] - gap[1]).argmax()), int((gap[0] - gap[1]).argmin()))  # the two runs' widest gap
        grid = heads.patching_grid(model, x[i], x[j], classes)
        feeds = {"clean": x[i : i + 1].numpy(), "corrupt": x[j : j + 1].numpy(),
                 "classes": np.eye(K, dtype=np.float32)[list(classes)]}
        for kind, file in PATCHING_GRAPH_FILES.items():
            found = dict(zip(patching.OUTPUTS, sessions(folder / file).run(None, feeds)))
            assert max_diff(found["logit_diff"], [grid.logit_diff["clean"], grid.logit_diff["corrupt"]]) <= LOGITS_TOL
            for direction in ("clean_into_corrupt", "corrupt_into_clean"):
                assert max_diff(found[direction], getattr(grid, direction)[kind]) <= PATCHING_TOL, (kind, i, j)


def test_a_model_without_a_head_gets_the_models_graph_alone(tmp_path, sessions):
    # DINO's kind (no head; here with a register and layer scale): no logits, lens, relevance or patching to give;
    # model.onnx gives its attention, features and queries, keys and values as PyTorch computes them, heads off too.
    config = ViTConfig(image_size=28, patch_size=14, in_channels=3, num_classes=0, dim=16, depth=2, heads=2,
                       mlp_dim=32, mean=(0.5,) * 3, std=(0.5,) * 3, register_tokens=1, layer_scale=0.5)
    save_random_import(tmp_path / "features", config)
    assert main(["onnx", "--model", str(tmp_path / "features")]) == 0
    assert sorted(p.name for p in (tmp_path / "features").glob("*.onnx")) == [GRAPH_FILE] and not stale_graphs(
        tmp_path / "features")
    session, (_, model) = sessions(tmp_path / "features" / GRAPH_FILE), load_weights(tmp_path / "features", "cpu")
    x, off = torch.rand(3, 3, 28, 28), torch.tensor([[False, True], [False, False]])
    out = run_graph(session, x, off, mean=False)
    assert list(out) == ["cls_attention", "rollout", "query_attention", "features", "qkv"]
    with torch.no_grad(), heads.switched_off(model, [(0, 1)], None):
        found = model.forward_activations(x, attention=True, stream=True, qkv=True)
        features = model.norm(found.stream[:, :, 0])  # (B, L, D)
    assert attention_diff(out, found.attention, 2) < 1e-5 and max_diff(out["qkv"], found.qkv) < 1e-5
    assert max_diff(out["features"], features) < 1e-5
