"""Exact reuse of earlier prompts: the agent loop's next request costs what changed.

An agent re-sends its whole history with one more round at the end. :class:`PromptCache` keeps the
rendered prompt and token ids of recent conversations at their *checkpoints*: the points where the
encoding guarantees that what is rendered so far can never change, whatever follows (for
DeepSeek-V4 after each assistant turn and latest reminder, see
:class:`~recipe.encodings.base.ResumableRender`). A request whose conversation extends a cached
one resumes rendering at the longest matching checkpoint, takes the ids up to it from the cache and
renders and encodes only the rest.

What is compared, and why there: the *converted* conversation, because rendering is a pure function
of it. The request is still parsed and validated in full (errors stay exact); only the rendering
and encoding of the unchanged prefix are skipped. A checkpoint after ``messages[:k]`` matches when

* the encoding name, the tokenizer fingerprint and the encoding's *render context* (V4: thinking,
  effort, tools, response format and every system text, hoisted to the front wherever it stands)
  are equal as canonical JSON bytes (orjson: ``1``, ``1.0`` and ``true`` differ, key order counts);
* the first ``k`` messages are exactly equal: same classes, same field values of the same types all
  the way down (one C-speed ``==`` for the Conversation message types, whose fields are declared
  strings, booleans, integers and tuples of such dataclasses; :func:`_same` walks any other class).

Candidates are found by a hash of the context and the message prefix (Python's ``hash``, chained per
message); the comparison above then decides, so a hash collision can only cost a miss, never wrong
ids. A change anywhere before the end (an edited message, a dropped reasoning block, other tools,
another effort, model or tokenizer) matches an earlier checkpoint or none, and the rest is rendered
exactly. The ids always equal a cold ``prepare`` (tests/test_prompt_cache.py: random conversations
and random edits in all three APIs).

Bounded by estimated bytes and by entries (LRU), thread-safe (rendering and encoding run outside the
lock); :func:`default_prompt_cache` is the process-wide one ``prepare`` uses by default and a server
shares. :meth:`PromptCache.stats` reports its memory.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import sys
import threading
import types
import typing
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from recipe.api.reuse import MessageMemo
from recipe.prompt import Prompt, Segment, SegmentCache, encode_segments

if TYPE_CHECKING:
    from recipe.conversation import Conversation
    from recipe.encodings.base import Checkpoint, Encoding, ResumableRender
    from recipe.tokenizer import Tokenizer

__all__ = ["PromptCache", "PromptCacheStats", "default_prompt_cache"]

#: Estimated bytes per cached token id (a tuple slot plus, at worst, its own int object).
BYTES_PER_TOKEN = 36
#: Estimated bytes per cached segment (the segment object and its tuple slot), besides its text.
BYTES_PER_SEGMENT = 56


@dataclass(frozen=True, slots=True)
class PromptCacheStats:
    """A snapshot of a :class:`PromptCache`.

    Attributes:
        entries: cached prompts.
        checkpoints: resumable points over all entries (one digest each).
        bytes: estimated memory held (token ids, segments and their text), an upper bound.
        max_bytes: the bound on ``bytes``.
        hits: requests that resumed at a checkpoint; ``misses``: requests rendered in full.
        reused_tokens: prompt tokens taken from the cache instead of encoded, over all hits.
        evictions: entries dropped to stay within the bounds.
        reused_messages: request messages whose validation and conversion were taken from an
            earlier request that sent the same JSON bytes (:mod:`recipe.api.reuse`), over all requests.
        message_bytes: estimated memory those earlier messages hold (within ``max_bytes``).
    """

    entries: int
    checkpoints: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    reused_tokens: int
    evictions: int
    reused_messages: int = 0
    message_bytes: int = 0


@dataclass(eq=False, slots=True)
class _Entry:
    prompt: Prompt
    ids: tuple[tuple[tuple[int, ...], int], ...]  # the prompt's ids: the first n of each tuple, in order
    context: bytes  # the render context as JSON, with the encoding and tokenizer names
    messages: tuple[Any, ...]  # the conversation's messages (compared on a hit)
    checkpoints: tuple[Checkpoint, ...]
    tokens: tuple[int, ...]  # ids before each checkpoint
    held: tuple[int, ...]  # estimated bytes of the segments and messages before each checkpoint
    keys: list[int] = field(default_factory=list)
    live: int = 0  # keys still pointing here
    cost: int = 0


#: Types whose ``==`` is exact once both sides have the same type.
_EXACT = frozenset({str, int, bool, type(None), bytes})
#: Dataclass type -> a getter of all its field values as a tuple (None: not a dataclass).
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}


def _getter(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    if cls not in _GETTERS:
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        # attrgetter of one name returns the value itself, not a 1-tuple
        _GETTERS[cls] = (operator.attrgetter(*names) if len(names) > 1 else (lambda o, n=names[0]: (getattr(o, n),))) if names else None
    return _GETTERS[cls]


def _same(a: Any, b: Any) -> bool:
    """Exact equality: same types all the way down (``1``, ``1.0``, ``True`` and ``0.0``/``-0.0``
    all differ; key order counts; a value of an unknown type is never equal to another object).

    A container whose values are all str/int/bool/None/bytes, with the same types on both sides,
    is compared with one ``==`` (C speed); other containers are walked."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t in _EXACT:
        return a == b
    if t is float:
        return a.hex() == b.hex()
    if t is tuple or t is list:
        va, vb = a, b
    elif t is dict:
        if list(a) != list(b) or tuple(map(type, a)) != tuple(map(type, b)):
            return False
        va, vb = tuple(a.values()), tuple(b.values())
    else:
        getter = _getter(t)
        if getter is None:
            return False
        va, vb = getter(a), getter(b)
    types = tuple(map(type, va))
    if types != tuple(map(type, vb)):
        return False
    if _EXACT.issuperset(types):
        return va == vb
    return all(map(_same, va, vb))


def _plain_hint(hint: Any) -> bool:
    if hint in (str, bool, int, type(None)):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return all(map(_plain_hint, args))
    if origin is tuple:
        return all(_plain_hint(a) for a in args if a is not Ellipsis)
    if origin is typing.Literal:  # string literals only (``Literal[1]`` would admit ``True``)
        return all(type(a) is str for a in args)
    return isinstance(hint, type) and _plain(hint)


@functools.cache
def _plain(cls: type) -> bool:
    """Whether ``==`` between two instances of the dataclass ``cls`` is exact: every field is
    declared str, bool, int, None or a string ``Literal``, or a tuple / union of those or of such dataclasses (so equal
    instances hold equal strings and numbers of their declared types; :func:`_same` decides for
    any other class)."""
    if not dataclasses.is_dataclass(cls):
        return False
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable annotation: not provably plain
        return False
    return all(_plain_hint(hints.get(f.name)) for f in dataclasses.fields(cls))


def _same_messages(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Exact equality of two message tuples: one C-speed ``==`` when every class is plain (the
    Conversation message types but :class:`~recipe.conversation.SystemMessage`, whose V4.1 tool
    additions hold tool schemas), else ``==`` for the messages of plain classes and :func:`_same`
    for the others, message by message. The very same objects (an agent loop's messages that the
    message memo gave back, :mod:`recipe.api.reuse`) are equal at once."""
    if len(a) != len(b):
        return False
    if all(map(operator.is_, a, b)):
        return True
    classes = set(map(type, a))
    if all(map(_plain, classes)):
        return tuple(map(type, a)) == tuple(map(type, b)) and a == b
    if tuple(map(type, a)) != tuple(map(type, b)):
        return False
    plain = {c for c in classes if _plain(c)}
    return all(x == y if type(x) in plain else _same(x, y) for x, y in zip(a, b))


def _deep_size(value: Any) -> int:
    """Estimated bytes of a message object and what it holds (strings by ``sys.getsizeof``)."""
    t = type(value)
    if t is str:
        return sys.getsizeof(value)
    if t is tuple or t is list:
        return 56 + 8 * len(value) + sum(map(_deep_size, value))
    getter = _getter(t)
    if getter is not None:
        return 64 + sum(map(_deep_size, getter(value)))
    return 32


def _dataclass_fields(obj: Any) -> dict[str, Any]:
    """orjson ``default``: a dataclass as its class name and *every* field (orjson's own
    serialisation skips fields whose names start with ``_``); anything else is refused."""
    getter = _getter(type(obj))
    if getter is None:
        raise TypeError(f"{type(obj).__name__} is not part of a render context")
    names = [f.name for f in dataclasses.fields(obj)]
    return {"__class__": type(obj).__qualname__, **dict(zip(names, getter(obj)))}


_CANONICAL = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _canonical(value: Any) -> bytes:
    """JSON bytes of a render context: dataclasses with every field and their class name; str,
    int, dict and list subclasses, datetimes and other objects refused (``TypeError``)."""
    return orjson.dumps(value, default=_dataclass_fields, option=_CANONICAL)


@dataclass(frozen=True, slots=True)
class _Keys:
    """A conversation's lookup keys: its context and, per boundary k, a hash of ``messages[:k]``
    (a candidate only: a hit is confirmed by comparing the messages themselves)."""

    context: bytes
    at: dict[int, int]


def _lookup_keys(resumable: ResumableRender, name: str, tokenizer: Tokenizer, conversation: Conversation) -> _Keys | None:
    """The keys of ``conversation``, or None when it has no boundary or its context is not JSON
    orjson prints exactly, or a message is unhashable."""
    boundaries = resumable.boundaries(conversation)
    if not boundaries:
        return None
    try:
        context = b"\0".join((name.encode(), tokenizer.fingerprint.encode(), _canonical(resumable.context(conversation))))
        h = hash(context)
        at: dict[int, int] = {}
        messages = conversation.messages
        k = 0
        for b in boundaries:
            while k < b:
                h = hash((h, messages[k]))
                k += 1
            at[b] = h
    except TypeError:  # a value orjson refuses (lone surrogate, 65-bit integer, foreign object), or unhashable
        return None
    return _Keys(context, at)


def _segment_bytes(segments: Sequence[Segment], start: int, marks: Sequence[int]) -> tuple[int, list[int]]:
    """Estimated bytes held by ``segments[start:]`` (each: its tuple slot and object, plus its text's
    ``sys.getsizeof``, an upper bound since template segments are shared), and the running total
    before each mark (marks are segment indices ``>= start``). One C-level pass."""
    running = [0, *itertools.accumulate(map(sys.getsizeof, map(_TEXT, itertools.islice(segments, start, None))))]
    n = len(running) - 1
    return running[n] + BYTES_PER_SEGMENT * n, [running[m - start] + BYTES_PER_SEGMENT * (m - start) for m in marks]


_TEXT = operator.attrgetter("text")


#: Parts an entry's ids may be split into before they are joined into one tuple again.
_MAX_PARTS = 8


def _prefix(parts: tuple[tuple[tuple[int, ...], int], ...], n: int) -> tuple[list[int], tuple[tuple[tuple[int, ...], int], ...]]:
    """The first ``n`` ids of an entry (a new list), and the parts that hold them.

    An entry keeps its ids as parts shared with the entry it was resumed from (the earlier prompt's
    tuple, then each request's new ids), so an agent loop never copies its whole history into a new
    tuple (which the garbage collector would also walk once): it joins them every :data:`_MAX_PARTS`
    requests."""
    ids: list[int] = []
    kept = []
    for t, size in parts:
        if n <= 0:
            break
        take = min(size, n)
        if take == len(t):
            ids += t
        else:
            before = len(ids)
            ids += t
            del ids[before + take :]
        kept.append((t, take))
        n -= take
    return ids, tuple(kept)


def _encode(
    conversation: Conversation,
    prompt: Prompt,
    checkpoints: tuple[Checkpoint, ...],
    found: tuple[_Entry, int] | None,
    keys: _Keys,
    tokenizer: Tokenizer,
    segment_cache: SegmentCache | None,
) -> tuple[list[int], _Entry | None]:
    """The ids of ``prompt`` (the cached ones up to the resumed checkpoint, the rest encoded) and the
    entry to cache: the checkpoints kept from the resumed entry plus the new ones that fall on a
    token boundary and a boundary of the conversation (None when there are none)."""
    if found is None:
        entry, index, start, cp = None, -1, 0, None
    else:
        entry, index = found
        cp, start = entry.checkpoints[index], entry.tokens[index]
    first_segment = 0 if cp is None else cp.segments
    first_message = 0 if cp is None else cp.messages
    marks = [c.segments for c in checkpoints]
    tail, offsets = encode_segments(tokenizer, prompt.segments, segment_cache, marks, start=first_segment)
    seg_bytes, bytes_at = _segment_bytes(prompt.segments, first_segment, marks)
    msg_at = [0]
    for size in map(_deep_size, conversation.messages[first_message:]):
        msg_at.append(msg_at[-1] + size)
    if entry is None:
        ids, base_bytes = tail, 0
        kept: tuple[tuple[Checkpoint, ...], tuple[int, ...], tuple[int, ...]] = ((), (), ())
        parts: tuple[tuple[tuple[int, ...], int], ...] = ((tuple(tail), len(tail)),)
    else:
        ids, parts = _prefix(entry.ids, start)
        ids += tail
        base_bytes = entry.held[index]
        kept = (entry.checkpoints[: index + 1], entry.tokens[: index + 1], entry.held[: index + 1])
        parts = ((tuple(ids), len(ids)),) if len(parts) >= _MAX_PARTS else (*parts, (tuple(tail), len(tail)))
    new = [
        (c, start + o, base_bytes + a + msg_at[c.messages - first_message])
        for c, o, a in zip(checkpoints, offsets, bytes_at)
        if o is not None and c.messages in keys.at
    ]
    if not kept[0] and not new:
        return ids, None
    stored = _Entry(
        prompt,
        parts,
        keys.context,
        conversation.messages,
        kept[0] + tuple(c for c, _, _ in new),
        kept[1] + tuple(o for _, o, _ in new),
        kept[2] + tuple(a for _, _, a in new),
    )
    stored.cost = BYTES_PER_TOKEN * len(ids) + base_bytes + seg_bytes + msg_at[-1] + len(keys.context)
    return ids, stored


class PromptCache:
    """Earlier prompts' segments and token ids at their checkpoints, for exact reuse (module docstring).

    A request parsed from JSON text by ``prepare`` also reuses the validated and converted messages
    an earlier request sent byte for byte (``messages``: a :class:`~recipe.api.reuse.MessageMemo`
    holding at most a quarter of ``max_bytes``), so the agent loop's next request validates and
    converts only what it added.

    Args:
        max_bytes: bound on the estimated memory held (default 256 MiB: about fifty 100k-token
            conversations); least recently used entries are evicted first.
        max_entries: bound on the number of cached prompts.
    """

    def __init__(self, max_bytes: int = 256 * 1024 * 1024, max_entries: int = 4096) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.messages = MessageMemo(max_bytes // 4)
        self._keys: dict[int, tuple[_Entry, int]] = {}
        self._lru: OrderedDict[int, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = self._misses = self._reused = self._evictions = 0

    def render_encode(
        self,
        encoding: Encoding,
        conversation: Conversation,
        tokenizer: Tokenizer,
        segment_cache: SegmentCache | None = None,
    ) -> tuple[Prompt, list[int]]:
        """The prompt of ``conversation`` and its token ids, resumed from the longest cached
        checkpoint whose digest matches (else rendered in full), then cached for later requests.

        Equal to ``encoding.render(conversation)`` and ``encode_prompt(tokenizer, prompt)``.

        Raises:
            TokenizerError: as :func:`~recipe.prompt.encode_segments`.
        """
        resumable = encoding.resumable
        keys = None if resumable is None else _lookup_keys(resumable, encoding.name, tokenizer, conversation)
        if resumable is None or keys is None:
            prompt = encoding.render(conversation)
            return prompt, encode_segments(tokenizer, prompt.segments, segment_cache)[0]
        found = self._find(keys, conversation.messages)
        resume = None if found is None else (found[0].prompt, found[0].checkpoints[found[1]])
        prompt, checkpoints = resumable.render(conversation, resume)
        ids, entry = _encode(conversation, prompt, checkpoints, found, keys, tokenizer, segment_cache)
        if entry is not None:
            self._store(entry, keys)
        return prompt, ids

    def _find(self, keys: _Keys, messages: tuple[Any, ...]) -> tuple[_Entry, int] | None:
        """The entry and checkpoint index of the longest boundary whose candidate is confirmed:
        same context bytes, and the cached conversation's messages before it exactly equal."""
        for k in sorted(keys.at, reverse=True):
            with self._lock:
                hit = self._keys.get(keys.at[k])
            if hit is None:
                continue
            entry, index = hit
            if entry.checkpoints[index].messages != k or entry.context != keys.context:
                continue
            if not _same_messages(messages[:k], entry.messages[:k]):
                continue
            with self._lock:
                if id(entry) in self._lru:
                    self._lru.move_to_end(id(entry))
                self._hits += 1
                self._reused += entry.tokens[index]
            return hit
        with self._lock:
            self._misses += 1
        return None

    def _store(self, entry: _Entry, keys: _Keys) -> None:
        if entry.cost > self.max_bytes:
            return
        with self._lock:
            for index, cp in enumerate(entry.checkpoints):
                key = keys.at[cp.messages]
                old = self._keys.get(key)
                if old is not None:
                    self._unref(old[0])
                self._keys[key] = (entry, index)
                entry.keys.append(key)
                entry.live += 1
            self._lru[id(entry)] = entry
            self._bytes += entry.cost
            while self._bytes > self.max_bytes or len(self._lru) > self.max_entries:
                _, victim = self._lru.popitem(last=False)
                self._drop(victim)
                self._evictions += 1

    def _unref(self, entry: _Entry) -> None:
        """One key of ``entry`` now points elsewhere; an entry no key reaches is dropped."""
        entry.live -= 1
        if entry.live == 0 and self._lru.pop(id(entry), None) is not None:
            self._bytes -= entry.cost

    def _drop(self, entry: _Entry) -> None:
        self._bytes -= entry.cost
        for key in entry.keys:
            hit = self._keys.get(key)
            if hit is not None and hit[0] is entry:
                del self._keys[key]
        entry.live = 0

    def stats(self) -> PromptCacheStats:
        """Counts, estimated bytes held and hit statistics (:class:`PromptCacheStats`)."""
        with self._lock:
            return PromptCacheStats(
                entries=len(self._lru),
                checkpoints=len(self._keys),
                bytes=self._bytes,
                max_bytes=self.max_bytes,
                hits=self._hits,
                misses=self._misses,
                reused_tokens=self._reused,
                evictions=self._evictions,
                reused_messages=self.messages.reused,
                message_bytes=self.messages.bytes,
            )

    def clear(self) -> None:
        """Drop every entry (statistics are kept)."""
        self.messages.clear()
        with self._lock:
            self._keys.clear()
            self._lru.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._lru)


_default = PromptCache()


def default_prompt_cache() -> PromptCache:
    """The process-wide prompt cache ``prepare`` uses unless told otherwise (share it in a server)."""
    return _default
