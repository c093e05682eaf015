"""Prefix index: which replica holds the longest cached prefix of a request's block keys.

A store maps ``(namespace, block key, replica)`` to an expiry time. Because a block key names its
whole prefix (:mod:`recipe.cache.keys`), a replica's score for a request is the number of *leading*
keys it holds, probed from block 0 (always correct; bisection would need a prefix-closed store).

Backends: :class:`MemoryPrefixIndex` (LRU bounded by entries, TTL per entry, injectable clock) and
:class:`RedisPrefixIndex` (one Redis hash per key, field = replica, value = expiry; one pipelined
round trip per lookup). A store failure raises :class:`PrefixIndexUnavailable`, never a wrong hit.
:func:`simulate` replays a request trace through an index and prices the hits.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Protocol
from urllib.parse import quote

from recipe.cache.keys import KeySpec, PromptUsage, block_keys, cached_prompt_tokens

__all__ = [
    "PrefixIndex",
    "PrefixIndexUnavailable",
    "MemoryPrefixIndex",
    "RedisPrefixIndex",
    "namespace",
    "best_replica",
    "lookup_usage",
    "TraceRequest",
    "SimulationReport",
    "simulate",
]

Clock = Callable[[], float]


class PrefixIndexUnavailable(RuntimeError):
    """The index's store cannot be reached or answered wrongly; treat the request as a cache miss."""


def namespace(spec: KeySpec, prefix: str = "recipe:pc") -> str:
    """Index namespace for a key space: scheme version, block size, model and a tenant tag.

    The tenant tag is SHA-256 of the salt, 64 hex digits (the salt itself is never written to the
    store; whole, so no two salts share a tag), ``-`` without a salt. Fields after ``prefix`` are percent-quoted, so ``:``
    separates them unambiguously.
    """
    tenant = hashlib.sha256(spec.salt.encode("utf-8")).hexdigest() if spec.salt else "-"
    parts = (spec.version, str(spec.block_size), spec.model or "-", tenant)
    return ":".join([prefix, *(quote(p, safe="/") for p in parts)])


def lookup_usage(
    index: PrefixIndex, token_ids: Sequence[int], spec: KeySpec = KeySpec(), replica: str | None = None
) -> tuple[PromptUsage, list[bytes]]:
    """Prompt usage of a request from the index: its cached prefix, in whole blocks, never the whole
    prompt (at least the last token is recomputed), on ``replica`` or on the best-scoring one.

    Returns ``(usage, keys)``: feed ``usage.cached_tokens`` to the API usage fields
    (``CompletionStream(prep, cached_tokens=...)``) and, once the engine has prefilled the prompt,
    ``index.put(namespace(spec), keys, replica)``.

    Raises:
        PrefixIndexUnavailable: the backend cannot be reached (never a guessed hit).
    """
    keys = block_keys(token_ids, spec).keys
    scores = index.scores(namespace(spec), keys)
    matched = scores.get(replica, 0) if replica is not None else best_replica(scores)[1]
    cached = cached_prompt_tokens(len(token_ids), matched, spec.block_size)
    return PromptUsage(len(token_ids), cached), list(keys)


def best_replica(scores: Mapping[str, int]) -> tuple[str | None, int]:
    """The replica with the highest score (ties: smallest name) and its score; ``(None, 0)`` if none."""
    if not scores:
        return None, 0
    name = min(scores, key=lambda r: (-scores[r], r))
    return name, scores[name]


class PrefixIndex(Protocol):
    """What a prefix index offers; ``ns`` is a :func:`namespace`, keys are one request's block keys."""

    def put(self, ns: str, keys: Sequence[bytes], replica: str = "", ttl: float | None = None) -> None:
        """Record that ``replica`` holds these blocks, for ``ttl`` seconds (None: the index default)."""

    def scores(self, ns: str, keys: Sequence[bytes]) -> dict[str, int]:
        """Replica -> number of leading ``keys`` it holds (replicas holding block 0 only)."""

    def longest_prefix(self, ns: str, keys: Sequence[bytes]) -> int:
        """Leading keys held by the best replica (0 if none)."""

    def evict(self, ns: str, keys: Sequence[bytes], replica: str | None = None) -> int:
        """Forget these keys (for one replica, or all); returns the entries removed."""


def _leading(keys: Sequence[bytes], holders: Callable[[int], Iterable[str]]) -> dict[str, int]:
    """Per replica, how many leading keys it holds; ``holders(i)`` gives the live replicas of key i."""
    if not keys:
        return {}
    alive = set(holders(0))
    result: dict[str, int] = {}
    for i in range(1, len(keys)):
        if not alive:
            break
        here = holders(i)
        if len(alive) == 1 and next(iter(alive)) in here:  # the common single-holder case
            continue
        if not isinstance(here, (set, frozenset, dict)):
            here = set(here)
        gone = [r for r in alive if r not in here]  # a hot prefix: many holders, few leave per key
        for r in gone:
            result[r] = i
            alive.discard(r)
    for r in alive:
        result[r] = len(keys)
    return result


class MemoryPrefixIndex:
    """In-process :class:`PrefixIndex`: an LRU of ``(ns, key)`` entries, each with per-replica expiry.

    Args:
        max_entries: block keys kept; the least recently put or matched are dropped beyond it.
        ttl: default seconds a replica's entry lives after its last put (None: no expiry; e.g.
            3 days for agent traffic).
        clock: seconds now (default ``time.time``); inject one in tests and simulations.
    """

    def __init__(self, max_entries: int = 1_000_000, ttl: float | None = None, clock: Clock = time.time) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.ttl = ttl
        self.clock = clock
        self._entries: OrderedDict[tuple[str, bytes], dict[str, float]] = OrderedDict()
        self._expiring = ttl is not None  # some entry may expire (else reads skip the expiry scan)

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, ns: str, keys: Sequence[bytes], replica: str = "", ttl: float | None = None) -> None:
        """See :class:`PrefixIndex`; drops least recently used keys beyond ``max_entries``."""
        ttl = self.ttl if ttl is None else ttl
        expiry = math.inf if ttl is None else self.clock() + ttl
        self._expiring = self._expiring or ttl is not None
        entries = self._entries
        for k in keys:
            held = entries.get((ns, k))
            if held is None:
                entries[(ns, k)] = {replica: expiry}
            else:
                held[replica] = expiry
                entries.move_to_end((ns, k))
        while len(entries) > self.max_entries:
            entries.popitem(last=False)

    def _live(self, ns: str, key: bytes, now: float) -> Iterable[str]:
        held = self._entries.get((ns, key))
        if not held:
            return ()
        if not self._expiring:
            return held
        for r in [r for r, exp in held.items() if exp <= now]:  # expired: forget lazily
            del held[r]
        if not held:
            del self._entries[(ns, key)]
        return held

    def scores(self, ns: str, keys: Sequence[bytes]) -> dict[str, int]:
        """See :class:`PrefixIndex`; matched keys become most recently used."""
        if self._expiring:
            now = self.clock()
            result = _leading(keys, lambda i: self._live(ns, keys[i], now))
        else:
            entries = self._entries
            result = _leading(keys, lambda i: entries.get((ns, keys[i])) or ())
        for k in keys[: max(result.values(), default=0)]:
            self._entries.move_to_end((ns, k))
        return result

    def longest_prefix(self, ns: str, keys: Sequence[bytes]) -> int:
        """See :class:`PrefixIndex`."""
        return best_replica(self.scores(ns, keys))[1]

    def evict(self, ns: str, keys: Sequence[bytes], replica: str | None = None) -> int:
        """See :class:`PrefixIndex` (counts the live replica entries removed)."""
        now, removed = self.clock(), 0
        for k in keys:
            held = self._entries.get((ns, k))
            if held is None:
                continue
            gone = dict(held) if replica is None else {replica: held.pop(replica)} if replica in held else {}
            if replica is None or not held:
                del self._entries[(ns, k)]
            removed += sum(exp > now for exp in gone.values())
        return removed


def _text(field: bytes | str) -> str:
    return field.decode("utf-8") if isinstance(field, bytes) else field


def _live_fields(row: dict[Any, Any], now: float) -> set[str]:
    """The replicas of one index hash whose entry has not expired. A field or value another writer
    left that is not recipe's (a name that is not UTF-8, an expiry that is not a number) is no entry."""
    out = set()
    for f, v in row.items():
        try:
            if float(v) > now:
                out.add(_text(f))
        except (TypeError, ValueError):  # (UnicodeDecodeError is a ValueError)
            continue
    return out


class RedisPrefixIndex:
    """:class:`PrefixIndex` on Redis: hash ``<ns>:<key bytes>``, field replica, value expiry (s).

    Every put refreshes the hash's own Redis expiry to the longest field TTL (``PEXPIRE NX`` then
    ``GT``); a field's logical expiry is checked against ``clock`` on read. Bound memory with the
    server's ``maxmemory-policy`` (e.g. ``volatile-lru``). Each lookup is one pipelined round trip.
    Every command names one key, so the index runs on a Redis Cluster too (``redis+cluster://``).

    Args:
        client: a ``redis.Redis`` (redis-py, the ``dsrecipe[redis]`` extra).
        ttl, clock: as in :class:`MemoryPrefixIndex`.
    Raises:
        PrefixIndexUnavailable: from every method when Redis fails (connection, timeout, error reply).
    """

    def __init__(self, client: Any, ttl: float | None = None, clock: Clock = time.time) -> None:
        self.client = client
        self.ttl = ttl
        self.clock = clock

    @classmethod
    def from_url(cls, url: str, ttl: float | None = None, clock: Clock = time.time, **kwargs: Any) -> RedisPrefixIndex:
        """A client for ``url`` (:func:`recipe.cache.redis_client.connect`: a Redis server, or a Redis
        Cluster with ``redis+cluster://``; ``kwargs`` go to redis-py's ``from_url``; requires redis-py).

        Raises:
            ValueError: a malformed URL.
            PrefixIndexUnavailable: redis-py is not installed.
        """
        from recipe.cache.redis_client import connect

        try:
            return cls(connect(url, **kwargs), ttl, clock)
        except ImportError as exc:  # pragma: no cover - optional extra
            raise PrefixIndexUnavailable("RedisPrefixIndex needs redis-py: pip install 'dsrecipe[redis]' (or 'redis>=5')") from exc

    @staticmethod
    def entry_name(ns: str, key: bytes) -> bytes:
        """The Redis key of one block's hash: ``<ns>:<key bytes>``."""
        return ns.encode("utf-8") + b":" + key

    _name = entry_name

    def _run(self, fill: Callable[[Any], None]) -> list[Any]:
        from recipe.cache.redis_client import redis_errors

        try:
            pipe = self.client.pipeline(transaction=False)
            fill(pipe)
            return pipe.execute()
        except redis_errors() as exc:
            raise PrefixIndexUnavailable(f"prefix index store unavailable: {type(exc).__name__}: {exc}") from exc

    def put(self, ns: str, keys: Sequence[bytes], replica: str = "", ttl: float | None = None) -> None:
        """See :class:`PrefixIndex`."""
        ttl = self.ttl if ttl is None else ttl
        value = "inf" if ttl is None else repr(self.clock() + ttl)
        ms = None if ttl is None else max(1, math.ceil(ttl * 1000))

        def fill(p: Any) -> None:
            for k in keys:
                name = self._name(ns, k)
                p.hset(name, replica, value)
                if ms is None:
                    p.persist(name)
                else:
                    p.pexpire(name, ms, nx=True)
                    p.pexpire(name, ms, gt=True)

        self._run(fill)

    def scores(self, ns: str, keys: Sequence[bytes]) -> dict[str, int]:
        """See :class:`PrefixIndex` (one pipelined ``HGETALL`` per key, one round trip)."""
        if not keys:
            return {}
        rows = self._run(lambda p: [p.hgetall(self._name(ns, k)) for k in keys])
        now = self.clock()
        live = [_live_fields(row, now) for row in rows]
        return _leading(keys, live.__getitem__)

    def longest_prefix(self, ns: str, keys: Sequence[bytes]) -> int:
        """See :class:`PrefixIndex`."""
        return best_replica(self.scores(ns, keys))[1]

    def evict(self, ns: str, keys: Sequence[bytes], replica: str | None = None) -> int:
        """See :class:`PrefixIndex` (counts the live replica entries removed; one round trip)."""
        if not keys:
            return 0
        names = [self._name(ns, k) for k in keys]

        def fill(p: Any) -> None:
            for n in names:
                p.hgetall(n)
            if replica is None:
                for n in names:  # one key a command: the keys lie in different slots of a cluster
                    p.delete(n)
            else:
                for n in names:
                    p.hdel(n, replica)

        rows, now = self._run(fill)[: len(names)], self.clock()
        return sum(replica is None or r == replica for row in rows for r in _live_fields(row, now))


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: its prompt ids, model, tenant salt and arrival time (seconds)."""

    token_ids: Sequence[int]
    model: str = ""
    salt: str | None = None
    time: float | None = None


@dataclass(frozen=True, slots=True)
class SimulationReport:
    """Totals of a replay. ``hit_rate`` = hit tokens / prompt tokens; costs in USD."""

    requests: int
    prompt_tokens: int
    hit_tokens: int
    miss_tokens: int
    hit_rate: float
    cost: float
    cost_without_cache: float

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {f: getattr(self, f) for f in self.__slots__}


def simulate(
    trace: Iterable[TraceRequest],
    spec: KeySpec = KeySpec(),
    *,
    hit_price: float = 0.14,
    miss_price: float = 0.55,
    max_entries: int = 1_000_000,
    ttl: float | None = 3 * 86400,
) -> SimulationReport:
    """Replay ``trace`` through a fresh :class:`MemoryPrefixIndex` (one replica).

    Each request looks up its keys (in the namespace of ``spec`` with the request's model and salt),
    is charged ``cached_prompt_tokens`` hits at ``hit_price`` and the rest at ``miss_price`` (USD per
    million tokens; defaults are DeepSeek's 0.14 / 0.55), then stores its keys. The clock is the
    request's ``time`` (or its position in the trace when absent).
    """
    now = [0.0]
    index = MemoryPrefixIndex(max_entries=max_entries, ttl=ttl, clock=lambda: now[0])
    n = prompt = hits = 0
    cost = 0.0
    for i, req in enumerate(trace):
        now[0] = float(i) if req.time is None else req.time
        rspec = KeySpec(spec.scheme, spec.block_size, req.model, spec.tokenizer, req.salt, spec.hash_seed, spec.tagged_extras)
        keys = block_keys(req.token_ids, rspec).keys
        ns = namespace(rspec)
        usage = PromptUsage(len(req.token_ids), cached_prompt_tokens(len(req.token_ids), index.longest_prefix(ns, keys), spec.block_size))
        index.put(ns, keys)
        n += 1
        prompt += usage.prompt_tokens
        hits += usage.cached_tokens
        cost += usage.cost(hit_price, miss_price)
    return SimulationReport(
        requests=n,
        prompt_tokens=prompt,
        hit_tokens=hits,
        miss_tokens=prompt - hits,
        hit_rate=hits / prompt if prompt else 0.0,
        cost=cost,
        cost_without_cache=prompt * miss_price / 1e6,
    )
