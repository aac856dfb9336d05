"""Shared fixtures: real datasets from ../shared/data when they are there, small generated ones otherwise."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

REPO = Path(__file__).resolve().parents[1]
PHOTOS = REPO / "examples" / "photos"  # a CIFAR-10 test photo of each class (scripts/make_examples.py)
sys.path.insert(0, str(REPO / "benchmarks"))
from common import free_port, page_source, serving  # noqa: E402, F401  (shared with the benchmarks)

SHARED_DATA = REPO.parent / "shared" / "data"
HAS_SHARED_MNIST = (SHARED_DATA / "MNIST" / "raw" / "t10k-images-idx3-ubyte.gz").is_file()
HAS_SHARED_CIFAR = (SHARED_DATA / "cifar10" / "test" / "airplane").is_dir()
CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# Whole files of slow tests (marked ``slow``: ``pytest -m "not slow"`` is the fast loop; CI runs everything), and why;
# slow tests in other files carry @pytest.mark.slow themselves.
SLOW_FILES = {
    "test_browser.py": "real Chromium against the real app, one app start a module and a page a test",
    "test_static_space.py": "writes the static Space (some 90 MB) and drives it in Chromium",
    "test_space.py": "writes the Gradio Space's folder and starts it as a Space does",
    "test_benchmarks.py": "starts the app and the do-nothing app for each benchmark script",
    "test_onnx_export.py": "the graphs against PyTorch on 100 to 300 real test images of each dataset",
    "test_page_faithfulness.py": "the page's scoring under Node against the server's, on real test images",
    "test_page_patching.py": "the page's patching under Node against the server's, on real test pairs",
    "test_page_preprocess.py": "the page's preprocessing under Node on 1,000 drawings and 200 photos",
    "test_own_model_page.py": "exports a model's graphs, starts the app and drives the static page in Chromium",
}


def pytest_configure(config):
    # Under pytest-xdist each of the N worker processes runs torch, and so do the commands and servers it starts. With
    # every one of them taking all the cores (torch's default), N processes share them at a fraction of the speed
    # (threads waiting on each other): each worker and what it starts keeps to its share of the cores.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = share
        import torch

        torch.set_num_threads(int(share))


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
        if "shipped_outputs" in item.fixturenames:  # in one process, so that each set of images is read once
            item.add_marker(pytest.mark.xdist_group("shipped_outputs"))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Decoded-dataset caches go to a temporary folder, for this process and the ones it starts: under pytest-xdist
    one its workers share (each file is written atomically), so that a dataset is decoded once a run."""
    previous = os.environ.get("XDG_CACHE_HOME")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "cache"  # the workers' temporary folders are in one folder
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("cache")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield
    if previous is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = previous


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", n) for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def render_digits(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n synthetic MNIST-like digits (white on black, 28x28) drawn with a font at random sizes and places."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    for i, label in enumerate(labels):
        font = ImageFont.load_default(size=int(rng.integers(16, 24)))
        canvas = Image.new("L", (28, 28), 0)
        ImageDraw.Draw(canvas).text((14 + rng.integers(-2, 3), 14 + rng.integers(-2, 3)), str(label),
                                    fill=255, font=font, anchor="mm", stroke_width=int(rng.integers(0, 2)),
                                    stroke_fill=255)
        images[i] = np.asarray(canvas.rotate(float(rng.uniform(-12, 12)), resample=Image.BILINEAR))
    return images, labels


@pytest.fixture(scope="session")
def mnist_root(tmp_path_factory) -> Path:
    """A data dir with MNIST/raw/: the real files (read in place, never written) or generated ones."""
    if HAS_SHARED_MNIST:
        return SHARED_DATA
    root = tmp_path_factory.mktemp("mnist")
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for split, n, seed in (("train", 6000, 0), ("t10k", 1000, 1)):
        images, labels = render_digits(n, seed)
        _write_idx(raw / f"{split}-images-idx3-ubyte.gz", images)
        _write_idx(raw / f"{split}-labels-idx1-ubyte.gz", labels)
    return root


@pytest.fixture(scope="session")
def cifar_root(tmp_path_factory) -> Path:
    """A small CIFAR-10 ImageFolder (a copy of real images when available, else generated shapes)."""
    root = tmp_path_factory.mktemp("cifar")
    rng = np.random.default_rng(0)
    for split, per_class in (("train", 60), ("test", 20)):
        for label, name in enumerate(CIFAR_CLASSES):
            folder = root / "cifar10" / split / name
            folder.mkdir(parents=True)
            if HAS_SHARED_CIFAR:
                for src in sorted((SHARED_DATA / "cifar10" / split / name).glob("*.png"))[:per_class]:
                    shutil.copy(src, folder / src.name)
                continue
            for i in range(per_class):
                # Each class is a colour and a position, so a model can learn it from little data.
                image = rng.integers(0, 60, (32, 32, 3), dtype=np.uint8)
                y, x = divmod(label, 5)
                image[4 + 12 * y : 16 + 12 * y, 2 + 6 * x : 8 + 6 * x] = [(label * 97) % 256, (label * 53) % 256, 200]
                Image.fromarray(image).save(folder / f"{i:04d}.png")
    return root



def imported_folder(folder: Path, model, classes, name: str) -> Path:
    """A model of ours saved to ``folder`` as ``python -m vit_demo import timm:NAME`` saves one (read at 72 pixels,
    bicubic, centre-cropped to its size), with its graphs written: an added model's tab."""
    from vit_demo.data.preprocess import Preprocessing
    from vit_demo.onnx.export import write_onnx
    from vit_demo.weights import save_imported

    save_imported(folder, model, classes, Preprocessing("resize_crop", 72, "bicubic", "pil"),
                  {"source": f"timm:{name}", "command": f"python -m vit_demo import timm:{name}"})
    write_onnx(folder)
    return folder

# What the shipped models make of the image sets their records were measured on (accuracy, calibration, the rule for
# unfamiliar images): recorded once, as reading them again is some 20,000 forward passes of the photo model alone.
RECORDED_OUTPUTS = REPO / "tests" / "fixtures" / "outputs_on_record_sets.safetensors"
RECORD_COMMAND = ("python -m pytest -n 0 -m slow --record-outputs tests/test_calibration.py tests/test_unfamiliar.py "
                  "tests/test_shipped_model.py")
CHECKED_IMAGES = 64  # of each recorded set, read again by the model every run


def pytest_addoption(parser):
    parser.addoption("--record-outputs", action="store_true",
                     help=f"read the shipped models' outputs again and write them to {RECORDED_OUTPUTS.name}")


@dataclasses.dataclass(frozen=True)
class Recorded:
    """A shipped model's outputs for a set of images: logits (N, K), float32, and its unfamiliar rule's scores (N,),
    float64, at its temperature."""

    logits: "torch.Tensor"
    scores: "torch.Tensor"


def model_stamp(name: str) -> str:
    """What a shipped model's recorded outputs depend on: its weights, temperature and rule (config.json)."""
    from vit_demo.weights import CONFIG_FILE, WEIGHTS_ROOT

    config = json.loads((WEIGHTS_ROOT / name / CONFIG_FILE).read_text())
    kept = {key: config.get(key) for key in ("weights_sha256", "temperature", "unfamiliar")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="session")
def shipped_outputs(request):
    """``outputs(name, images) -> Recorded``: what the shipped model ``name`` makes of images (N, C, H, W), uint8 or
    float in [0, 1] (``unfamiliar.outputs``, and the rule's scores), the very numbers its calibration.json and
    metrics.json were made from. They come from tests/fixtures/outputs_on_record_sets.safetensors, kept for exactly these
    images (by their SHA-1) and this model (``model_stamp``); each run reads ``CHECKED_IMAGES`` of every set again and
    asks the same, so that a model that answers otherwise fails here. ``--record-outputs`` reads every set afresh and
    writes the file (``RECORD_COMMAND``)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    from vit_demo import load_model
    from vit_demo.interpret import unfamiliar

    record = request.config.getoption("--record-outputs")
    stored, stamps = {}, {}
    if RECORDED_OUTPUTS.is_file():
        with safe_open(RECORDED_OUTPUTS, "pt") as f:
            stored = {key: f.get_tensor(key) for key in f.keys()}
            stamps = f.metadata()
    found = {}

    def outputs(name: str, images: torch.Tensor) -> Recorded:
        shape = "x".join(map(str, images.shape))
        key = f"{name}.{images.dtype}.{shape}.{hashlib.sha1(images.numpy().tobytes()).hexdigest()}"
        if key in found:
            return found[key]
        clf = load_model(name, device="cpu")
        rule = clf.info.unfamiliar

        def read(x: torch.Tensor) -> Recorded:
            out = unfamiliar.outputs(clf.model, x)
            return Recorded(out.logits, rule.scores(out.logits, clf.temperature, out.features).double())

        if record:
            found[key] = read(images)
            return found[key]
        remake = f"remake them: {RECORD_COMMAND}"
        assert stamps.get(name) == model_stamp(name), f"the recorded outputs are of another {name} model; {remake}"
        assert f"{key}.logits" in stored, f"no outputs are recorded for these {len(images)} images; {remake}"
        kept = Recorded(stored[f"{key}.logits"], stored[f"{key}.scores"])
        checked = torch.linspace(0, len(images) - 1, min(CHECKED_IMAGES, len(images))).long()
        again = read(images[checked])
        np.testing.assert_allclose(again.logits, kept.logits[checked], rtol=1e-4, atol=1e-4, err_msg=remake)
        np.testing.assert_allclose(again.scores, kept.scores[checked], rtol=1e-4, atol=1e-4, err_msg=remake)
        found[key] = kept
        return kept

    yield outputs
    if record and found:
        names = {key.split(".", 1)[0] for key in found}
        kept = {key: value for key, value in stored.items() if key.split(".", 1)[0] not in names}
        for key, value in found.items():
            kept[f"{key}.logits"], kept[f"{key}.scores"] = value.logits.contiguous(), value.scores.contiguous()
        stamps = {**{n: s for n, s in stamps.items() if n not in names}, **{n: model_stamp(n) for n in names}}
        save_file(kept, str(RECORDED_OUTPUTS), metadata=stamps)


@contextlib.contextmanager
def stopped_after_first_checkpoint(monkeypatch):
    """A training run inside stops as if it were killed right after writing its first checkpoint (the run raises
    KeyboardInterrupt there, which this expects); checkpoints are written as before once it has stopped."""
    from vit_demo.training import loop

    real_write = loop.atomic_write

    def write_then_die(path, write):
        real_write(path, write)
        if path.name == loop.CHECKPOINT_FILE:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "atomic_write", write_then_die)
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        monkeypatch.setattr(loop, "atomic_write", real_write)


def canvas_ink(strokes: list[list[tuple[float, float]]]) -> np.ndarray:
    """Strokes (pixel points) as the app's canvas reads them: (112, 112) uint8, ink 255 on 0."""
    from vit_demo.data.preprocess import CANVAS_SIZE

    image = Image.new("L", (CANVAS_SIZE, CANVAS_SIZE), 0)
    draw = ImageDraw.Draw(image)
    for stroke in strokes:
        draw.line(stroke, fill=255, width=6, joint="curve")
    return np.asarray(image)


def map_levels(attention: np.ndarray, token: int = 0) -> np.ndarray:
    """Python's reference for a layer x head grid as the page's numbers hold it: where ``token`` attends (0: [CLS],
    1 + i: patch i) in every layer and head and each layer's mean over heads (explain.token_attention_maps), each map
    scaled to its own maximum and rounded to 0..255: attention (L, H, T, T) -> (L, H + 1, g, g) uint8."""
    from vit_demo.interpret import explain

    maps = explain.token_attention_maps(attention, token)  # (L, H, g, g)
    maps = np.concatenate([maps, maps.mean(axis=1, keepdims=True)], axis=1)
    peaks = np.maximum(maps.max(axis=(-2, -1), keepdims=True), 1e-12)
    return np.round(maps * (255 / peaks)).astype(np.uint8)


def as_drawn(maps: np.ndarray) -> np.ndarray:
    """Maps (..., g, g) as the page draws them (assets/page/picture.js: levels): each scaled to its own maximum in
    float32 and rounded to 0..255, here / 255 (in [0, 1])."""
    peaks = np.maximum(maps.max(axis=(-2, -1), keepdims=True), 1e-12).astype(np.float32)
    return np.round((maps * (np.float32(255) / peaks)).astype(np.float32)) / 255


def read_live_payload(text: str) -> tuple[np.ndarray, np.ndarray]:
    """A tab's numbers (assets/page/numbers.js: imageNumbers, as the store's numbers() writes them: typed arrays as
    lists) read back: the image in [0, 1] ((H, W) or (H, W, 3)) and the maps (L, H + 1, g, g) as the page draws
    them (as_drawn)."""
    import json

    numbers = json.loads(text)
    shape = (numbers["height"], numbers["width"]) + ((3,) if numbers["channels"] == 3 else ())
    image = np.asarray(numbers["image"], np.uint8).reshape(shape) / 255
    maps = np.asarray(numbers["maps"], np.float32)
    return image, as_drawn(maps.reshape(numbers["layers"], numbers["heads"] + 1, numbers["grid"], numbers["grid"]))


def read_live_map(numbers: dict | str | list) -> np.ndarray:
    """A single map of a live view (a list, or {"map": list}, as JSON or not) read back: (g, g) as the page draws it
    (as_drawn)."""
    import json
    import math

    numbers = json.loads(numbers) if isinstance(numbers, str) else numbers
    values = np.asarray(numbers["map"] if isinstance(numbers, dict) else numbers, np.float64)
    g = math.isqrt(len(values))
    return as_drawn(values.reshape(g, g))


def read_live_grid(numbers: dict, shape: tuple[int, ...]) -> np.ndarray:
    """A grid's numbers for a live view (source.js: query, snapshot) read back: ``shape`` (L, H + 1, g, g) as the
    page draws them (as_drawn)."""
    return as_drawn(np.asarray(numbers["maps"], np.float32).reshape(shape))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m vit_demo ARGS`` from the repo, its output captured."""
    return subprocess.run([sys.executable, "-m", "vit_demo", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def mnist_subset(mnist_root: Path, folder: Path, train: int, test: int) -> Path:
    """A data dir with MNIST/raw/ holding the first ``train`` and ``test`` images of ``mnist_root``'s splits."""
    from vit_demo.data.datasets import load_split

    raw = folder / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for split, prefix, n in (("train", "train", train), ("test", "t10k", test)):
        images, labels = load_split("mnist", mnist_root, split, download=False)
        _write_idx(raw / f"{prefix}-images-idx3-ubyte.gz", images[:n, 0].numpy())
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte.gz", labels[:n].numpy())
    return folder


def mnist_test_digits(mnist_root: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first n test digits as uint8 (n, 28, 28) and their labels."""
    from vit_demo.data.datasets import load_split

    images, labels = load_split("mnist", mnist_root, "test", download=False)
    return images[:n, 0].numpy(), labels[:n].numpy()


def draw_on_canvas(digit: np.ndarray, canvas: int = 800, size: int = 300, at: tuple[int, int] = (50, 50),
                   ink: str = "black") -> Image.Image:
    """Paste an MNIST digit (white on black, 28x28) onto a sketchpad-like RGBA canvas, scaled to size px."""
    big = np.asarray(Image.fromarray(digit).resize((size, size), Image.BILINEAR), dtype=np.float32) / 255
    background = 1.0 if ink == "black" else 0.0
    grey = np.full((canvas, canvas), background, dtype=np.float32)
    y, x = at
    grey[y : y + size, x : x + size] = np.abs(background - big)
    rgba = np.dstack([grey] * 3 + [np.ones_like(grey)])
    return Image.fromarray((rgba * 255).round().astype(np.uint8), "RGBA")


def _pen(width: int) -> dict:
    return {"fill": "black", "width": width}


# Digits drawn with strokes, on a 100x100 grid, the way people draw them with a mouse.
STROKES = {
    "0": lambda d, w: d.ellipse((25, 10, 75, 90), outline="black", width=w),
    "1": lambda d, w: d.line([(45, 20), (55, 10), (55, 90)], **_pen(w), joint="curve"),
    "2": lambda d, w: (d.arc((25, 10, 75, 55), 180, 40, fill="black", width=w),
                       d.line([(70, 45), (25, 90), (78, 90)], **_pen(w), joint="curve")),
    "3": lambda d, w: (d.arc((28, 10, 72, 50), 200, 90, fill="black", width=w),
                       d.arc((25, 48, 75, 92), 270, 160, fill="black", width=w)),
    "4": lambda d, w: (d.line([(60, 90), (60, 10), (22, 65), (80, 65)], **_pen(w), joint="curve")),
    "5": lambda d, w: (d.line([(72, 10), (32, 10), (29, 48)], **_pen(w), joint="curve"),
                       d.arc((24, 38, 76, 92), 220, 150, fill="black", width=w)),
    "6": lambda d, w: (d.arc((25, 8, 95, 120), 180, 270, fill="black", width=w),
                       d.ellipse((25, 50, 72, 92), outline="black", width=w)),
    "7": lambda d, w: d.line([(25, 12), (75, 12), (42, 90)], **_pen(w), joint="curve"),
    "8": lambda d, w: (d.ellipse((30, 8, 70, 48), outline="black", width=w),
                       d.ellipse((25, 48, 75, 92), outline="black", width=w)),
    "9": lambda d, w: (d.ellipse((28, 10, 72, 50), outline="black", width=w),
                       d.line([(72, 30), (68, 90)], **_pen(w))),
}


def pixel_bomb_png(width: int = 40_000, height: int = 40_000) -> bytes:
    """A tiny PNG whose header claims width x height pixels."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b"")


def draw_digit(digit: str, canvas: int, box: tuple[int, int, int], pen: float) -> Image.Image:
    """Draw a digit with strokes in a box (left, top, size) of a white canvas; pen is a fraction of the box."""
    left, top, size = box
    sketch = Image.new("L", (100, 100), 255)
    STROKES[digit](ImageDraw.Draw(sketch), max(1, round(pen * 100)))
    image = Image.new("RGB", (canvas, canvas), "white")
    image.paste(sketch.resize((size, size), Image.LANCZOS).convert("RGB"), (left, top))
    return image


@pytest.fixture(scope="session")
def snapshot_weights(mnist_root, tmp_path_factory) -> Path:
    """A weights root (for VIT_DEMO_WEIGHTS) whose mnist/ is a real, short training run that kept a snapshot after
    each of its first 3 of 4 epochs (800 training images, 100 test images: what it learns does not matter, its
    snapshots do; not calibrated, which tests/test_cli.py's training run checks; some 10 s), and whose cifar10/ is the
    shipped model."""
    from vit_demo.training import run
    from vit_demo.weights import WEIGHTS_ROOT

    root = tmp_path_factory.mktemp("weights")
    run.main(["--dataset", "mnist", "--data-dir", str(mnist_root), "--out", str(root / "mnist"),
               "--checkpoint-dir", str(root.parent / f"{root.name}-ckpt"), "--train-limit", "800",
               "--test-limit", "100", "--epochs", "4", "--snapshots", "3", "--lr", "2e-3", "--warmup-epochs",
               "0.3", "--batch-size", "64", "--calibration-images", "0", "--no-progress"])
    (root / "cifar10").symlink_to(WEIGHTS_ROOT / "cifar10")
    return root


@pytest.fixture(scope="session")
def app_url():
    """The real app (python app.py) running on a free local port; stopped after the tests."""
    with serving(REPO / "app.py") as server:
        yield server.url


@dataclasses.dataclass
class BusyApp:
    """The app with every worker busy and its queue full: the next request is one too many."""

    url: str
    client: object  # a gradio_client Client
    jobs: list  # the requests holding the workers and filling the queue (gradio_client Jobs)
    release: threading.Event  # set it, and the held requests go on
    seven: Path  # a drawing of a 7
    hold_views: threading.Event  # set it, and the server holds the page's requests for an image's views too


@pytest.fixture
def busy_app(monkeypatch, tmp_path):
    """The app itself, in this process, with a queue of 2: both workers held busy and 2 requests waiting."""
    import httpx
    import torch
    from gradio_client import Client, handle_file

    from vit_demo.app import api, demo as app, serving

    seven = tmp_path / "seven.png"
    draw_digit("7", 300, (20, 20, 260), 0.08).save(seven)
    threads, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled  # the server's tuning, undone after
    started, release, hold_views = threading.Semaphore(0), threading.Event(), threading.Event()

    def held(work):  # the model's work, in a worker that waits, as if every image took long
        def wait_then_work(*args, **kwargs):
            started.release()
            assert release.wait(60)
            return work(*args, **kwargs)
        return wait_then_work

    run_forward, held_forward = app.forward, held(app.forward)

    def forward(request):  # the page's server function (?model=server): its views' numbers held, the pen's not
        views = isinstance(request, dict) and "cls_attention" in (request.get("outputs") or ["cls_attention"])
        return (held_forward if views and hold_views.is_set() else run_forward)(request)

    monkeypatch.setattr(app, "forward", forward)  # (before the page is built: it hands the page this function)
    demo = app.launch(queue_size=2, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                      quiet=True)
    monkeypatch.setattr(api, "predict", held(api.predict))  # the API's (after the warm-up, which it would hold)
    client = Client(demo.local_url, verbose=False)
    try:
        jobs = []
        for _ in range(serving.WORKERS):
            jobs.append(client.submit(handle_file(str(seven)), "mnist", api_name="/classify"))
            assert started.acquire(timeout=30)  # this one is running, alone
        jobs += [client.submit(handle_file(str(seven)), "mnist", api_name="/classify") for _ in range(2)]
        deadline = time.monotonic() + 30
        while httpx.get(f"{demo.local_url}gradio_api/queue/status").json()["queue_size"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield BusyApp(demo.local_url, client, jobs, release, seven, hold_views)
    finally:
        release.set()
        client.close()
        demo.close()
        torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = onednn


# The browser tests' Chromium (Debian's, as Playwright drives it) and what they do in the app's page.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, driven by Playwright (skipped, saying why, where either is missing)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@contextlib.contextmanager
def app_page(browser, url: str, width: int = 1400, height: int | None = None, ready_timeout: float = 30_000,
             init_script: str | None = None):
    """A fresh browser page on the app at ``url``, noting any request to another server and any console error, and
    the first answer (``page.first_answer``, its status and headers: app.py's starting page during a cold start),
    once the canvas is ready (``ready_timeout`` ms); ``init_script`` runs in the page before its own scripts."""
    context = browser.new_context(viewport={"width": width, "height": height or (1000 if width > 600 else 844)},
                                  accept_downloads=True)
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    page.outside_requests = []
    page.console_errors = []
    page.requests_made = []  # every call the page makes to the server, to count what an interaction costs
    local = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(url))
    page.on("request", lambda r: None if r.url.startswith((local, "data:", "blob:"))
            else page.outside_requests.append(r.url))
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: None if "/file=" in r.url  # a file it loads (a graph, a picture): not a call
            else page.requests_made.append(r.url))
    page.first_answer = page.goto(url)
    page.wait_for_selector("#canvas canvas.vd-draw[data-ready]", timeout=ready_timeout)  # its script is listening
    try:
        yield page
    finally:
        context.close()


def draw(page, points, steps=3, pause_ms: float = 0):
    """Draw one stroke through points given as fractions of the canvas (scrolled into view first), pausing
    ``pause_ms`` at each point (a hand's pace: the canvas reads the drawing while the pen is down from a quarter
    second into the stroke)."""
    canvas = page.locator("#canvas canvas.vd-draw")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    xy = [(box["x"] + fx * box["width"], box["y"] + fy * box["height"]) for fx, fy in points]
    page.mouse.move(*xy[0])
    page.mouse.down()
    for x, y in xy[1:]:
        page.mouse.move(x, y, steps=steps)
        if pause_ms:
            page.wait_for_timeout(pause_ms)
    page.mouse.up()


def small_texts(page, under: float = 18) -> list:
    """The texts on screen (in the viewport, laid out) whose type is smaller than ``under`` px: [(px, text)]."""
    return page.evaluate("""(under) => { const found = [];
        const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        while (walk.nextNode()) {
          const text = walk.currentNode.textContent.trim(), element = walk.currentNode.parentElement;
          if (!text || !element?.offsetParent) continue;
          const box = element.getBoundingClientRect(), px = parseFloat(getComputedStyle(element).fontSize);
          if (box.bottom > 0 && box.top < innerHeight && px < under) found.push([px, text.slice(0, 40)]);
        }
        return found; }""", under)


def _next_image(page, panel: str, before: str | None, timeout: float = 60_000) -> None:
    """Wait until tab ``panel`` shows an image other than the one keyed ``before`` (None: none), read and drawn."""
    page.wait_for_function("""([panel, before]) => { const live = window.vdLive?.[panel];
        return live && !live.reading && (live.state?.key ?? null) !== before; }""", arg=[panel, before],
                           timeout=timeout)
    page.wait_for_timeout(400)  # (its views and the prediction laid out)


def talk_heights(page, panel: str) -> dict[str, int]:
    """Talk mode on tab ``panel`` (chosen here) in each state it can be in, the page's height in each (its
    scrollHeight: more than the window's means a part is under the projector's edge): the image it shows first
    answered, raw attention (a key), each "Also try" (a warning over a guess, the lesson under the row), no image."""
    key = f"() => window.vdLive?.[{panel!r}]?.state?.key ?? null"
    height = "() => document.documentElement.scrollHeight"
    page.click(f"[data-tab={panel}]")
    page.wait_for_function(f"() => ({key})() !== null", timeout=60_000)
    page.wait_for_timeout(400)
    heights = {"answered": page.evaluate(height)}
    page.keyboard.press("ArrowLeft")
    page.wait_for_function(f"() => !document.getElementById('{panel}-selected').hidden")
    heights["raw attention"] = page.evaluate(height)
    tries = page.locator(f"#tab-{panel} .vd-tries button")
    for i in range(tries.count()):
        before = page.evaluate(key)
        tries.nth(i).click()
        _next_image(page, panel, before)
        notice = page.locator(f"#{panel}-notice").is_visible()
        heights[f"also try {i + 1}{' (a warning)' if notice else ''}"] = page.evaluate(height)
    page.keyboard.press("c")
    page.wait_for_function(f"() => ({key})() === null")
    page.wait_for_timeout(400)
    heights["no image"] = page.evaluate(height)
    return heights


def check_talk_mode_fits(page) -> None:
    """Talk mode at 1280x720, the app's or the static page's: "?" lists the keys, → walks the layers
    (``check_talk_keys``), and on each tab, in each state (``talk_heights``; a warning among the digit tab's),
    nothing lies under the projector's edge."""
    check_talk_keys(page)
    for panel in ("digit", "photo"):
        heights = talk_heights(page, panel)
        assert len(heights) >= 5 and max(heights.values()) <= 720, (panel, heights)
        assert panel != "digit" or any("warning" in state for state in heights), heights
    assert page.console_errors == []


def check_talk_keys(page, panel: str = "digit") -> None:
    """Talk mode's help and layer keys on tab ``panel``, from its first map: "?" lists the keys (so does the "?" at
    the end of the keys' line), Escape hides them; each → steps one layer from layer 1, the large view saying which
    ("layer 2 of 6") and the layer control lit up."""
    page.click(f"[data-tab={panel}]")
    page.wait_for_function(f"() => window.vdLive?.[{panel!r}]?.state", timeout=60_000)
    assert page.locator("#vd-keys-help").is_visible() and not page.locator("#vd-help").is_visible()
    page.keyboard.press("?")
    help_box = page.locator("#vd-help")
    assert help_box.is_visible()
    said = help_box.inner_text()
    for key, words in (("←", "layer"), ("→", "layer"), ("↑", "head"), ("↓", "head"), ("c", "clear"),
                       ("?", "these keys"), ("Esc", "hide")):
        assert key in said and words in said, (key, said)
    box, size = help_box.bounding_box(), page.viewport_size
    assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= size["width"]
    assert box["y"] + box["height"] <= size["height"]
    assert page.locator("#vd-keys-help").get_attribute("aria-expanded") == "true"
    page.keyboard.press("Escape")
    assert not help_box.is_visible()
    page.click("#vd-keys-help")
    assert help_box.is_visible()
    page.keyboard.press("?")
    assert not help_box.is_visible()

    assert page.locator(f"#{panel}-first").is_visible() and not page.locator(f"#{panel}-selected").is_visible()
    layers = int(page.get_attribute(f"#{panel}-layer input[type=range]", "max"))
    caption = f"#{panel}-selected .vd-caption"
    for layer in (1, 2, 3):
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"""() => document.querySelector({caption!r}).innerText.includes(
            'layer {layer} of {layers},')""")
        assert page.input_value(f"#{panel}-layer input[type=range]") == str(layer)
        assert page.input_value(f"#{panel}-layer input[type=number]") == str(layer)
        assert "vd-stepped" in page.get_attribute(f"#{panel}-layer", "class")  # lit up, for the room
        assert page.locator(f"#{panel}-selected canvas").is_visible()


def top_bars(page, panel: str) -> list[float]:
    """The widths (px) of tab ``panel``'s probability bars, the top class's first: the track, then its fill."""
    page.wait_for_function(f"() => document.querySelector('#{panel}-label .vd-prob-row')", timeout=60_000)
    return page.evaluate(f"""() => {{ const bar = document.querySelector('#{panel}-label .vd-prob');
        return [bar.getBoundingClientRect().width, bar.firstElementChild.getBoundingClientRect().width]; }}""")


FIRST_SCREEN_WORDS = 90  # at most, on each tab's first screen at 1400x900: a story told in a few dozen words


def visible_words(page) -> list[str]:
    """The words on screen (in the viewport, laid out, not hidden), in page order: what a reader sees at once."""
    return page.evaluate("""() => { const words = [];
        const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        while (walk.nextNode()) {
          const element = walk.currentNode.parentElement;
          if (!element?.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
          const range = document.createRange();
          range.selectNodeContents(walk.currentNode);
          const box = range.getBoundingClientRect();
          if (box.width === 0 || box.bottom <= 0 || box.top >= innerHeight) continue;
          words.push(...walk.currentNode.textContent.split(/\\s+/).filter(w => /[\\p{L}\\p{N}]/u.test(w)));
        }
        return words; }""")


def label_text(page, panel: str = "digit") -> str:
    """A tab's top label now, or "" when there is none (read in one step: the element may vanish at any time)."""
    label = f"#{panel}-label .vd-top-class"
    return page.evaluate(f"() => document.querySelector({label!r})?.innerText.trim() ?? ''")


def views_label(page, panel: str = "digit") -> str | None:
    """The label of the image a tab's views show ("" for none), or None while the label shown is a reading of a
    drawing whose views have not come yet (the pen is down, or its last answer is on its way)."""
    return page.evaluate(f"""() => {{ const live = window.vdLive?.[{panel!r}];
        return live?.reading ? null : live?.state?.numbers.label ?? ""; }}""")


def wait_for_label(page, expected: str, timeout: float = 20, panel: str = "digit", views: bool = True) -> float:
    """Wait until a tab's label is ``expected`` and, with ``views``, its views show that image too; the seconds."""
    started = time.perf_counter()
    while label_text(page, panel) != expected or (views and views_label(page, panel) != expected):
        assert time.perf_counter() - started < timeout, f"label is {label_text(page, panel)!r}, expected {expected!r}"
        time.sleep(0.02)
    return time.perf_counter() - started


CURVE_COLOURS = {"attention": (31, 119, 180), "rollout": (255, 127, 14), "relevance": (44, 160, 44),
                 "random": (127, 127, 127)}  # assets/page/views/faithfulness.js: figures.py's colours


def assert_curves_drawn(page, elem_id: str) -> None:
    """The faithfulness view ``elem_id`` shows its chart: every kind's curve in its colour in both panels (deletion
    above, insertion below), a key row per kind with its two areas, and the verdict in words."""
    import base64
    import io

    url = page.evaluate(f"() => document.querySelector('#{elem_id} canvas').toDataURL('image/png')")
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"), dtype=int)
    half = pixels.shape[0] // 2
    for kind, colour in CURVE_COLOURS.items():
        near = np.abs(pixels - colour).sum(axis=2) < 40
        assert near[:half].sum() > 30 and near[half:].sum() > 30, kind
    rows = page.locator(f"#{elem_id} .vd-faithfulness-key li[data-kind]")
    assert rows.count() == 4 and "mean of 8" in rows.nth(3).inner_text()
    assert page.locator(f"#{elem_id} .vd-faithfulness-verdict").inner_text().strip()


def node_major() -> int:
    """The major version of the Node.js on the PATH (0: none). The page's modules run under 20 or later, and so does
    Gradio's server-side rendering."""
    node = shutil.which("node")
    if not node:
        return 0
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout  # v20.20.2
    return int(out.lstrip("v").split(".")[0] or 0)


# ---- A folder for a Hugging Face Space, against the Hub's rules (tests/test_space.py, tests/test_static_space.py)


def files_in(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(folder).parts)


def git_binaries(root, tmp_path) -> set[str]:
    """The files under ``root`` that git itself takes for binary (its numstat shows "-"), asked from outside any
    repository so that no .gitattributes weighs in."""
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    out = subprocess.run(["git", "diff", "--no-index", "--numstat", "-z", str(empty), str(root)], cwd=tmp_path,
                         capture_output=True, text=True).stdout
    fields = out.split("\0")  # "added\tdeleted\t", the old path (/dev/null), the new path; again for each file
    return {os.path.relpath(new, root) for stat, _, new in zip(fields[0::3], fields[1::3], fields[2::3])
            if stat.startswith("-\t")}


def lfs_filters(root, paths, git_dir=None) -> dict[str, str]:
    """``git check-attr filter`` for ``paths`` in the work tree ``root`` (a throwaway git dir where it is none)."""
    where = ["--git-dir", str(git_dir), "--work-tree", str(root)] if git_dir else []
    out = subprocess.run(["git", *where, "check-attr", "filter", "--stdin"], cwd=root, input="\n".join(paths),
                         capture_output=True, text=True, check=True).stdout
    return dict(line.rsplit(": filter: ", 1) for line in out.splitlines())
