"""Reusable pieces of streaming output parsers: marker matching with hold-back, stop sequences.

Model output arrives in arbitrary pieces (one token, many tokens, decoded text). A marker such as
``</think>`` may be split across pieces, so text that *could* be the start of a marker is held
back and released the moment it cannot match. These helpers work on small windows (``str.find``
and ``startswith`` from a given index), never re-scanning text already decided, so the cost of a
piece is proportional to the piece plus the held-back tail (bounded by the longest marker).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MarkerMatcher", "StopMatcher", "split_trailing"]


class MarkerMatcher:
    """Finds the earliest occurrence of any of a fixed set of markers, or a marker prefix at the end.

    Args:
        markers: non-empty marker strings (duplicates and empty strings are ignored).
    """

    __slots__ = ("markers", "_firsts", "_single", "_maxlen")

    def __init__(self, markers: Iterable[str]) -> None:
        ms = tuple(dict.fromkeys(m for m in markers if m))
        self.markers = ms
        firsts = tuple(dict.fromkeys(m[0] for m in ms))
        self._firsts = firsts
        self._single = firsts[0] if len(firsts) == 1 else None
        self._maxlen = max((len(m) for m in ms), default=0)

    def _next_first(self, s: str, i: int) -> int:
        if self._single is not None:
            return s.find(self._single, i)
        best = -1
        for c in self._firsts:
            k = s.find(c, i)
            if k >= 0 and (best < 0 or k < best):
                best = k
        return best

    def find(self, s: str, i: int = 0) -> tuple[int, str | None]:
        """Scan ``s`` from index ``i``.

        Returns:
            ``(j, marker)`` for the earliest ``j >= i`` where ``marker`` occurs in full (the
            first listed marker wins a tie); ``(j, None)`` when no marker occurs but ``s[j:]`` is
            a proper prefix of some marker (hold ``s[j:]`` back); ``(len(s), None)`` otherwise.
        """
        n = len(s)
        if not self.markers:
            return n, None
        while True:
            j = self._next_first(s, i)
            if j < 0:
                return n, None
            for m in self.markers:
                if s.startswith(m, j):
                    return j, m
            rest = n - j
            if rest < self._maxlen:
                tail = s[j:]
                for m in self.markers:
                    if len(m) > rest and m.startswith(tail):
                        return j, None
            i = j + 1


class StopMatcher:
    """Stop sequences matched across pieces of text.

    Feed text pieces in order; each call returns the text that is safe to emit now and, on a
    match, the stop sequence (the text is then cut just before the match). A tail that could be
    the start of a stop sequence is held back until it is decided; :meth:`flush` releases it.

    Args:
        stops: stop strings; empty strings are ignored. On a tie (same start), the one listed
            first is reported.
    """

    __slots__ = ("stops", "held", "_maxlen", "_firsts")

    def __init__(self, stops: Iterable[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.held = ""
        self._maxlen = max((len(s) for s in self.stops), default=0)
        self._firsts = frozenset(s[0] for s in self.stops)

    def feed(self, text: str) -> tuple[str, str | None]:
        """Returns ``(emit, matched)``: ``emit`` is released text; ``matched`` the stop found, else None."""
        s = self.held + text if self.held else text
        best = -1
        which = None
        for st in self.stops:
            k = s.find(st)
            if k >= 0 and (best < 0 or k < best):
                best, which = k, st
        if which is not None:
            self.held = ""
            return s[:best], which
        n = len(s)
        k = min(n, self._maxlen - 1)
        firsts = self._firsts
        while k > 0:
            if s[n - k] in firsts:
                tail = s[n - k:]
                if any(st.startswith(tail) for st in self.stops):
                    break
            k -= 1
        if k:
            self.held = s[n - k:]
            return s[: n - k], None
        self.held = ""
        return s, None

    def flush(self) -> str:
        """End of input: the held-back tail (it can no longer match)."""
        h, self.held = self.held, ""
        return h


def split_trailing(text: str, chars: str = "\n") -> tuple[str, str]:
    """``(body, tail)`` where ``tail`` is the longest suffix of ``text`` made only of ``chars``."""
    body = text.rstrip(chars)
    return body, text[len(body):]
