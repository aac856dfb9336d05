"""Shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], repeat: int, warmup: int = 3) -> tuple[float, float]:
    """Median and 95th-percentile wall time of ``fn`` in milliseconds, after a few warm-up calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]
