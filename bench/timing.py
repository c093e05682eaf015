"""Timing helpers shared by the bench scripts (wall clock, ``time.perf_counter``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], n: int) -> float:
    """Median wall time in seconds of ``n`` calls of ``fn()`` (each call timed on its own)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
