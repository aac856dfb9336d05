"""Serving a room on 2 vCPUs: how many handlers run at once, how long the queue is, and memory that goes back.

Measured with benchmarks/serve_load.py; see README.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import gradio as gr
import torch

from vit_demo.data.preprocess import MAX_FILE_BYTES

WORKERS = 2  # handlers running at once, all events together: one per core
QUEUE_SIZE = 100  # requests waiting at once, all users together; one more is answered "busy, try again"
TORCH_THREADS = 1  # a 1 ms forward gains nothing from 2 threads, and they stall when the other core is busy
# oneDNN (mkldnn) sets up each call for large tensors; on these models' tiny ones the setup costs more than it saves:
# without it a digit's forward pass takes 1.40 ms instead of 1.55, a photo's 13.28 instead of 13.40 (median, one
# thread: python benchmarks/model_cost.py [--onednn]).
ONEDNN = False
CACHE_SWEEP = (600, 600)  # every 10 min, delete the pictures and uploads Gradio cached more than 10 min ago
SHARED_WORKERS = {"concurrency_id": "views", "concurrency_limit": WORKERS}  # for every event listener
# The page's server functions (a pen stroke, a view's missing numbers) run outside Gradio's queue, on Gradio's
# threads: at most WORKERS of them compute at once, the rest wait their turn.
SERVER_FUNCTION_SLOTS = threading.BoundedSemaphore(WORKERS)

GLIBC_M_MMAP_THRESHOLD = -3  # mallopt()'s parameter numbers, from glibc's malloc.h
GLIBC_M_ARENA_MAX = -8
LARGE_BUFFER_BYTES = 128 * 1024  # glibc's own starting threshold, kept fixed


def glibc() -> ctypes.CDLL | None:
    """The C library, where it is glibc (Linux); None elsewhere (macOS, musl), whose malloc is left as it is."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def return_large_buffers_to_the_os() -> None:
    """Have glibc map every buffer of 128 KiB or more on its own, so that freeing it gives it back to the OS.

    By default glibc raises this threshold whenever such a buffer is freed, after which the views'
    large arrays come from the heap, which fragments with two workers: the server's RSS grew 37-52%
    over 500-1,000 requests of benchmarks/serve_load.py, against 2-5% with the threshold fixed. The
    cost is about 3 ms of server time per drawing (fresh pages for each large buffer).
    """
    if libc := glibc():
        libc.mallopt(GLIBC_M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES)


def limit_malloc_arenas() -> None:
    """Have glibc keep at most one heap ("arena") per worker, unless MALLOC_ARENA_MAX says otherwise.

    glibc gives threads that allocate at once heaps of their own, up to 8 per core, and each keeps the memory it
    once held; Gradio runs handlers on a pool of threads, so the server's RSS grew by the heaps of every thread that
    took a turn. With one heap a worker, 5,000 drawings of benchmarks/serve_load.py grew it 12.8% instead of 22.8%,
    at the same throughput (docs/benchmarks.md).
    """
    if "MALLOC_ARENA_MAX" in os.environ:  # glibc read it at start-up
        return
    if libc := glibc():
        libc.mallopt(GLIBC_M_ARENA_MAX, WORKERS)


def tune_process() -> None:
    """What the server process needs before its first request: glibc's threshold and heaps, torch's threads and
    oneDNN."""
    return_large_buffers_to_the_os()
    limit_malloc_arenas()
    torch.set_num_threads(TORCH_THREADS)
    torch.backends.mkldnn.enabled = ONEDNN


def serve(demo: gr.Blocks, css: str, queue_size: int = QUEUE_SIZE, **launch_args: Any) -> None:
    """Queue and launch ``demo`` with its page's ``css`` (``launch_args`` go to ``Blocks.launch``)."""
    # A full queue answers at once: the page shows "This application is currently busy. Please try
    # again.", gradio_client raises QueueError("Queue is full! Please try again.").
    demo.queue(max_size=queue_size)
    # On a Space (SYSTEM=spaces and SPACE_ID set) Gradio writes the Space's id into the page's config, and a page
    # opened on its own (not inside huggingface.co's frame) then draws Hugging Face's Space header: it loads Google
    # Fonts and asks huggingface.co about the Space and its owner. Without the id the page calls no other server
    # (docs/spaces.md); the header's share buttons and the API page's "Space" snippets go with it.
    demo.space_id = None
    # Uploads larger than our decoder accepts are refused while they stream in, before they reach the disk.
    demo.launch(css=css, theme=gr.themes.Default(), max_file_size=MAX_FILE_BYTES, **launch_args)
