"""Timing helpers shared by the bench scripts (wall clock, ``time.perf_counter``).

Every ratio a bench prints is *theirs / ours* per round, each round running both sides back to back
(alternating which goes first), so a load change on the shared machine hits both; a row reports the
median and the [min–max] range over the rounds, and a target counts as met only when the minimum
reaches it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


def median_seconds(fn: Callable[[], object], n: int) -> float:
    """Median wall time in seconds of ``n`` calls of ``fn()`` (each call timed on its own)."""
    return statistics.median(times(fn, n))


def times(fn: Callable[[], object], n: int) -> list[float]:
    """Wall times in seconds of ``n`` calls of ``fn()`` (each call timed on its own)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


@dataclass
class Row:
    """One compared case: per-round times of ours and theirs (seconds) and the target ratio."""

    name: str
    target: float | None = None
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)

    def add(self, ours: float, theirs: float) -> None:
        """Record one round."""
        self.ours.append(ours)
        self.theirs.append(theirs)

    @property
    def ratios(self) -> list[float]:
        """theirs / ours per round (> 1: we are faster)."""
        return [t / o for o, t in zip(self.ours, self.theirs)]

    @property
    def met(self) -> bool | None:
        """Whether every round's ratio reaches the target (None without a target or rounds)."""
        if self.target is None or not self.ours:
            return None
        return min(self.ratios) >= self.target

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary: medians and ranges in ms, ratio median/min/max, target, met."""
        r = self.ratios
        return {
            "name": self.name, "rounds": len(r),
            "ours_ms": [statistics.median(self.ours) * 1e3, min(self.ours) * 1e3, max(self.ours) * 1e3],
            "theirs_ms": [statistics.median(self.theirs) * 1e3, min(self.theirs) * 1e3, max(self.theirs) * 1e3],
            "ratio": [statistics.median(r), min(r), max(r)], "target": self.target, "met": self.met,
        }


def span(xs: Sequence[float], scale: float = 1.0, digits: int = 2) -> str:
    """``median [min–max]`` of ``xs`` times ``scale``."""
    f = f"{{:.{digits}f}}"
    return f"{f.format(statistics.median(xs) * scale)} [{f.format(min(xs) * scale)}–{f.format(max(xs) * scale)}]"


def print_rows(rows: Sequence[Row], title: str = "", anchor: str = "deepseek-recipe ms") -> None:
    """The table: ours ms, theirs ms, ratio, each as median [min–max], then the target and verdict."""
    if title:
        print(title)
    print(f"  {'case':44} {'recipe ms':>26} {anchor:>28} {'theirs/ours':>24}  target")
    for row in rows:
        verdict = "" if row.met is None else ("ok (every round)" if row.met else "BELOW in some round")
        target = "" if row.target is None else f"≥ {row.target:g}×"
        digits = 3 if min(row.ours) < 1e-3 else 1
        print(f"  {row.name:44} {span(row.ours, 1e3, digits):>26} {span(row.theirs, 1e3, digits):>28} "
              f"{span(row.ratios, 1, 2):>24}  {target} {verdict}")


def interleaved(name: str, ours: Callable[[], object], theirs: Callable[[], object], rounds: int,
                calls: int = 1, target: float | None = None) -> Row:
    """A :class:`Row` of ``rounds`` rounds; each round times ``calls`` calls of each side (their
    median), back to back, alternating which side goes first."""
    row = Row(name, target)
    for r in range(rounds):
        if r % 2:
            t = statistics.median(times(theirs, calls))
            o = statistics.median(times(ours, calls))
        else:
            o = statistics.median(times(ours, calls))
            t = statistics.median(times(theirs, calls))
        row.add(o, t)
    return row
