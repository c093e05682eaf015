"""Conversations held by the server: OpenAI Responses ``previous_response_id``.

A serving stack that answers a Responses request with ``store`` not false saves the request's input
items and the response's output items (:func:`remember`); a later request naming that response in
``previous_response_id`` is expanded to the full history before conversion (:func:`expand_request`).
``instructions`` are not carried over (OpenAI Responses semantics). Backends: in memory, SQLite (a
file; survives restarts) and Redis (:mod:`recipe.store.redis_store`, shared by a replica fleet).
:class:`ScopedStore` gives each tenant its own id space over one backend (:func:`scope_key`). A
backend that cannot be reached raises :class:`StoreUnavailable`, never a wrong or missing record.
Records expire ``ttl`` seconds after their ``created_at`` (every backend; ``recipe serve --store-ttl``, default
:data:`DEFAULT_TTL`: OpenAI keeps stored responses 30 days) and can be deleted
(``DELETE /v1/responses/{id}``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import orjson

from recipe.jsonfmt import dumps_wire

from recipe.errors import RequestError

__all__ = [
    "StoredResponse",
    "ConversationStore",
    "StoreUnavailable",
    "MemoryStore",
    "SQLiteStore",
    "ScopedStore",
    "scope_key",
    "split_scope_key",
    "history",
    "expand_request",
    "relocate_error",
    "remember",
    "MAX_CHAIN",
    "DEFAULT_TTL",
]

#: Longest ``previous_response_id`` chain followed (guards against cycles and runaway histories).
MAX_CHAIN = 10_000
#: Seconds a stored response lives by default in ``recipe serve`` (30 days, as OpenAI stores responses).
DEFAULT_TTL = 30 * 24 * 3600


def _expired(created_at: int, ttl: float | None, now: float | None = None) -> bool:
    """A record created at ``created_at`` (Unix seconds) is past ``ttl`` seconds (None: never)."""
    return ttl is not None and created_at + ttl <= (time.time() if now is None else now)


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored turn.

    Attributes:
        id: the response id (``resp_…``).
        previous_response_id: the turn it continued, or None.
        input_items: the request's own input items (a string input as one user message item).
        output_items: the response's output items (reasoning, message, function_call …).
        model: the model name the response reported.
        created_at: Unix seconds.
        response: the whole response object as answered (for ``GET /v1/responses/{id}``), or None.
    """

    id: str
    previous_response_id: str | None
    input_items: tuple[Any, ...]
    output_items: tuple[Any, ...]
    model: str = ""
    created_at: int = 0
    response: Any = None


class StoreUnavailable(RuntimeError):
    """The store's backend cannot be reached or failed; the operation did not happen."""


class ConversationStore(Protocol):
    """Where stored responses live. Implementations must be safe to call from several threads."""

    def save(self, record: StoredResponse) -> None:
        """Store ``record`` under ``record.id`` (replacing an older record with that id)."""

    def load(self, response_id: str) -> StoredResponse | None:
        """The record stored under ``response_id``, or None (also once it expired)."""

    def delete(self, response_id: str) -> bool:
        """Remove the record stored under ``response_id``; True when there was one (an expired
        record counts as none)."""


class MemoryStore:
    """In-process store, least recently used records evicted past ``max_entries``; a record is
    gone ``ttl`` seconds after its ``created_at`` (None: kept until evicted)."""

    def __init__(self, max_entries: int = 100_000, ttl: float | None = None) -> None:
        self.max_entries = max_entries
        self.ttl = ttl
        self._data: OrderedDict[str, StoredResponse] = OrderedDict()
        self._lock = threading.Lock()

    def save(self, record: StoredResponse) -> None:
        """Store ``record``; evicts the least recently used record when full."""
        with self._lock:
            self._data[record.id] = record
            self._data.move_to_end(record.id)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def load(self, response_id: str) -> StoredResponse | None:
        """The record for ``response_id`` or None."""
        with self._lock:
            rec = self._data.get(response_id)
            if rec is not None and _expired(rec.created_at, self.ttl):
                del self._data[response_id]
                return None
            if rec is not None:
                self._data.move_to_end(response_id)
            return rec

    def delete(self, response_id: str) -> bool:
        """Remove ``response_id``'s record; True when there was one (not expired)."""
        with self._lock:
            rec = self._data.pop(response_id, None)
        return rec is not None and not _expired(rec.created_at, self.ttl)


class SQLiteStore:
    """A store in one SQLite file (created if missing); records survive process restarts. A record
    is gone ``ttl`` seconds after its ``created_at`` (None: kept); expired rows are removed on the
    first save after each :data:`PURGE_EVERY` seconds.

    Raises:
        sqlite3.Error: the file cannot be opened or created.
    """

    #: Seconds between two purges of expired rows.
    PURGE_EVERY = 60.0

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS responses ("
        " id TEXT PRIMARY KEY, previous_id TEXT, model TEXT, created_at INTEGER,"
        " input BLOB NOT NULL, output BLOB NOT NULL, response BLOB)"
    )

    def __init__(self, path: str | Path, ttl: float | None = None) -> None:
        self.path = Path(path)
        self.ttl = ttl
        self._purged = 0.0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(self._SCHEMA)
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(responses)")}
        if "response" not in columns:  # a file written before the column existed
            self._conn.execute("ALTER TABLE responses ADD COLUMN response BLOB")
        self._lock = threading.Lock()

    def save(self, record: StoredResponse) -> None:
        """Insert or replace ``record`` (committed before returning)."""
        row = (
            record.id,
            record.previous_response_id,
            record.model,
            record.created_at,
            dumps_wire(list(record.input_items)),
            dumps_wire(list(record.output_items)),
            None if record.response is None else dumps_wire(record.response),
        )
        now = time.time()
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            if self.ttl is not None and now - self._purged >= self.PURGE_EVERY:
                self._purged = now
                self._conn.execute("DELETE FROM responses WHERE created_at + ? <= ?", (self.ttl, now))

    def load(self, response_id: str) -> StoredResponse | None:
        """The record for ``response_id`` or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT id, previous_id, model, created_at, input, output, response FROM responses WHERE id = ?",
                (response_id,),
            ).fetchone()
        if row is None or _expired(row[3] or 0, self.ttl):
            return None
        return StoredResponse(row[0], row[1], tuple(_loads(row[4])), tuple(_loads(row[5])), row[2] or "", row[3] or 0,
                              None if row[6] is None else _loads(row[6]))

    def delete(self, response_id: str) -> bool:
        """Remove ``response_id``'s row (committed before returning); True when there was one (not
        expired)."""
        with self._lock:
            row = self._conn.execute("SELECT created_at FROM responses WHERE id = ?", (response_id,)).fetchone()
            if row is not None:
                self._conn.execute("DELETE FROM responses WHERE id = ?", (response_id,))
        return row is not None and not _expired(row[0] or 0, self.ttl)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()


def scope_key(scope: str, response_id: str) -> str:
    """The backend key of ``response_id`` in tenant ``scope``: ``LEN:SCOPE/ID`` (``LEN`` the scope's
    length in code points, decimal), so no two distinct ``(scope, id)`` pairs share a key whatever
    characters either holds (``/``, ``:``, NUL, any unicode). The open server's scope (``""``) keeps
    bare ids, as it always did, except an id that reads as a ``LEN:SCOPE/ID`` key: that one is
    ``0:/ID``. :func:`split_scope_key` inverts it.
    """
    if not scope and _parse(response_id) is None:
        return response_id
    return f"{len(scope)}:{scope}/{response_id}"


def _parse(key: str) -> tuple[str, str] | None:
    digits, colon, rest = key.partition(":")
    if not colon or not digits.isascii() or not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return None
    n = int(digits)
    if len(rest) <= n or rest[n] != "/":
        return None
    return rest[:n], rest[n + 1:]


def split_scope_key(key: str) -> tuple[str, str]:
    """``(scope, id)`` of a :func:`scope_key` key (a bare id: the open scope's, ``("", key)``)."""
    return _parse(key) or ("", key)


def _legacy_key(scope: str, response_id: str) -> str | None:
    """The key a tenant's record had before :func:`scope_key` (``SCOPE/ID``), when that key can only
    have been written for this pair: neither part holds ``/`` (so the split is unique) and the scope
    holds no ``:`` (so it is no ``LEN:SCOPE/ID`` key); else None. (Only a record saved by a caller
    of the open scope with an id holding ``/`` could share it; the server makes no such ids.)"""
    if not scope or "/" in scope or "/" in response_id or ":" in scope:
        return None
    return f"{scope}/{response_id}"


class ScopedStore:
    """One tenant's view of a shared store: ids are kept under :func:`scope_key` keys in the backend
    (``LEN:SCOPE/ID``), so a tenant can neither load nor continue (``previous_response_id``) another
    tenant's responses, whatever the tenants' names and the ids hold.

    A tenant's records written before that form (``SCOPE/ID``) are still read where that key cannot
    belong to another tenant's pair (see :func:`_legacy_key`); the open scope's keys did not change.

    Args:
        inner: the shared backend.
        scope: the tenant's name (``""``: the open server's one scope).
    """

    def __init__(self, inner: ConversationStore, scope: str) -> None:
        self.inner = inner
        self.scope = scope

    def save(self, record: StoredResponse) -> None:
        """Save ``record`` under this scope."""
        prev = record.previous_response_id
        self.inner.save(replace(record, id=scope_key(self.scope, record.id),
                                previous_response_id=None if prev is None else scope_key(self.scope, prev)))

    def delete(self, response_id: str) -> bool:
        """Remove this scope's record for ``response_id`` (a record under its key from before
        :func:`scope_key` too); False for another scope's ids."""
        if self.inner.delete(scope_key(self.scope, response_id)):
            return True
        legacy = _legacy_key(self.scope, response_id)
        return legacy is not None and self.inner.delete(legacy)

    def load(self, response_id: str) -> StoredResponse | None:
        """This scope's record for ``response_id``, or None (also for another scope's ids)."""
        rec = self.inner.load(scope_key(self.scope, response_id))
        if rec is not None:
            prev = rec.previous_response_id
            owner, prev_id = split_scope_key(prev) if prev is not None else (self.scope, None)
            return replace(rec, id=response_id, previous_response_id=prev_id if owner == self.scope else prev)
        legacy = _legacy_key(self.scope, response_id)
        rec = None if legacy is None else self.inner.load(legacy)
        if rec is None:
            return None
        prev, head = rec.previous_response_id, f"{self.scope}/"
        return replace(rec, id=response_id, previous_response_id=prev[len(head):] if prev and prev.startswith(head) else prev)


def _loads(data: bytes) -> Any:
    """Stored items back (orjson; the stdlib for what only it reads, e.g. escaped lone surrogates)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _not_found(response_id: str) -> RequestError:
    return RequestError(
        f"Previous response with id '{response_id}' not found.",
        param="previous_response_id",
        status=400,
        code="previous_response_not_found",
    )


def history(store: ConversationStore, response_id: str) -> list[Any]:
    """Input and output items of ``response_id`` and every turn before it, oldest first.

    Raises:
        RequestError: 400 ``previous_response_not_found`` when any turn of the chain is missing,
            or when the chain is longer than :data:`MAX_CHAIN` (a cycle).
    """
    chain: list[StoredResponse] = []
    seen: set[str] = set()
    current: str | None = response_id
    while current is not None:
        if current in seen or len(chain) >= MAX_CHAIN:
            raise RequestError(
                f"Previous response chain of '{response_id}' is too long or cyclic.", param="previous_response_id"
            )
        seen.add(current)
        rec = store.load(current)
        if rec is None:
            raise _not_found(current)
        chain.append(rec)
        current = rec.previous_response_id
    items: list[Any] = []
    for rec in reversed(chain):
        items.extend(rec.input_items)
        items.extend(rec.output_items)
    return items


def _input_items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return list(value)
    return [value]  # not a valid input: left for the request validator to reject


def expand_request(body: Mapping[str, Any], store: ConversationStore) -> dict[str, Any]:
    """``body`` with ``previous_response_id``'s whole history put in front of its own ``input``.

    A body without ``previous_response_id`` is returned unchanged (as a dict). Never mutates ``body``.

    Raises:
        RequestError: unknown or invalid ``previous_response_id`` (OpenAI's 400 shape, field path
            ``previous_response_id``).
    """
    prev = body.get("previous_response_id")
    if prev is None:
        return dict(body)
    if not isinstance(prev, str) or not prev:
        raise RequestError("Invalid 'previous_response_id': expected a non-empty string.", param="previous_response_id", stage="parse")
    return {**body, "input": history(store, prev) + _input_items(body.get("input"))}


_INPUT_INDEX = re.compile(r"\binput\[(\d+)\]")


def relocate_error(err: RequestError, body: Mapping[str, Any], expanded: Mapping[str, Any]) -> RequestError:
    """``err`` (raised for the :func:`expand_request` result ``expanded``) with its field paths said
    against the request the client sent (``body``).

    The stored history sits in front of the client's own ``input``, so an error at ``input[k]`` of
    the expanded body is at ``input[k - n]`` of the request (``n``: the history's item count); an
    error inside the stored history itself is reported on ``previous_response_id``, naming the
    stored item. Both the ``param`` and any ``input[k]`` in the message are rewritten. An error
    without an ``input[k]`` path is returned unchanged.
    """
    n = len(_input_items(expanded.get("input"))) - len(_input_items(body.get("input")))
    if n <= 0 or err.param is None:
        return err
    m = _INPUT_INDEX.match(err.param)
    if m is None:
        return err
    k = int(m.group(1))
    if k < n:
        msg = _INPUT_INDEX.sub(lambda g: f"stored conversation item {g.group(1)}", err.message)
        if msg == err.message:
            msg = f"{err.message} (in the stored conversation, item {k} of {n})"
        return replace(err, message=msg, param="previous_response_id")
    shift = lambda g: f"input[{int(g.group(1)) - n}]" if int(g.group(1)) >= n else g.group(0)  # noqa: E731
    return replace(err, message=_INPUT_INDEX.sub(shift, err.message), param=_INPUT_INDEX.sub(shift, err.param))


def remember(store: ConversationStore, body: Mapping[str, Any], response: Mapping[str, Any]) -> bool:
    """Save one answered Responses request unless it said ``"store": false``.

    Args:
        body: the request as the client sent it (before :func:`expand_request`).
        response: the response object (the non-streamed response, or ``response.completed``'s
            ``response``) with ``id``, ``output``, ``model`` and ``created_at``.

    Returns:
        True when the turn was saved.

    Raises:
        ValueError: ``response`` is not a response object (no string ``id`` or a non-list ``output``).
    """
    if body.get("store") is False:
        return False
    if not isinstance(response.get("id"), str) or not isinstance(response.get("output") or [], list):
        raise ValueError("remember() needs a Responses response object: a string `id` and a list `output`")
    store.save(
        StoredResponse(
            id=str(response["id"]),
            previous_response_id=body.get("previous_response_id"),
            input_items=tuple(_input_items(body.get("input"))),
            output_items=tuple(dict(i) if isinstance(i, Mapping) else i for i in response.get("output") or ()),
            model=str(response.get("model") or ""),
            created_at=int(response.get("created_at") or time.time()),
            response=dict(response),
        )
    )
    return True
