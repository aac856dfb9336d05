"""Shared by the benchmark scripts: timing, percentiles, and Gradio servers started on free local ports."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def p50_p95(times: list[float]) -> tuple[float, float]:
    """Median and 95th percentile (the sample at rank 0.95 * (n - 1)) of a non-empty list."""
    times = sorted(times)
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def timed(fn: Callable[[], object], repeat: int, warmup: int = 3) -> tuple[float, float]:
    """Median and 95th-percentile wall time of ``fn`` in milliseconds, after a few warm-up calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return p50_p95(times)


def node_and_torch(median_of: str) -> None:
    """For the page-against-server benchmarks: exit unless Node is on the PATH, put torch on one thread (as the app's
    server functions run), and print what runs each side."""
    import shutil

    import torch

    if not shutil.which("node"):
        raise SystemExit("Node 20 or later must be on the PATH: the page's modules run under it")
    torch.set_num_threads(1)
    node = subprocess.run([shutil.which("node"), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"Node {node} (onnxruntime-web, WebAssembly, 1 thread); torch {torch.__version__}, 1 thread; "
          f"median of {median_of}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Server:
    process: subprocess.Popen
    url: str
    started: float  # time.perf_counter() when the process was started
    seconds_to_answer: float  # from starting the process to its first HTTP answer (app.py's starting page: a 503)
    seconds_to_200: float | None  # to its first HTTP 200: the app itself (None: not waited for)
    log: Any = None  # the file the server's output goes to

    def output(self) -> str:
        """What the server has printed so far (stdout and stderr); read in place, leaving the file's offset, which the
        server shares, where it is."""
        fd = self.log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def rss_mb(self) -> float:
        """The server process' resident memory now (Linux /proc), in MiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for process {self.process.pid}")


@contextlib.contextmanager
def serving(script: str | Path, timeout: float = 180, until_200: bool = True, cwd: str | Path | None = None,
            args: Sequence[str] = (), **env: str) -> Iterator[Server]:
    """Run ``python script *args`` from the repo root (or ``cwd``) on a free local port until it answers HTTP 200
    (or, with ``until_200=False``, until it answers at all); stop it on exit.

    Extra keyword arguments are environment variables for the server (the app runs on CPU unless
    VIT_DEMO_DEVICE says otherwise).
    """
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port), "VIT_DEMO_DEVICE": "cpu",
           "PYTHONPATH": str(REPO), **env}
    log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty server never blocks on it
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(script), *args], cwd=cwd or REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/"
    answered = None
    try:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    status = response.status
            except urllib.error.HTTPError as error:  # an answer all the same, such as the starting page's 503
                status = error.code
            except OSError:
                status = None
            if status is not None and answered is None:
                answered = time.perf_counter() - started
            if status == 200 or (answered is not None and not until_200):
                break
            if process.poll() is not None or time.perf_counter() - started > timeout:
                process.kill()
                process.wait()
                log.seek(0)
                raise RuntimeError(f"{script} did not start:\n{log.read()[-3000:]}")
            time.sleep(0.05)
        yield Server(process, url, started, answered, time.perf_counter() - started if status == 200 else None, log)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def example_drawings(folder: Path) -> list[Path]:
    """The ten example digits as drawings, written into ``folder``: dark ink on white, at the canvas' 112x112 (what a
    script sends ``/classify`` and ``/export`` with model ``mnist``)."""
    from PIL import Image, ImageOps

    paths = []
    for example in sorted((REPO / "examples" / "digits").glob("*.png")):
        path = folder / example.name
        ImageOps.invert(Image.open(example).convert("L")).resize((112, 112), Image.BILINEAR).save(path)
        paths.append(path)
    return paths


def example_photos() -> list[Path]:
    return sorted((REPO / "examples" / "photos").glob("*.png"))


def api_arguments(endpoint: str, model: str, path: Path) -> list:
    """gradio_client's arguments that send the image at ``path`` for ``model`` to the app's ``endpoint``: ``/classify``,
    or ``/export`` with its default view (where [CLS] looks: every layer and head)."""
    from gradio_client import handle_file

    from vit_demo.pictures.slides import CLS_GRID

    image = handle_file(str(path))
    return [image, model] if endpoint == "/classify" else [image, model, CLS_GRID, None, "mean", "", None]


def client(url: str):
    """A gradio_client Client for a local server.

    The servers here speak plain HTTP, so there is no certificate to verify; with verification on,
    each of the ~8 HTTP calls gradio_client makes per request builds a TLS context (~20 ms of CPU
    each on this machine), which made the client, not the server, the slowest part of a request.
    """
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=False)


def forward_request(model: str, image, depth: int, heads: int) -> dict:
    """What the page sends the app's server function ``forward`` (vit_demo/app/forward.py) for one preprocessed
    image's numbers, where the page can't run the model: ``model``'s graph, every head on, the outputs a new image
    needs. ``image``: (H, W) or (H, W, C) in [0, 1]."""
    import base64

    import numpy as np

    def tensor(array) -> dict:
        array = np.ascontiguousarray(array, dtype="<f4")
        return {"shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}

    image = np.asarray(image, dtype=np.float32)
    chw = image[None] if image.ndim == 2 else image.transpose(2, 0, 1)
    return {"model": model, "graph": "model.onnx", "outputs": ["logits", "cls_attention", "rollout", "query_attention",
                                                               "features"],
            "inputs": {"image": tensor(chw[None]), "heads_off": tensor(np.zeros((depth, heads))),
                       "mean_ablation": tensor(np.ones(1)), "query": tensor(-np.ones(1))}}


def page_source(model: str, calls: list[tuple[str, object]], tmp_path: Path, repeat: int = 1,
                verdicts: list[dict] = (), example: Path | None = None) -> dict:
    """A tab's source under Node, as the page runs it (tests/page_source.mjs): each call (method, request) asked
    ``repeat`` times, and the page's verdict on each of ``verdicts``: {answers, ms, texts}. ``example``: the image
    the tab starts with (default: the app's)."""
    import json
    import shutil

    from vit_demo.app.service import weights_folder
    from vit_demo.page.description import description

    examples = REPO / "examples"
    example = example or {"mnist": examples / "digits" / "2.png", "cifar10": examples / "photos" / "horse.png"}[model]
    described = description(model, "", "", weights_folder(model).resolve().as_uri() + "/", example)
    source, answer = Path(tmp_path) / "in.json", Path(tmp_path) / "out.json"
    source.write_text(json.dumps({"model": described, "calls": [{"method": m, "request": r} for m, r in calls],
                                  "repeat": repeat, "verdicts": list(verdicts)}))
    subprocess.run([shutil.which("node"), str(REPO / "tests" / "page_source.mjs"), str(source), str(answer)],
                   check=True, timeout=900, cwd=REPO)
    return json.loads(answer.read_text())
