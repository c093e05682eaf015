"""Earlier requests' messages, validated and converted, reused when a body repeats them exactly.

An agent re-sends its whole history with each request. :class:`MessageMemo` keeps, for recent
requests, each message of the conversation as parsed from the body (its JSON value), next to its
validated wire model and the message it converted to. A new body's messages are compared with an
earlier request's, from the first message on, by *exact* equality of JSON values: ``==`` (C speed)
and then the same types all the way down and the same key order (``1``, ``1.0`` and ``true``
differ, as do ``0.0`` and ``-0.0``; strings need no second look). The longest run of exactly equal
messages (the *unchanged prefix*) takes its wire models and conversions from the memo, and only the
rest of the body is validated and converted. So the agent loop's next request validates and
converts what it added, and a message edited anywhere ends the reused run there: everything from it
on is validated and converted as in a cold request.

Exactness: a wire model is a pure function of its message's JSON value (pydantic, strict, no
context; for a message the adapter marks, ``==`` alone decides: :meth:`MemoMatch.remember`), and the memo reuses a conversion only under equal conversion rules and only for messages
whose conversion records nothing beside its result (the adapter decides: :meth:`MemoMatch.converted`).
When the rest of the body does not validate, the adapter validates the whole body as a cold request
does, so errors are exactly a cold request's. tests/test_message_memo.py checks cached = uncached
for random edits anywhere in the history.

Earlier requests are found by their first two messages' JSON bytes (a candidate only; the comparison
above decides) and bounded by estimated bytes (least recently used first). Thread-safe.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["MessageMemo", "MemoMatch", "same_json", "strings_only"]

#: Estimated bytes held per character of a message's strings (the strings, its wire model and its
#: conversion), and per container or other value in it.
BYTES_PER_CHAR = 4
BYTES_PER_NODE = 200
#: Earlier requests kept per first-two-messages key (conversations that open the same way).
PER_HEAD = 4


def same_json(a: Any, b: Any) -> bool:
    """Exact equality of two JSON values (as parsed: dict, list, str, int, float, bool, None): equal
    with the same types all the way down and the same key order (``1``, ``1.0``, ``true`` differ;
    ``0.0`` and ``-0.0`` differ). One ``==`` in C, then a walk over the containers and non-string
    scalars only (two equal values hold equal strings at the same places)."""
    return a is b or (a == b and _same_types(a, b))


def _same_types(x: Any, y: Any) -> bool:
    """For ``x == y``: the same types and key order all the way down."""
    t = type(x)
    if t is not type(y):
        return False
    if t is dict:
        if not all(map(operator.eq, x, y)):
            return False
        pairs: Any = zip(x.values(), y.values())
    elif t is list:
        pairs = zip(x, y)
    elif t is float:
        return x.hex() == y.hex()
    else:
        return True  # str, int, bool, None: equal and of one type
    for u, v in pairs:
        if type(u) is not str and u is not None and not _same_types(u, v):  # (a str equals only a str)
            return False
    return True


def strings_only(value: Any) -> bool:
    """Whether every scalar inside the JSON value is a string or null (no number, no boolean)."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack += v.values()
        elif t is list:
            stack += v
        elif t is not str and v is not None:
            return False
    return True


def _size(value: Any) -> int:
    """Estimated bytes a message's JSON value holds once validated and converted."""
    total = 0
    stack = [value]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is str:
            total += BYTES_PER_CHAR * len(x)
            continue
        total += BYTES_PER_NODE
        if t is dict:
            stack += x.values()
        elif t is list:
            stack += x
    return total


def _never(value: Any) -> bool:
    return False


@dataclass(eq=False, slots=True)
class _Earlier:
    raw: tuple[Any, ...]  # each message's JSON value
    wire: tuple[Any, ...]  # its validated wire model
    rules: Any  # the conversion rules ``converted`` was made under
    converted: tuple[Any, ...]  # per message: its conversion, or None (not reusable)
    sizes: tuple[int, ...]  # per message: estimated bytes
    by_eq: tuple[bool, ...]  # per message: ``==`` decides (see MemoMatch.remember)
    cost: int


@dataclass(eq=False, slots=True)
class MemoMatch:
    """What one request may reuse: the earlier request whose first ``length`` messages equal this
    one's exactly (``length`` 0: none), and this request's messages (``raw``: the earlier request's
    values for the unchanged prefix, then this body's).

    The adapter validates ``messages[length:]`` only (:meth:`wire`), converts with
    :meth:`converted`, and calls :meth:`remember` once its conversion succeeded."""

    memo: MessageMemo
    head: tuple[Any, ...]
    raw: tuple[Any, ...]
    length: int
    earlier: _Earlier | None

    def wire(self) -> tuple[Any, ...]:
        """The validated wire models of the first ``length`` messages."""
        return () if self.earlier is None else self.earlier.wire[: self.length]

    def converted(self, rules: Any, wire: list[Any] | tuple[Any, ...]) -> tuple[Any, ...]:
        """Per message of ``wire`` (the request's validated messages), the earlier conversion to reuse
        or None: only within the unchanged prefix, only for the very wire objects the memo gave and
        only under ``rules`` equal to the earlier request's."""
        e = self.earlier
        if e is None or not self.length or e.rules != rules:
            return ()
        n = min(self.length, len(wire))
        return tuple(c if w is v else None for c, w, v in zip(e.converted[:n], wire[:n], e.wire[:n]))

    def remember(self, wire: list[Any] | tuple[Any, ...], rules: Any, converted: list[Any] | tuple[Any, ...],
                 by_eq: Callable[[Any], bool] = _never) -> None:
        """Keep this request's messages for later ones: ``wire`` (one validated model per message,
        in order), the ``rules`` they were converted under and, per message, its conversion or None.

        ``by_eq(message)``: True for a message (a JSON value) that a later one matches when merely
        ``==`` to it — the adapter's wire model reads every object in it by key and keeps none as a
        raw value (so key order is not read), and it holds only strings and nulls
        (:func:`strings_only`: so ``==`` sees every difference of type). Others are compared with
        :func:`same_json`."""
        n = len(self.raw)
        if len(wire) != n or len(converted) != n:
            return
        e, k = self.earlier, self.length
        new = self.raw[k:]
        sizes = (*(e.sizes[:k] if e else ()), *map(_size, new))
        eq = (*(e.by_eq[:k] if e else ()), *map(by_eq, new))
        self.memo._store(self, _Earlier(self.raw, tuple(wire), rules, tuple(converted), sizes, eq, sum(sizes)))


class MessageMemo:
    """Recent requests' messages as JSON values, validated wire models and conversions (module docstring).

    Args:
        max_bytes: bound on the estimated memory held; least recently used requests are dropped first.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._heads: OrderedDict[tuple[Any, ...], list[_Earlier]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.reused = 0  # messages taken from the memo, over all requests

    def match(self, api: str, messages: Any) -> MemoMatch | None:
        """The match of a request's ``messages`` (the body's list of JSON values, as parsed from JSON
        text) against earlier requests of ``api``, or None when it cannot be memoised (not a
        non-empty list, or a first message orjson does not print)."""
        if type(messages) is not list or not messages:
            return None
        try:
            head = (api, *map(orjson.dumps, messages[:2]))
        except (TypeError, orjson.JSONEncodeError):
            return None
        best, length = None, 0
        with self._lock:
            candidates = self._heads.get(head)
            if candidates:
                self._heads.move_to_end(head)
                candidates = tuple(candidates)
        for e in candidates or ():
            n = 0
            for a, b, eq in zip(messages, e.raw, e.by_eq):
                if a is not b and not (a == b if eq else a == b and _same_types(a, b)):
                    break
                n += 1
            if n > length:
                best, length = e, n
        raw = tuple(messages) if best is None else (*best.raw[:length], *messages[length:])
        with self._lock:
            self.reused += length
        return MemoMatch(self, head, raw, length, best)

    def _store(self, match: MemoMatch, entry: _Earlier) -> None:
        if entry.cost > self.max_bytes:
            return
        with self._lock:
            kept = [entry]
            n = len(entry.raw)
            for e in self._heads.pop(match.head, None) or ():
                if len(e.raw) <= n and all(map(operator.is_, e.raw, entry.raw)):
                    self._bytes -= e.cost  # extended (or repeated) by this request, which holds all it held
                else:
                    kept.append(e)
            while len(kept) > PER_HEAD:
                self._bytes -= kept.pop().cost
            self._heads[match.head] = kept
            self._bytes += entry.cost
            while self._bytes > self.max_bytes and self._heads:
                head, oldest = next(iter(self._heads.items()))
                self._bytes -= oldest.pop().cost
                if not oldest:
                    del self._heads[head]

    @property
    def bytes(self) -> int:
        """Estimated bytes held."""
        return self._bytes

    def clear(self) -> None:
        """Drop every earlier request."""
        with self._lock:
            self._heads.clear()
            self._bytes = 0
