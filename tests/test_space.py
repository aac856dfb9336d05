"""The Space's folder (``python -m vit_demo space DIR``): what it holds, against the Hub's rules, and its own app.py
started the way a ZeroGPU Space starts it, then used through /classify and in Chromium, with no request leaving the
page."""

import http.server
import importlib.util
import json
import os
import subprocess
import threading
import urllib.parse

import gradio
import pytest
import yaml
from common import client
from conftest import (PHOTOS, REPO, app_page, draw, draw_digit, files_in, git_binaries, lfs_filters, node_major, run_cli,
                      serving, wait_for_label)
from gradio_client import handle_file
from packaging.requirements import Requirement
from packaging.version import Version

from vit_demo.app import zerogpu
from vit_demo.deploy import space
SPACE = "someone/vit-demo"
HUB_COLOURS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}  # the Spaces config reference


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The Space's folder, written by the command line."""
    folder = tmp_path_factory.mktemp("space") / "vit-demo"
    result = run_cli("space", str(folder))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["space"] == str(folder)
    return folder


def requirements(folder) -> dict[str, Requirement]:
    lines = (folder / "requirements.txt").read_text(encoding="utf-8").splitlines()
    reqs = [Requirement(line.split("#", 1)[0]) for line in lines if line.split("#", 1)[0].strip()]
    return {r.name.lower(): r for r in reqs}


def test_the_folder_holds_what_a_space_needs_and_nothing_else(bundle):
    assert {p.name for p in bundle.iterdir()} == set(space.CONTENTS)
    files = files_in(bundle)
    assert not [f for f in files if "__pycache__" in f or f.endswith((".pyc", ".pyi"))]
    assert not [f for f in files if f.startswith("weights/") and f.endswith(".png")]  # pictures for people only
    for needed in ("app.py", "vit_demo/app/demo.py", "vit_demo/page/assets/app.css", "weights/mnist/model.safetensors",
                   "weights/cifar10/model.safetensors", "examples/digits/7.png", "examples/photos/ship.png"):
        assert needed in files
    assert (bundle / "app.py").read_bytes() == (REPO / "app.py").read_bytes()


def test_its_front_matter_matches_the_gradio_pin_and_zerogpu(bundle):
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(readme.split("---\n")[1])
    pins = {str(r.specifier).removeprefix("==") for r in (requirements(bundle)["gradio"], requirements(REPO)["gradio"])}
    assert pins == {meta["sdk_version"]} == {gradio.__version__}  # the release these tests ran on
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and (bundle / meta["app_file"]).is_file()
    assert meta["python_version"] in space.ZEROGPU_PYTHON
    assert len(meta["short_description"]) <= 60 and {meta["colorFrom"], meta["colorTo"]} <= HUB_COLOURS
    assert "suggested_hardware" not in meta  # the Hub's list has no ZeroGPU flavour; the Space's settings choose it
    assert space.MARKER in readme


def test_every_binary_goes_through_lfs_xet(bundle, tmp_path):
    binaries = git_binaries(bundle, tmp_path)
    assert {"weights/cifar10/model.safetensors", "examples/photos/ship.png"} <= binaries
    needing = {f for f in files_in(bundle) if space.needs_lfs(bundle / f)}
    assert binaries <= needing  # the bundle's own rule finds every file git takes for binary
    git_dir = tmp_path / "git"
    subprocess.run(["git", "init", "-q", str(git_dir)], check=True)
    filters = lfs_filters(bundle, sorted(needing), git_dir / ".git")
    assert {f: filters[f] for f in needing if filters[f] != "lfs"} == {}
    big = [f for f in files_in(bundle) if (bundle / f).stat().st_size >= space.HUB_MAX_PLAIN_BYTES]
    # the weights the photo model's four graphs share (10.5 MiB) and its weights (10.3 MiB)
    assert big == ["weights/cifar10/graphs.data", "weights/cifar10/model.safetensors"]
    assert all(filters[f] == "lfs" for f in big)


def test_this_repository_puts_every_binary_through_lfs_xet_too(tmp_path):
    """A fresh copy of the repository (its files, no history) pushed with git is accepted: .gitattributes covers
    every binary file it tracks."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split("\0")
    needing = [f for f in tracked if f and (REPO / f).is_file() and space.needs_lfs(REPO / f)]
    assert "weights/cifar10/model.safetensors" in needing
    filters = lfs_filters(REPO, needing)
    assert {f: filters[f] for f in needing if filters[f] != "lfs"} == {}


def test_torch_is_a_release_zerogpu_supports_and_the_repository_admits_it(bundle):
    ours, theirs = requirements(REPO), requirements(bundle)
    torch_pin = str(theirs["torch"].specifier)
    assert torch_pin.startswith("==") and torch_pin[2:] in space.ZEROGPU_TORCH
    import torch
    installed = Version(torch.__version__).base_version  # the torch these tests run on, e.g. 2.14.1
    for release in (space.ZEROGPU_TORCH[0], torch_pin[2:], installed):  # the oldest ZeroGPU's, the Space's, ours
        assert ours["torch"].specifier.contains(release), release
    assert "torchvision" not in theirs
    assert set(theirs) == set(ours) - {"torchvision"}
    assert all(theirs[name] == ours[name] for name in theirs if name != "torch")


def test_model_work_goes_through_spaces_gpu_on_zerogpu_only_when_the_models_are_on_its_gpu(bundle, monkeypatch):
    assert "spaces.GPU(" in (bundle / "vit_demo" / "app" / "zerogpu.py").read_text(encoding="utf-8")
    assert zerogpu.model_work(len) is len  # not on ZeroGPU: the function as it is
    through_gpu = []

    class FakeSpaces:  # what spaces.GPU does on ZeroGPU: a wrapper that asks for a GPU
        @staticmethod
        def GPU(duration):  # noqa: N802 (the package's name)
            def decorate(fn):
                def on_gpu(*args):
                    through_gpu.append(duration)
                    return fn(*args)
                return on_gpu
            return decorate

    monkeypatch.setattr(zerogpu, "spaces", FakeSpaces)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.delenv("VIT_DEMO_DEVICE", raising=False)
    work = zerogpu.model_work(lambda x: x + 1)
    assert zerogpu.app_device() == "cpu" and work(1) == 2 and through_gpu == []  # ZeroGPU: the CPU by default
    monkeypatch.setenv("VIT_DEMO_DEVICE", "cuda")
    assert work(1) == 2 and through_gpu == [zerogpu.GPU_SECONDS]
    monkeypatch.delenv("SPACES_ZERO_GPU")
    assert zerogpu.app_device() == "cuda" and work(1) == 2 and len(through_gpu) == 1


def test_a_folder_it_did_not_write_is_left_alone(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    result = run_cli("space", str(a_file))
    assert result.returncode == 2 and "is a file" in result.stderr and a_file.read_text() == "mine"
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / "mine.txt").write_text("mine")
    result = run_cli("space", str(folder))
    assert result.returncode == 2 and "--force" in result.stderr and result.stdout == ""
    assert sorted(p.name for p in folder.iterdir()) == [".git", "mine.txt"]
    with pytest.raises(space.SpaceError, match="this repository's own files"):
        space.write_space(REPO / "weights" / "space")
    assert not (REPO / "weights" / "space").exists()
    space.write_space(folder, force=True)  # everything replaced but the clone's .git
    assert {p.name for p in folder.iterdir()} == {".git", *space.CONTENTS}


def test_an_earlier_bundle_is_rewritten_whole(tmp_path):
    folder = tmp_path / "space"
    space.write_space(folder)
    before = files_in(folder)
    (folder / "stale.txt").write_text("left over")
    (folder / "weights" / "mnist" / "model.safetensors").write_bytes(b"\0broken")
    record = space.write_space(folder)
    assert files_in(folder) == before and record["files"] == len(before)
    meta = yaml.safe_load((folder / "README.md").read_text(encoding="utf-8").split("---\n")[1])
    assert (record["sdk_version"], record["python_version"]) == (meta["sdk_version"], meta["python_version"])
    shipped = REPO / "weights" / "mnist" / "model.safetensors"
    assert (folder / "weights" / "mnist" / "model.safetensors").read_bytes() == shipped.read_bytes()


class FakeZeroGPU(http.server.BaseHTTPRequestHandler):
    """ZeroGPU's device API, as the ``spaces`` package calls it, on the loopback: the startup report is taken, any
    request for a GPU is refused and kept (the app's models stay on the CPU there)."""

    calls: list[str] = []

    def do_POST(self):  # noqa: N802 (the name http.server calls)
        FakeZeroGPU.calls.append(urllib.parse.urlsplit(self.path).path)
        self.send_response(200 if self.path.startswith("/startup-report") else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def zerogpu_api():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeZeroGPU)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FakeZeroGPU.calls = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_folder_starts_as_a_zerogpu_space_does_and_works_offline(bundle, browser, zerogpu_api, tmp_path):
    """Its app.py from the folder itself, with a Space's variables, SSR through Node and the spaces package on
    ZeroGPU (its device API faked; Gradio asked to put every handler through @spaces.GPU): the starting page opens
    the app, a pen stroke gets its label (in the page, and with ?model=server on the server), /classify reads a
    drawing and a photo, the models run on the CPU (no GPU asked for) and the page calls no other server."""
    if node_major() < 20:
        message = "SSR needs Node 20 or later on the PATH (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    assert importlib.util.find_spec("spaces"), "the spaces package is missing (requirements-dev.txt)"
    env = {"SYSTEM": "spaces", "SPACE_ID": SPACE, "SPACE_AUTHOR_NAME": SPACE.split("/")[0],
           "SPACE_REPO_NAME": SPACE.split("/")[1], "SPACE_HOST": "someone-vit-demo.hf.space", "GRADIO_SSR_MODE": "True",
           "SPACES_ZERO_GPU": "true", "SPACES_ZERO_DEVICE_API_URL": zerogpu_api, "SPACES_GRADIO_AUTO_WRAP": "true",
           "ZEROGPU_OFFLOAD_DIR": str(tmp_path / "offload"), "VIT_DEMO_DEVICE": "auto", "PYTHONPATH": "",
           "PYTHONUNBUFFERED": "1"}  # its output in the log as it prints it
    with serving(bundle / "app.py", until_200=False, cwd=bundle, **env) as server:
        with app_page(browser, server.url, ready_timeout=180_000) as page:
            starting = page.first_answer  # app.py's starting page, which opened the app by itself
            assert starting.status == 503 and starting.headers["retry-after"] == "1"
            assert "with SSR" in server.output()  # Node renders the page, in front of Python
            draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])  # a 7
            wait_for_label(page, "7")
            assert "ms in this page" in page.locator("#digit-info").inner_text()
            page.goto(server.url + "?model=server")  # the server's forward pass: on the CPU, not ZeroGPU's GPU
            page.wait_for_selector("#canvas canvas.vd-draw[data-model=server]", timeout=60_000)
            draw(page, [(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)])
            wait_for_label(page, "7")
            assert "ms on the server" in page.locator("#digit-info").inner_text()
            seven = tmp_path / "seven.png"
            draw_digit("7", 300, (20, 20, 260), 0.08).save(seven)
            api = client(server.url)
            assert api.predict(handle_file(str(seven)), "mnist", api_name="/classify")["label"] == "7"
            assert api.predict(handle_file(str(PHOTOS / "ship.png")), "cifar10", api_name="/classify")["label"] == "ship"
            assert page.outside_requests == [], "the page must not call any outside server"
        assert FakeZeroGPU.calls == ["/startup-report"]  # GPU functions registered, none called
