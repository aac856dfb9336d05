"""``python -m vit_demo space DIR``: write the folder a Hugging Face Space needs, and nothing else.

The Hub refuses a push that holds a binary file not stored through LFS/Xet, or any file over 10 MiB, and it checks
every commit of the history pushed: this repository, whose history holds its weights and pictures as plain git
files, can't be pushed to a Space as it is. The folder written here is uploaded instead, its files only (no
history), by the Hub's own CLI, which stores each binary file through Xet:

    hf upload USER/NAME DIR --repo-type space

It holds app.py, the vit_demo package, the shipped weights and the example images; requirements.txt (the app's
runtime requirements, torch pinned to a release ZeroGPU supports); README.md (the Space's front matter and a short
card); and a .gitattributes that puts every binary file through LFS/Xet, so that a clone of the Space pushed with
git is accepted too. docs/spaces.md says why, with the Hub's rules.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import jinja2

from vit_demo.atomic import KEEP
from vit_demo.weights import WeightsError, own_weights_folder, read_metrics

REPO = Path(__file__).resolve().parents[2]
APP_FILE = "app.py"
PACKAGE = "vit_demo"
WEIGHTS = "weights"
EXAMPLES = "examples"
REQUIREMENTS = "requirements.txt"
README = "README.md"
GITATTRIBUTES = ".gitattributes"
CONTENTS = (APP_FILE, PACKAGE, WEIGHTS, EXAMPLES, REQUIREMENTS, README, GITATTRIBUTES)  # what a bundle holds
MARKER = "<!-- Written by `python -m vit_demo space`: running it again rewrites this folder. -->"

# The releases the Hub's ZeroGPU page lists as supported (2026): torch and Python.
ZEROGPU_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")
ZEROGPU_PYTHON = ("3.10", "3.12")
SPACE_TORCH = ZEROGPU_TORCH[-1]
SPACE_PYTHON = "3.12"
SHORT_DESCRIPTION = "Draw a digit, see what each layer and head of a ViT looks at"  # the Hub takes 60 characters

HUB_MAX_PLAIN_BYTES = 10 * 1024 * 1024  # the Hub refuses a file this large outside LFS/Xet, binary or not
LFS_ATTRIBUTES = "filter=lfs diff=lfs merge=lfs -text"
SKIPPED_DIRS = {"__pycache__"}
SKIPPED_SUFFIXES = {".pyc", ".pyo", ".pyi"}  # compiled modules; the type stubs Gradio writes beside modules
SKIPPED_IN_WEIGHTS = {".png"}  # training curves and reliability diagrams: pictures for people, not read by the app


class SpaceError(ValueError):
    """A folder the bundle can't be written into; the message says why and what to do."""


def needs_lfs(path: Path) -> bool:
    """Whether the Hub accepts ``path`` only through LFS/Xet: any file of 10 MiB or more, or a binary file: a NUL
    byte in its first 8,000 bytes (git's own rule), or bytes that are not UTF-8 text."""
    if path.stat().st_size >= HUB_MAX_PLAIN_BYTES:
        return True
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return b"\0" in data[:8000]


def bundle_files(root: Path) -> list[Path]:
    """The files a bundle written into ``root`` holds (a clone's .git aside)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts)


def bundle_record(root: Path) -> dict:
    """How many files the bundle in ``root`` holds, their bytes, and how many go through LFS/Xet."""
    files = bundle_files(root)
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "lfs_files": sum(needs_lfs(p) for p in files)}


def gradio_pin(requirements: str) -> str:
    """The Gradio release requirements.txt pins (``gradio==X``): the Space's ``sdk_version``."""
    match = re.search(r"^gradio==([0-9][0-9A-Za-z.]*)\s*$", requirements, re.MULTILINE)
    if not match:
        raise SpaceError("requirements.txt must pin Gradio (a line gradio==X): a Space installs gradio==<sdk_version> "
                         "in the same pip command, so the two must be the same release.")
    return match.group(1)


def space_requirements(requirements: str) -> str:
    """The Space's requirements.txt from the repository's: torch pinned to the newest release ZeroGPU supports, and
    no torchvision (only training and dataset downloads import it); every other line as it is."""
    lines = ["# What the Space installs (written by `python -m vit_demo space` from the repository's "
             "requirements.txt):", f"# torch {SPACE_TORCH}, the newest release ZeroGPU supports; no torchvision, "
             "which the app never imports."]
    for line in requirements.splitlines():
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#", 1)[0])  # the package it asks for
        name = match and match.group(1).lower()
        if name == "torch":
            lines.append(f"torch=={SPACE_TORCH}")
        elif name and name != "torchvision":
            lines.append(line.strip())
    return "\n".join(lines) + "\n"


def from_template(template: str, **fields: object) -> str:
    """A file of templates/ (a README, the static page's index.html) filled in with ``fields`` and the shipped
    models' accuracies (``mnist``, ``cifar10``), as written (no escaping)."""
    text = (Path(__file__).parent / "templates" / template).read_text(encoding="utf-8")
    return jinja2.Template(text, keep_trailing_newline=True).render(
        mnist=accuracy_note("mnist"), cifar10=accuracy_note("cifar10"), **fields)


def accuracy_note(model: str) -> str:
    """A shipped model's test accuracy from its metrics.json, as ", 99.53% of its 10,000 test images" ("" where it
    is not recorded; ", 99.53% on its test set" where the count is not)."""
    metrics = read_metrics(REPO / WEIGHTS / model) or {}
    accuracy, images = metrics.get("test_accuracy"), metrics.get("test_images")
    if accuracy is None:
        return ""
    return f", {100 * accuracy:.2f}% " + (f"of its {images:,} test images" if images else "on its test set")


def copy_tree(source: Path, target: Path, skipped_suffixes: set[str]) -> None:
    """Copy the folder ``source`` to ``target``, less caches, compiled files and ``skipped_suffixes``."""
    for folder, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        into = target / Path(folder).relative_to(source)
        into.mkdir(parents=True, exist_ok=True)
        for name in sorted(files):
            if not name.startswith(".") and Path(name).suffix not in SKIPPED_SUFFIXES | skipped_suffixes:
                shutil.copy2(Path(folder) / name, into / name)


def build(target: Path, models: Sequence[Path] = ()) -> None:
    """Write the bundle's contents into the empty folder ``target``, the weights folders ``models`` beside the
    shipped ones (the app serves every weights folder it finds there: service.weights_root_models)."""
    requirements = (REPO / REQUIREMENTS).read_text(encoding="utf-8")
    sdk_version = gradio_pin(requirements)
    shutil.copy2(REPO / APP_FILE, target / APP_FILE)
    copy_tree(REPO / PACKAGE, target / PACKAGE, set())
    copy_tree(REPO / WEIGHTS, target / WEIGHTS, SKIPPED_IN_WEIGHTS)
    for model in models:
        if model.parent != REPO / WEIGHTS:  # (else copied with them)
            copy_tree(model, target / WEIGHTS / model.name, SKIPPED_IN_WEIGHTS)
    copy_tree(REPO / EXAMPLES, target / EXAMPLES, set())
    (target / REQUIREMENTS).write_text(space_requirements(requirements), encoding="utf-8")
    readme = from_template("space_README.md", sdk_version=sdk_version, python=SPACE_PYTHON, app_file=APP_FILE,
                           short_description=SHORT_DESCRIPTION, marker=MARKER)  # front matter, then a short card
    (target / README).write_text(readme, encoding="utf-8")
    write_gitattributes(target)


def check_target(folder: Path, force: bool, marker: str = MARKER) -> None:
    """Raise SpaceError for a folder the bundle (whose README carries ``marker``) must not be written into."""
    if folder.exists() and not folder.is_dir():
        raise SpaceError(f"{folder} is a file, not a folder: nothing was written. Give a folder for the Space (a new "
                         "one, or one this command wrote before).")
    resolved = folder.resolve()
    sources = [REPO / name for name in (PACKAGE, WEIGHTS, EXAMPLES)]
    if resolved == REPO or REPO.is_relative_to(resolved) or any(resolved.is_relative_to(s) for s in sources):
        raise SpaceError(f"{folder} is (or holds) this repository's own files: nothing was written. Write the Space "
                         "into a folder of its own, e.g. ../vit-demo-space.")
    if force or not folder.is_dir() or all(entry.name in KEEP for entry in folder.iterdir()):
        return
    try:  # an earlier bundle's README carries the marker
        ours = marker in (folder / README).read_text(encoding="utf-8", errors="replace")
    except OSError:
        ours = False
    if not ours:
        raise SpaceError(f"{folder} is not empty and is not a Space folder this command wrote: nothing was changed. "
                         "Give a new or empty folder, or add --force to replace everything in it (a .git folder is "
                         "kept).")


def write_space(folder: Path | str, force: bool = False, models: Sequence[str | Path] = ()) -> dict:
    """Write the Space's folder into ``folder`` (created where needed; an earlier bundle, or with ``force`` any
    folder, is rewritten whole, keeping only a ``.git``), with the weights folders ``models`` served beside the
    shipped ones; return what was written, as one JSON-able record."""
    try:
        folder, own = Path(folder), [own_weights_folder(model) for model in models]
    except WeightsError as e:
        raise SpaceError(f"{e}: nothing was written.") from None
    replace_folder(folder, force, MARKER, lambda target: build(target, own))
    return {"space": str(folder), **bundle_record(folder),
            "sdk_version": gradio_pin((REPO / REQUIREMENTS).read_text(encoding="utf-8")),
            "python_version": SPACE_PYTHON, "torch": SPACE_TORCH,
            "deploy": f"hf upload USER/NAME {folder} --repo-type space"}


def write_gitattributes(target: Path) -> None:
    """A .gitattributes that puts every file under ``target`` that needs it through LFS/Xet."""
    patterns = {f"*{p.suffix}" if p.suffix else "/" + p.relative_to(target).as_posix()  # (no suffix: its own path)
                for p in bundle_files(target) if needs_lfs(p)}
    rules = [f"{pattern} {LFS_ATTRIBUTES}" for pattern in sorted(patterns)]
    (target / GITATTRIBUTES).write_text("# Every binary file, and any file of 10 MiB or more, through LFS/Xet: the Hub "
                                        "refuses them as plain git files.\n" + "\n".join(rules) + "\n",
                                        encoding="utf-8")


def replace_folder(folder: Path, force: bool, marker: str, build: Callable[[Path], None]) -> None:
    """Fill ``folder`` with what ``build`` writes into an empty folder, replacing what was there but a ``.git``, once
    ``check_target`` allows it (``marker``: what the README of an earlier bundle of this kind carries).

    The bundle is built beside ``folder`` first and moved in only once complete, so a failure changes nothing.
    """
    check_target(folder, force, marker)
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.resolve().name}.", dir=folder.resolve().parent))
    try:
        build(staging)
        for entry in folder.iterdir():
            if entry.name in KEEP:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        for entry in staging.iterdir():
            entry.rename(folder / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
