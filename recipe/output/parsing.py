"""Reusable pieces of streaming output parsers: marker matching with hold-back, stop sequences.

Model output arrives in arbitrary pieces (one token, many tokens, decoded text). A marker such as
``</think>`` may be split across pieces, so text that *could* be the start of a marker is held
back and released the moment it cannot match. These helpers work on small windows (``str.find``
and ``startswith`` from a given index), never re-scanning text already decided, so the cost of a
piece is proportional to the piece plus the held-back tail (bounded by the longest marker).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["JsonObjectFilter", "MarkerMatcher", "StopMatcher", "split_trailing"]


class MarkerMatcher:
    """Finds the earliest occurrence of any of a fixed set of markers, or a marker prefix at the end.

    Args:
        markers: non-empty marker strings (duplicates and empty strings are ignored).
    """

    __slots__ = ("_firsts", "_maxlen", "_single", "markers")

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

    __slots__ = ("_firsts", "_maxlen", "held", "stops")

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


# JSON-object filter phases
_LEAD, _FENCE, _FENCE_WS, _VALUE, _AFTER, _PASS = range(6)
#: an opening fence line: three backticks, optional ``json`` (any case), optional blanks, newline.
_FENCE_LINE = re.compile(r"```(?:[jJ][sS][oO][nN])?[ \t]{0,8}\r?\n")
#: a proper prefix of such a line (no newline yet).
_FENCE_PART = re.compile(r"`{1,3}|```[jJ](?:[sS](?:[oO][nN]?)?)?|```(?:[jJ][sS][oO][nN])?[ \t]{1,8}\r?|```\r")
_NON_WS = re.compile(r"\S")
_OUTSIDE = re.compile(r'[{}\[\]"]')
_INSIDE = re.compile(r'["\\]')
#: text after the value that is dropped without a note: blanks, optionally one closing fence.
_CLEAN_AFTER = re.compile(r"\s*(?:```\s*)?")
_AFTER_KEEP = 64


class JsonObjectFilter:
    """JSON-object mode for streamed content: keep the JSON value only, independent of chunking.

    Rule (applied to the content characters, so any split of the same text gives the same
    result): leading whitespace is skipped. If the first other character is ``{`` or ``[``, or
    the content opens with a fence line (```` ``` ```` or ```` ```json ````, any case) whose next
    non-blank character is ``{`` or ``[``, only that JSON value's text is emitted, from its
    opening bracket to the bracket that closes it (a string-aware depth count; the value is not
    otherwise validated). The fence and everything after the value are dropped. Otherwise the
    content is emitted unchanged.

    Text is held back only while undecided: leading whitespace and an opening fence line (at most
    a few characters). Notes (in :attr:`notes`, final after :meth:`finish`): ``json_not_found``
    (content kept as is), ``json_incomplete`` (the value never closed; its text so far was
    emitted), ``json_trailing_text`` (something other than blanks and one closing fence followed
    the value and was dropped).
    """

    __slots__ = ("_after", "_depth", "_esc", "_fence_at", "_held", "_in_str", "_phase", "_seen", "notes")

    def __init__(self) -> None:
        self._phase = _LEAD
        self._held = ""  # raw text held while undecided (released as is if no JSON value follows)
        self._fence_at = 0  # where the fence line starts in the held text
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._after = ""  # the first characters after the value (to tell clean from trailing text)
        self._seen = False
        self.notes: list[str] = []

    def feed(self, text: str) -> str:
        """The part of ``text`` (the next content characters) to emit now."""
        if not text:
            return ""
        self._seen = True
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            ph = self._phase
            if ph == _VALUE:
                j = self._scan(text, i)
                if j < 0:
                    out.append(text[i:])
                    break
                out.append(text[i:j])
                self._phase = _AFTER
                i = j
            elif ph == _PASS:
                out.append(text[i:])
                break
            elif ph == _AFTER:
                if len(self._after) < _AFTER_KEEP:
                    self._after += text[i:i + _AFTER_KEEP]
                break
            elif ph == _LEAD or ph == _FENCE_WS:
                m = _NON_WS.search(text, i)
                if m is None:
                    self._held += text[i:]
                    break
                k = m.start()
                c = text[k]
                if c == "{" or c == "[":
                    self._held = ""
                    self._phase = _VALUE
                    i = k
                elif c == "`" and ph == _LEAD:
                    self._held += text[i:k]
                    self._fence_at = len(self._held)
                    self._phase = _FENCE
                    i = k
                else:
                    self._release(out)
                    out.append(text[i:])
                    break
            else:  # _FENCE: read the fence line up to its newline
                nl = text.find("\n", i)
                end = n if nl < 0 else nl + 1
                self._held += text[i:end]
                line = self._held[self._fence_at:]
                if nl < 0:
                    if _FENCE_PART.fullmatch(line):
                        break
                elif _FENCE_LINE.fullmatch(line):
                    self._phase = _FENCE_WS
                    i = end
                    continue
                self._release(out)
                out.append(text[end:])
                break
        return "".join(out)

    def _release(self, out: list[str]) -> None:
        """No JSON value here: emit the held text and everything after it unchanged."""
        out.append(self._held)
        self._held = ""
        self._phase = _PASS
        self.notes.append("json_not_found")

    def _scan(self, s: str, i: int) -> int:
        """Index just after the bracket closing the value, or -1 when it is still open at the end."""
        n = len(s)
        while i < n:
            if self._in_str:
                if self._esc:
                    self._esc = False
                    i += 1
                    continue
                m = _INSIDE.search(s, i)
                if m is None:
                    return -1
                i = m.end()
                if m.group() == "\\":
                    self._esc = True
                else:
                    self._in_str = False
                continue
            m = _OUTSIDE.search(s, i)
            if m is None:
                return -1
            c = m.group()
            i = m.end()
            if c == '"':
                self._in_str = True
            elif c == "{" or c == "[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    return i
        return -1

    def finish(self) -> str:
        """End of content: text still held (released unchanged when no value started)."""
        out: list[str] = []
        ph = self._phase
        if ph in (_LEAD, _FENCE, _FENCE_WS):
            if self._seen:
                self._release(out)
        elif ph == _VALUE:
            self.notes.append("json_incomplete")
        elif ph == _AFTER and not _CLEAN_AFTER.fullmatch(self._after):
            self.notes.append("json_trailing_text")
        self._phase = _PASS
        return "".join(out)


def split_trailing(text: str, chars: str = "\n") -> tuple[str, str]:
    """``(body, tail)`` where ``tail`` is the longest suffix of ``text`` made only of ``chars``."""
    body = text.rstrip(chars)
    return body, text[len(body):]
