"""``python -m vit_demo static DIR``: the page as a static Hugging Face Space (``sdk: static``), the model run in the
visitor's browser.

Since 2026 a free account can host static Spaces only (docs/spaces.md). This folder needs no server of ours: the page
(vit_demo/page: the layout, the same the app serves) runs the exported graphs (vit_demo/onnx/export.py) with the
vendored onnxruntime-web (WebAssembly), every number made by the page itself (assets/page/source.js) and export for
slides too (assets/page/export.js).

The folder holds index.html, the page's JS and CSS, the graphs of both models (and their training snapshots'), the
Inside-the-model tab's pictures, sw.js (the service worker: once the page has answered its first image it keeps every
file of the site in the browser, so that it reloads and runs with the network gone), README.md with the Space's front
matter, and a .gitattributes that puts every binary through LFS/Xet.
Publish it with ``hf upload USER/NAME DIR --repo-type space``.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Sequence
from pathlib import Path

from vit_demo.app.service import ADDED, add_model, model_problem, weights_folder
from vit_demo.deploy.space import (README, bundle_files, bundle_record, from_template, replace_folder,
                                   write_gitattributes)
from vit_demo.onnx.export import GRAPH_WEIGHTS_FILE, expected_metadata, stale_graphs
from vit_demo.page.layout import TABS, tabs
from vit_demo.page.site import HOST, STYLES, build_site, locate, models_folder
from vit_demo.progress import Steps
from vit_demo.weights import CONFIG_FILE, WeightsError

MARKER = "<!-- Written by `python -m vit_demo static`: running it again rewrites this folder. -->"
SHORT_DESCRIPTION = "Draw a digit: a ViT in your browser shows where it looks"  # the Hub takes 60 characters
PAGE = "index.html"
OFFLINE = "sw.js"  # the service worker that serves the site from what the browser keeps (offline), at the root
COPIED = ("page/", "vendor/onnxruntime-web/", "vendor/gifenc/", "examples/photos/", "examples/outside/photos/",
          "examples/large-photos/")
# onnxruntime-web's WebGPU build (model.js), kept for offline use with a tab whose model it reads
WEBGPU_FILES = ("vendor/onnxruntime-web/ort.webgpu.bundle.min.mjs",
                "vendor/onnxruntime-web/ort-wasm-simd-threaded.asyncify.wasm.gz")


class StaticError(ValueError):
    """The static folder can't be written; the message says why and what to do."""


def build(target: Path, progress: Steps | None = None) -> None:
    """Write the static folder's contents into the empty folder ``target``, saying its three steps to
    ``progress``."""
    progress = progress or Steps()
    progress.step("laying out the page and drawing the Inside-the-model pictures")
    site = build_site(target)  # (its Inside pictures written in place)
    files = [*STYLES, OFFLINE]
    for folder in COPIED:
        files += [folder + p.relative_to(locate(site.roots, folder)).as_posix()
                  for p in sorted(locate(site.roots, folder).rglob("*")) if p.is_file()]
    for tab in tabs():
        folder = models_folder(tab.model)
        files += [folder + name for name in (*expected_metadata(weights_folder(tab.model)), GRAPH_WEIGHTS_FILE,
                                             CONFIG_FILE)]  # (its unfamiliar rule: description.page_rule)
    megabytes = sum(locate(site.roots, name).stat().st_size for name in files) / 1e6
    progress.step(f"copying {len(files)} files ({megabytes:.1f} MB): the page's scripts, onnxruntime-web, the examples "
                  "and every model's graphs")
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(locate(site.roots, name), target / name)
    progress.step(f"writing {PAGE}, {README} and .gitattributes")
    data = {**site.data, "offline": {"worker": OFFLINE, **offline_files(target, site.data["models"])}}
    site = dataclasses.replace(site, data=data)
    start = site.script(HOST, data="JSON.parse(document.getElementById('vd-page').textContent)")
    page = from_template("index.html", styles=STYLES, body=site.html, data=site.data_json(), start=start)
    (target / PAGE).write_text(page, encoding="utf-8")
    readme = from_template("static_README.md", app_file=PAGE, short_description=SHORT_DESCRIPTION, marker=MARKER)
    (target / README).write_text(readme, encoding="utf-8")  # front matter, then a short card
    write_gitattributes(target)


def offline_files(target: Path, models: dict) -> dict:
    """What the page keeps for offline use (host.js: offlineKeeper), of the files written in ``target`` so far, the
    page itself added: ``files`` and their ``bytes`` (the page's aside) once it has answered its first image, and
    ``tabs``, {tab: {files, bytes}}, those of an added model's tab once the tab is opened (its model folder, and
    WebGPU's runtime where it reads the model with it): a visitor who never opens ViT-B's tab keeps none of its 177 MB."""
    written = sorted(p.relative_to(target).as_posix() for p in bundle_files(target))
    shipped = {tab.prefix for tab in TABS}
    tabs = {prefix: sorted({f for f in written if f.startswith(model["folder"])} |
                           (set(WEBGPU_FILES) if model["gpu"] else set()))
            for prefix, model in models.items() if prefix not in shipped}
    apart = set(WEBGPU_FILES).union(*tabs.values())
    files = [f for f in written if f not in apart]

    def size(names: list[str]) -> int:
        return sum((target / name).stat().st_size for name in names)

    return {"files": ["./", PAGE, *files], "bytes": size(files),
            "tabs": {prefix: {"files": names, "bytes": size(names)} for prefix, names in tabs.items()}}


def write_static(folder: Path | str, force: bool = False, models: Sequence[str | Path] = (),
                 progress: Steps | None = None) -> dict:
    """Write the static Space into ``folder`` (created where needed; an earlier one, or with ``force`` any folder, is
    rewritten whole, keeping only a ``.git``), with a tab for each weights folder in ``models`` beside the shipped
    models' (service.add_model); return what was written, as one JSON-able record. Each step is said to
    ``progress``, if given, as it begins."""
    folder = Path(folder)
    try:
        for model in models:
            add_model(model)
    except WeightsError as exc:
        raise StaticError(f"{exc}. Nothing was written.") from None
    for tab in tabs():  # (checked before a step is said: what is refused is refused in one line)
        problem = model_problem(tab.model)
        stale = [] if problem else stale_graphs(weights_folder(tab.model))
        if stale:
            problem = (f"The {tab.model} graphs are missing or older than the weights ({', '.join(stale)}): make them "
                       f"with `python -m vit_demo onnx --model {ADDED.get(tab.model, tab.model)}`.")
        if problem:
            raise StaticError(f"{problem} Nothing was written.")
    progress = progress or Steps()
    progress.expect(3)  # build's steps
    try:
        replace_folder(folder, force, MARKER, functools.partial(build, progress=progress))
    except WeightsError as exc:
        raise StaticError(f"{exc} Nothing was written.") from None
    return {"static": str(folder), **bundle_record(folder), "serve": f"python -m http.server --directory {folder}",
            "deploy": f"hf upload USER/NAME {folder} --repo-type space"}
