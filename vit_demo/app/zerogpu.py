"""Hugging Face ZeroGPU: where the app's models run on a ZeroGPU Space, and the decorator for the work that runs them.

On a ZeroGPU Space (``SPACES_ZERO_GPU=true``) a real GPU is attached only while a function decorated with the
``spaces`` package's ``@spaces.GPU`` runs: in a forked worker, after a call to ZeroGPU's scheduler, against the
visitor's daily GPU quota. Everywhere else in the process ``import spaces`` makes ``torch.cuda.is_available()``
true. The app's models are tiny (a drawing costs some 2 ms of CPU, a photo some 30 ms), so on ZeroGPU the app keeps
them on the CPU, in the server's own process, where no call waits for a GPU or spends quota (docs/spaces.md has the
numbers). ``VIT_DEMO_DEVICE=cuda`` puts them on ZeroGPU's GPU instead; then every call that runs a model goes
through ``@spaces.GPU`` (``model_work``). Elsewhere ``@spaces.GPU`` gives the function back as it is, and where the
``spaces`` package is not installed it is not imported.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar

try:
    import spaces  # the Hugging Face Spaces package; it patches torch only on ZeroGPU
except ImportError:
    spaces = None

DEVICE_ENV = "VIT_DEMO_DEVICE"  # auto (default), cpu, cuda, ...
GPU_SECONDS = 15  # the most one call may hold ZeroGPU's GPU; a short one ranks higher in its queue
F = TypeVar("F", bound=Callable)


def on_zerogpu() -> bool:
    """Whether this process runs on a ZeroGPU Space (the variable the ``spaces`` package reads)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def app_device() -> str:
    """The device the app's models go on: ``VIT_DEMO_DEVICE`` (default ``auto``), where ``auto`` means the CPU on
    ZeroGPU (its ``torch.cuda.is_available()`` says True outside ``@spaces.GPU``)."""
    name = os.environ.get(DEVICE_ENV, "auto")
    return "cpu" if name == "auto" and on_zerogpu() else name


def models_on_zerogpu() -> bool:
    """Whether the app's models are on ZeroGPU's GPU, so that running them needs ``@spaces.GPU``."""
    return on_zerogpu() and app_device().startswith("cuda")


def model_work(fn: F) -> F:
    """``fn``, which runs a model: through ``@spaces.GPU`` when the models are on ZeroGPU's GPU, else as it is.

    Its arguments and answer cross into ZeroGPU's worker process by pickle: names, numpy arrays, CPU tensors.
    On ZeroGPU it is registered with ``spaces`` either way, so the Space reports a GPU function at startup.
    """
    if spaces is None:
        return fn
    on_gpu = spaces.GPU(duration=GPU_SECONDS)(fn)
    if on_gpu is fn:  # not on ZeroGPU: the decorator gave it back
        return fn

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return (on_gpu if models_on_zerogpu() else fn)(*args, **kwargs)

    return run  # type: ignore[return-value]


if spaces is not None and not models_on_zerogpu() and hasattr(spaces, "disable_gradio_auto_wrap"):
    # The models on the CPU, no event handler needs a GPU: where the Space has Gradio put every handler through
    # @spaces.GPU (SPACES_GRADIO_AUTO_WRAP=true), each would wait for one, and fail when none is free.
    spaces.disable_gradio_auto_wrap()
