"""A rendered prompt as segments (special token | plain text), and its exact token ids.

Only an encoding's template creates :class:`Special` segments; text from messages, tools and
schemas is always a :class:`Text` segment and is encoded with ``encode_ordinary``, so a user can
never forge a special token (DeepSeek-V4 tokenizer rules: only special tokens are safe boundaries,
adjacent plain text is joined before encoding).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from recipe.tokenizer import MissingSpecialTokenError, Tokenizer

if TYPE_CHECKING:
    from recipe.conversation import ImageSource

__all__ = ["Special", "Text", "Segment", "Prompt", "SegmentCache", "encode_prompt", "encode_segments", "message_token_spans"]


@dataclass(frozen=True, slots=True)
class Special:
    """A template special token, by spelling (e.g. ``"<｜User｜>"``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text, encoded with ``encode_ordinary``."""

    text: str


Segment = Union[Special, Text]


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered prompt.

    Attributes:
        segments: special and text segments in order (adjacent texts may appear; they are joined
            before encoding).
        message_starts: ``(message index, segment index)`` pairs: where the rendering of each
            message group begins (index into the conversation's messages; the system section is
            attributed to the first system message). Empty when the encoding does not record them.
        images: the image sources of the prompt's image tokens, in prompt order (V4.1).
    """

    segments: tuple[Segment, ...]
    message_starts: tuple[tuple[int, int], ...] = ()
    images: tuple[ImageSource, ...] = ()

    @property
    def text(self) -> str:
        """The prompt as one string (special tokens spelled out)."""
        return "".join(s.text for s in self.segments)

    @property
    def special_ranges(self) -> list[tuple[int, int]]:
        """Code-point ``[start, end)`` offsets of the template's special tokens in :attr:`text`."""
        out: list[tuple[int, int]] = []
        pos = 0
        for s in self.segments:
            n = len(s.text)
            if type(s) is Special:
                out.append((pos, pos + n))
            pos += n
        return out

    def chunks(self) -> list[tuple[bool, str]]:
        """``(is_special, text)`` pairs with adjacent plain texts joined and empty texts dropped."""
        out: list[tuple[bool, str]] = []
        buf: list[str] = []
        for s in self.segments:
            if type(s) is Special:
                if buf:
                    t = "".join(buf)
                    if t:
                        out.append((False, t))
                    buf = []
                out.append((True, s.text))
            else:
                buf.append(s.text)
        if buf:
            t = "".join(buf)
            if t:
                out.append((False, t))
        return out


class SegmentCache:
    """Exact, memory-bounded cache: plain-text chunk -> its ``encode_ordinary`` ids.

    Keyed by (tokenizer fingerprint, the whole text between two special tokens), so a hit returns
    exactly what encoding would (text is only ever split at special tokens). Bounded by ``max_chars``:
    the characters held plus :data:`ENTRY_COST` per entry (default 16 Mi, roughly 50–80 MB); least
    recently used chunks are evicted first. Chunks shorter than ``min_chars`` are encoded directly.
    Thread-safe.
    """

    ENTRY_COST = 64

    def __init__(self, max_chars: int = 16 * 1024 * 1024, min_chars: int = 1) -> None:
        self.max_chars = max_chars
        self.min_chars = min_chars
        self._data: OrderedDict[tuple[str, str], tuple[int, ...]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def encode(self, tokenizer: Tokenizer, text: str) -> tuple[int, ...] | list[int]:
        """Ids of ``text`` (from cache when present). The tokenizer's fingerprint is part of the key."""
        if len(text) < self.min_chars:
            return tokenizer.encode_ordinary(text)
        key = (tokenizer.fingerprint, text)
        data = self._data
        # a hit is read without the lock: each OrderedDict operation is one atomic C call (the key is
        # a tuple of str: no Python code runs in it); an entry evicted in between is still right
        ids = data.get(key)
        if ids is not None:
            try:
                data.move_to_end(key)
            except KeyError:
                pass
            self.hits += 1
            return ids
        ids = tuple(tokenizer.encode_ordinary(text))
        with self._lock:
            self.misses += 1
            if len(text) <= self.max_chars and key not in self._data:
                self._data[key] = ids
                self._chars += len(text) + self.ENTRY_COST
                while self._chars > self.max_chars:
                    (_, old), _ = self._data.popitem(last=False)
                    self._chars -= len(old) + self.ENTRY_COST
        return ids

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._data)


def _text_runs(segments: Sequence[Segment], start: int) -> Iterator[str]:
    """The joined runs of text between special segments of ``segments[start:]``."""
    buf: list[str] = []
    for i in range(start, len(segments)):
        seg = segments[i]
        if type(seg) is Special:
            if buf:
                yield "".join(buf)
                buf = []
        else:
            buf.append(seg.text)
    if buf:
        yield "".join(buf)


def encode_segments(
    tokenizer: Tokenizer,
    segments: Sequence[Segment],
    cache: SegmentCache | None = None,
    marks: Sequence[int] = (),
    start: int = 0,
) -> tuple[list[int], list[int | None]]:
    """Token ids of ``segments[start:]``, and where given segment indices begin among those ids.

    Each special segment becomes its id; each run of adjacent texts is joined and encoded with
    ``encode_ordinary`` (through ``cache`` when given). ``start`` must be 0 or the index of a special
    segment (text is only ever split at special tokens, so ids restart cleanly there).

    Args:
        marks: ascending segment indices ``>= start``; for each, the number of ids produced before
            that segment, or None when the segment is plain text (no token boundary is guaranteed
            there). A mark equal to ``len(segments)`` gets the total.

    Raises:
        MissingSpecialTokenError: a special segment whose spelling is not an added token of
            ``tokenizer`` (a vocabulary that is not the encoding's).
    """
    ids: list[int] = []
    offsets: list[int | None] = []
    specials = tokenizer.special_tokens
    tokenizer.prefetch(_text_runs(segments, start))  # read only before the full encoding exists
    cached = None if cache is None else cache.encode
    encode = tokenizer.encode_ordinary
    buf: list[str] = []
    mark_iter = iter(marks)
    mark = next(mark_iter, -1)
    for i in range(start, len(segments)):
        seg = segments[i]
        if type(seg) is Special:
            if buf:
                text = buf[0] if len(buf) == 1 else "".join(buf)
                if text:
                    ids += encode(text) if cached is None else cached(tokenizer, text)
                buf = []
            while mark == i:
                offsets.append(len(ids))
                mark = next(mark_iter, -1)
            special = specials.get(seg.text)
            if special is None:
                raise MissingSpecialTokenError(seg.text)
            ids.append(special)
        else:
            while mark == i:
                offsets.append(None)
                mark = next(mark_iter, -1)
            buf.append(seg.text)
    if buf:
        text = "".join(buf)
        if text:
            ids += encode(text) if cached is None else cached(tokenizer, text)
    while mark >= 0:
        offsets.append(len(ids) if mark == len(segments) else None)
        mark = next(mark_iter, -1)
    return ids, offsets


def encode_prompt(tokenizer: Tokenizer, prompt: Prompt, cache: SegmentCache | None = None) -> list[int]:
    """Token ids of ``prompt``: each special segment by id, each joined plain chunk by ``encode_ordinary``.

    Args:
        tokenizer: the vocabulary.
        prompt: rendered segments.
        cache: optional :class:`SegmentCache` for long repeated chunks (agent loops re-send history).

    Raises:
        MissingSpecialTokenError: a special segment whose spelling is not an added token of
            ``tokenizer`` (a vocabulary that is not the encoding's).
    """
    return encode_segments(tokenizer, prompt.segments, cache)[0]


def message_token_spans(tokenizer: Tokenizer, prompt: Prompt, cache: SegmentCache | None = None) -> list[tuple[int, int, int]]:
    """``(message index, start, end)`` token spans of ``prompt.message_starts`` (half-open).

    A message group that starts at a special segment gets an exact start; one that starts inside a
    run of joined text is attributed from the start of that run (tokens can straddle the join).
    """
    if not prompt.message_starts:
        return []
    starts = dict((seg, msg) for msg, seg in prompt.message_starts)
    offsets: list[tuple[int, int]] = []  # (token offset, message index)
    pos = 0
    pending: list[int] = []
    buf: list[str] = []

    def flush() -> None:
        nonlocal pos
        if buf:
            text = "".join(buf)
            ids = cache.encode(tokenizer, text) if cache is not None else tokenizer.encode_ordinary(text)
            for msg in pending:
                offsets.append((pos, msg))
            pending.clear()
            buf.clear()
            pos += len(ids)

    for k, seg in enumerate(prompt.segments):
        if type(seg) is Special:
            flush()
            for msg in pending:
                offsets.append((pos, msg))
            pending.clear()
            if k in starts:
                offsets.append((pos, starts[k]))
            pos += 1
        else:
            if k in starts:
                pending.append(starts[k])
            buf.append(seg.text)
    flush()
    for msg in pending:
        offsets.append((pos, msg))
    spans = []
    for j, (start, msg) in enumerate(offsets):
        end = offsets[j + 1][0] if j + 1 < len(offsets) else pos
        spans.append((msg, start, end))
    return spans
