"""Where the model runs: CUDA when present, else Apple's MPS, else the CPU."""

from __future__ import annotations

import os

import torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA (the local rank's GPU under torchrun), MPS or CPU; any torch device name is taken as is."""
    if name != "auto":
        device = torch.device(name)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was asked for, but CUDA is not available here")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    """What a run records as its hardware: the GPU's name, or the CPU and its cores."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
