"""bench/bench_serve.py's background schedule: the streams' first requests are spread over one
answer's length in whole delta periods, and a point without background streams has none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_serve  # noqa: E402


@pytest.mark.parametrize("streams,deltas,want", [
    (0, 257, 0.0),     # 1 stream: the probe alone
    (15, 17, 0.02),    # 16 ids per delta: 15 streams over 320 ms, one 20 ms period apart
    (15, 257, 0.34),   # 1 id per delta: 17 periods apart, over 5.1 s
    (63, 257, 0.08),
    (63, 17, 0.02),    # more streams than deltas: still a period apart
])
def test_stagger(streams, deltas, want):
    assert bench_serve._stagger(streams, deltas) == pytest.approx(want)
    if streams:  # spread over at most about one answer, in whole periods
        periods = bench_serve._stagger(streams, deltas) * 1000 / bench_serve.PACED_MS
        assert periods == round(periods) >= 1
        assert (streams - 1) * periods <= max(deltas * 1.1, streams)
