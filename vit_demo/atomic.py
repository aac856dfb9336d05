"""Writing files safely: atomic writes (a reader sees the old file or the new one, never half of one), and the check
that a folder a command writes into is one it may write into."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


KEEP = (".git",)  # left in place when a folder is written into or rewritten: a clone of a repository stays a clone

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write`` on a temporary file beside ``path``, then rename it over ``path``.

    If ``write`` raises (or the process dies), ``path`` keeps its old content and the temporary
    file is removed (or, after a crash, left with a ``.tmp`` suffix that nothing reads).
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, 0o666 & ~_UMASK)  # mkstemp makes files private; give them the usual mode
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def check_out_folder(folder: Path, force: bool, error: type[Exception], written: str) -> None:
    """Raise ``error`` for a folder a command must not write ``written`` (its files, in words) into: a file, or a folder
    that holds files (a .git folder aside) unless ``force``."""
    if folder.exists() and not folder.is_dir():
        raise error(f"{folder} is a file, not a folder: nothing was written. Give a new or empty folder")
    if folder.is_dir() and not force and any(entry.name not in KEEP for entry in folder.iterdir()):
        raise error(f"{folder} is not empty: nothing was written. Give a new or empty folder, or add --force to write "
                    f"{written} into it")
