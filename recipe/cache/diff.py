"""Prefix stability: where turn N+1's prompt stops extending turn N's prompt + completion.

A prefix cache only hits on ids identical from token 0, so the first diverging token bounds every
later hit. :func:`first_divergence` finds it and, given the new prompt's message boundaries, names
the message it falls in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Divergence", "first_divergence", "normalize_boundaries"]

_CHUNK = 4096  # slice-compare this many ids at a time before scanning one by one


@dataclass(frozen=True, slots=True)
class Divergence:
    """Result of comparing ``a`` (earlier turn) with ``b`` (new prompt).

    Attributes:
        shared: length of the common prefix (ids equal from position 0).
        len_a, len_b: the two lengths.
        token_a, token_b: the ids at position ``shared`` (None past the end of that sequence).
        message_index: index of the message of ``b`` containing position ``shared`` (None when no
            boundaries were given, or no span covers it).
    """

    shared: int
    len_a: int
    len_b: int
    token_a: int | None
    token_b: int | None
    message_index: int | None

    @property
    def extends(self) -> bool:
        """True when ``b`` starts with the whole of ``a`` (the cache-friendly case)."""
        return self.shared == self.len_a

    def shared_blocks(self, block_size: int) -> int:
        """Full blocks of the shared prefix (what a block cache can reuse, before the last-token cap)."""
        return self.shared // block_size


def normalize_boundaries(boundaries: Sequence[Sequence]) -> list[tuple[int, int, int]]:
    """``(message index, (start, end))`` or ``(message index, start, end)`` rows -> ``(index, start, end)``.

    Raises:
        ValueError: a row of another shape, non-int values, or ``start > end``.
    """
    out = []
    for row in boundaries:
        flat = (row[0], *row[1]) if len(row) == 2 else tuple(row)
        if len(flat) != 3 or not all(isinstance(v, int) for v in flat) or flat[1] > flat[2]:
            raise ValueError(f"bad message boundary {row!r}: want (index, (start, end)) with start <= end")
        out.append(flat)
    return out


def first_divergence(a: Sequence[int], b: Sequence[int], boundaries: Sequence[Sequence] | None = None) -> Divergence:
    """Compare two id sequences; ``boundaries`` are ``b``'s message spans (half-open, token positions).

    Raises:
        ValueError: malformed boundaries (see :func:`normalize_boundaries`).
    """
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i : i + _CHUNK] == b[i : i + _CHUNK]:
        i += _CHUNK
    i = min(i, n)
    while i < n and a[i] == b[i]:
        i += 1
    message = None
    for idx, start, end in normalize_boundaries(boundaries or ()):
        if start <= i < end:
            message = idx
            break
    return Divergence(
        shared=i,
        len_a=len(a),
        len_b=len(b),
        token_a=a[i] if i < len(a) else None,
        token_b=b[i] if i < len(b) else None,
        message_index=message,
    )
