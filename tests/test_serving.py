"""How the server process is tuned before its first request (vit_demo/app/serving.py)."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

from vit_demo.app import serving

# Twelve threads allocating at once, then glibc's own count of its heaps (malloc_info's XML: one <heap> each).
HEAPS_AFTER_THREADS = textwrap.dedent("""
    import ctypes, sys, threading
    if sys.argv[1] == "limit":
        from vit_demo.app import serving
        serving.limit_malloc_arenas()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    start = threading.Barrier(12)
    def allocate():
        start.wait()
        for _ in range(2_000):
            for block in [libc.malloc(1000) for _ in range(10)]:
                libc.free(block)
    threads = [threading.Thread(target=allocate) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
    report = libc.fopen(sys.argv[2].encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(report))
    libc.fclose(ctypes.c_void_p(report))
    print(open(sys.argv[2]).read().count("<heap nr="))
""")


@pytest.mark.slow  # three Python processes, each running torch on threads
@pytest.mark.skipif(serving.glibc() is None, reason="glibc only")
def test_the_server_keeps_one_malloc_heap_a_worker_unless_told_otherwise(tmp_path):
    def heaps(how: str, **env: str) -> int:
        done = subprocess.run([sys.executable, "-c", HEAPS_AFTER_THREADS, how, str(tmp_path / "heaps.xml")],
                              env={**os.environ, "PYTHONPATH": str(REPO), **env}, capture_output=True, text=True,
                              timeout=120, check=True)
        return int(done.stdout)

    assert heaps("glibc") > serving.WORKERS  # a heap for nearly every thread that allocated at once
    assert heaps("limit") <= serving.WORKERS
    assert heaps("limit", MALLOC_ARENA_MAX="5") == 5  # a limit set for the process is left as it is
