"""The replica pool: each request goes to the replica where it costs least — uncached prefill tokens
(from the prefix index of its block keys, memory or Redis) plus load (requests in flight — this
server's, plus the other frontends' when they share their counts through Redis,
:mod:`recipe.serve.shared_load` — and the engines' own running / waiting requests and KV usage
scraped from their ``/metrics``):
:mod:`recipe.serve.routing`. ``routing="prefix"`` is the older rule, the longest cached prefix with
ties and an imbalance guard by load. Every routed request records its keys for its replica.

What a replica holds comes from one of two views. A vLLM replica that publishes KV events (its spec's
``kv_events=``: :mod:`recipe.serve.kv_events`) is read *exactly*: the blocks its events say it holds,
kept in the same index (namespace :data:`~recipe.serve.kv_events.EVENTS_NAMESPACE`) and looked up
with recipe's vLLM keys of the prompt. Every other replica (SGLang, replay, a vLLM without events, or
one whose event stream is disconnected or whose hashes do not match) is read from the *estimate*:
the keys of the requests routed to it (``/metrics``: ``recipe_replica_cache_view``).

With one replica nothing is hashed or looked up. A failing index (Redis down) never fails a request:
it is routed by load alone and counted (``recipe_prefix_index_errors_total``).

Replica health: a replica whose connection failed (refused, unreachable, connect timeout) or broke
is ejected for a backoff (1 s, doubling per consecutive failure up to 30 s) and routed around while
another replica is in; a request refused before a byte reached the engine is retried on another
replica (:meth:`ReplicaPool.failover`), never the one that just failed. A background probe
(:meth:`ReplicaPool.probe`: each HTTP engine's ``GET /health``) says which replicas are reachable
(``/health/ready``) and readmits an ejected one as soon as it answers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from recipe.cache.index import MemoryPrefixIndex, PrefixIndex, PrefixIndexUnavailable, RedisPrefixIndex, namespace
from recipe.cache.keys import DEFAULT_BLOCK_SIZE, KeySpec, block_keys, cached_prompt_tokens
from recipe.serve.engines.base import Engine, EngineError
from recipe.serve.kv_events import EVENTS_NAMESPACE, KVEventSubscriber
from recipe.serve.routing import ROUTING_POLICIES, Candidate, EngineLoad, RoutingWeights, parse_engine_metrics, pick

__all__ = ["Replica", "Route", "ReplicaPool", "EJECT_BASE_SECONDS", "EJECT_MAX_SECONDS"]

_log = logging.getLogger(__name__)
#: The largest engine ``/metrics`` page read (bytes); past it the engine's load is not read.
_METRICS_LIMIT = 8 * 1024 * 1024

#: A replica's first ejection lasts this many seconds, doubled per consecutive failure up to the max.
EJECT_BASE_SECONDS = 1.0
EJECT_MAX_SECONDS = 30.0


@dataclass(slots=True)
class Replica:
    """One engine of the pool, its load and its health.

    Attributes:
        in_flight: this server's requests on it now.
        others: the requests the fleet's other frontends have on it (the shared load's last sync,
            :mod:`recipe.serve.shared_load`; 0 without one).
        load: its engine's own load, scraped from its ``/metrics`` (None: not scraped).
        failures: consecutive connection failures (0 after a success or a good probe).
        ejected_until: ``time.monotonic()`` until which the replica is routed around (0: in).
        reachable: the last probe's answer (None: not probed yet; an engine without a probe is
            always reachable).
        events: the subscriber to its KV events (None: the estimate alone, or data-parallel ranks).
        ranks: with data-parallel ranks (a spec's ``dp_size=N``), each rank's subscriber, in rank
            order (empty otherwise).
    """

    engine: Engine
    name: str
    in_flight: int = 0
    served: int = 0
    others: int = 0
    load: EngineLoad | None = None
    failures: int = 0
    ejected_until: float = 0.0
    reachable: bool | None = None
    events: KVEventSubscriber | None = None
    ranks: tuple[KVEventSubscriber, ...] = ()

    @property
    def subscribers(self) -> tuple[KVEventSubscriber, ...]:
        """Its KV-event subscribers: each rank's, or the one, or none."""
        return self.ranks or ((self.events,) if self.events is not None else ())

    @property
    def exact(self) -> bool:
        """Whether routing reads this replica's cache from its KV events (else the estimate): some
        subscriber is exact and none found a rank the spec does not name."""
        subs = self.subscribers
        return any(s.exact for s in subs) and not any(s.wrong_rank for s in subs)

    @property
    def requests(self) -> int:
        """Requests in flight on it from every frontend: :attr:`in_flight` + :attr:`others`."""
        return self.in_flight + self.others

    def ejected(self, now: float | None = None) -> bool:
        """Whether the replica is routed around now."""
        return self.ejected_until > (time.monotonic() if now is None else now)


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes: the replica, its index namespace and keys, the matched prefix.

    Attributes:
        cached_tokens: prompt tokens the chosen replica is expected to hold (from its KV events
            when it publishes them, else the index's estimate; the engine's own count, when it
            reports one, wins in the usage).
        index_failed: the index could not be read (routed by load).
        dp_rank: the data-parallel rank of the replica to run it on (the one whose KV events hold the
            longest prefix of it), or None: the engine picks.
    """

    replica: Replica
    ns: str = ""
    keys: Sequence[bytes] = field(default=())
    cached_tokens: int = 0
    index_failed: bool = False
    dp_rank: int | None = None


class ReplicaPool:
    """Replicas behind one server.

    Args:
        engines: the replicas (names must be unique; duplicates get ``#2``, ``#3`` suffixes).
        index: the prefix index (default: in memory).
        block_size: tokens per block for the keys (DeepSeek's 64).
        max_imbalance: ``prefix`` routing: skip the longest-prefix replica for the least loaded one
            when it has this many more requests in flight (None: never).
        routing: ``cost`` (default) or ``prefix`` (see the module docstring).
        weights: the cost's weights (:class:`~recipe.serve.routing.RoutingWeights`).
        reads_cache: whether routing gives the replicas credit for what they cache (False: a P/D
            pool's decode replicas, chosen by load; their KV events are not followed).

    Raises:
        ValueError: no engines, or an unknown ``routing``.
    """

    def __init__(self, engines: Sequence[Engine], index: PrefixIndex | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 max_imbalance: int | None = 32, routing: str = "cost", weights: RoutingWeights = RoutingWeights(),
                 reads_cache: bool = True) -> None:
        if not engines:
            raise ValueError("a replica pool needs at least one engine")
        if routing not in ROUTING_POLICIES:
            raise ValueError(f"routing must be one of {', '.join(ROUTING_POLICIES)}, not {routing!r}")
        self.routing, self.weights, self.reads_cache = routing, weights, reads_cache
        names: set[str] = set()
        self.replicas: list[Replica] = []
        for e in engines:
            name, n = e.name, 1
            while name in names:
                n += 1
                name = f"{e.name}#{n}"
            names.add(name)
            self.replicas.append(Replica(e, name))
        self._by_name = {r.name: r for r in self.replicas}
        self.index: PrefixIndex = index if index is not None else MemoryPrefixIndex()
        self.block_size = block_size
        self.max_imbalance = max_imbalance
        self._blocking = isinstance(self.index, RedisPrefixIndex)
        self._index_down = False  # logged once per outage of the index

    def __len__(self) -> int:
        return len(self.replicas)

    def get(self, name: str) -> Replica | None:
        """The replica named ``name``, or None."""
        return self._by_name.get(name)

    def _by_load(self, candidates: Sequence[Replica]) -> Replica:
        return min(candidates, key=lambda r: (r.requests, r.served))

    def available(self) -> list[Replica]:
        """The replicas not ejected now; all of them when every one is (a request still gets a try)."""
        now = time.monotonic()
        live = [r for r in self.replicas if not r.ejected(now)]
        return live or self.replicas

    def ready(self) -> bool:
        """Whether some replica is reachable (per the last probe; unprobed ones count as reachable)."""
        return any(r.reachable is not False for r in self.replicas)

    def failed(self, replica: Replica, err: EngineError) -> None:
        """Record a failure of ``replica``: a connection failure (``unavailable``, a connect
        ``timeout``) ejects it for the backoff; other errors (the engine answered) leave it in."""
        if err.kind != "unavailable" and not err.connect_failed:
            return
        replica.failures += 1
        backoff = min(EJECT_BASE_SECONDS * 2 ** (replica.failures - 1), EJECT_MAX_SECONDS)
        replica.ejected_until = time.monotonic() + backoff
        replica.reachable = False if err.connect_failed else replica.reachable
        if replica.failures == 1:
            _log.warning("replica %s ejected for %.0f s: %s", replica.name, backoff, err.message)

    def succeeded(self, replica: Replica) -> None:
        """Record that ``replica`` answered: it is back in with no failures."""
        if replica.failures or replica.ejected_until:
            _log.info("replica %s is back", replica.name)
        replica.failures, replica.ejected_until, replica.reachable = 0, 0.0, True

    def failover(self, failed: Replica, err: EngineError, tried: set[str]) -> Replica | None:
        """Where to resend a request whose connection to ``failed`` was never made (``err.
        connect_failed``): the least loaded replica not ejected and not in ``tried``, moving the
        request's in-flight count there; None when the error allows no retry or none is left."""
        self.failed(failed, err)
        if not err.connect_failed:
            return None
        now = time.monotonic()
        rest = [r for r in self.replicas if r.name not in tried and r is not failed and not r.ejected(now)]
        if not rest:
            return None
        chosen = self._by_load(rest)
        failed.in_flight -= 1
        chosen.in_flight += 1
        chosen.served += 1
        return chosen

    async def probe(self) -> None:
        """Probe every replica once, at the same time: an engine with an ``async ping()`` (the HTTP
        connectors: ``GET /health``, any answer below 500) is reachable when it answers, and then
        readmitted if it was ejected; an engine without one always is."""

        async def one(r: Replica) -> None:
            ping = getattr(r.engine, "ping", None)
            try:
                ok = True if ping is None else bool(await ping())
            except Exception:  # a probe never fails the server
                ok = False
            if ok and (r.failures or r.ejected_until):
                self.succeeded(r)
            elif not ok and r.reachable is not False:
                _log.warning("replica %s is unreachable (health probe failed)", r.name)
            r.reachable = ok

        await asyncio.gather(*(one(r) for r in self.replicas))

    async def probe_forever(self, interval: float) -> None:
        """:meth:`probe` every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.probe()

    async def route(self, token_ids: Sequence[int], salt: str | None, model: str = "") -> Route:
        """Pick the replica for a prompt and record its keys there (see the module docstring);
        ejected replicas are skipped while another is in."""
        if len(self.replicas) == 1:
            return Route(self.replicas[0])
        candidates = self.available()
        spec = KeySpec(block_size=self.block_size, model=model, salt=salt)
        keys = block_keys(token_ids, spec).keys
        ns = namespace(spec)
        try:
            scores = await self._call(self.index.scores, ns, keys)
        except PrefixIndexUnavailable as exc:
            self._index_failed(exc)
            return Route(self._by_load(candidates), ns, keys, 0, True)
        n = len(token_ids)
        cached = {r.name: cached_prompt_tokens(n, scores.get(r.name, 0), self.block_size) for r in candidates}
        exact = await self._exact(token_ids, salt, candidates)
        cached.update((name, held) for name, (held, _) in exact.items())
        if self.routing == "cost":
            chosen = self._by_cost(candidates, cached, n)
        else:
            best = max(cached.values(), default=0)
            chosen = self._by_load([r for r in candidates if cached[r.name] == best])
            least = self._by_load(candidates)
            if self.max_imbalance is not None and chosen.requests - least.requests >= self.max_imbalance:
                chosen = least
        failed = False
        try:  # the estimate's record (a replica's fallback view while its events are not read)
            await self._call(self.index.put, ns, keys, chosen.name)
        except PrefixIndexUnavailable as exc:
            self._index_failed(exc)
            failed = True
        else:
            if self._index_down:
                self._index_down = False
                _log.warning("the prefix index answers again: routing by cached prefix")
        return Route(chosen, ns, keys, cached[chosen.name], failed, exact.get(chosen.name, (0, None))[1])

    def _index_failed(self, exc: Exception) -> None:
        """Log the first failure of an index outage (each failure is counted in
        ``recipe_prefix_index_errors_total``)."""
        if not self._index_down:
            self._index_down = True
            _log.warning("prefix index unavailable (%s): routing by load until it answers", exc)

    async def _exact(self, token_ids: Sequence[int], salt: str | None,
                     candidates: Sequence[Replica]) -> dict[str, tuple[int, int | None]]:
        """For each replica read from its KV events (:attr:`Replica.exact`), by name: the prompt
        tokens it holds and, with data-parallel ranks, the rank holding them (the first of the
        longest; None when no rank holds any: the engine picks); one index lookup per engine key
        space (block size, hash seed). A failing lookup leaves those replicas to the estimate."""
        out: dict[str, tuple[int, int | None]] = {}
        looked: dict[tuple[int | None, str], dict[str, int] | None] = {}
        n = len(token_ids)
        for r in candidates:
            if not r.exact:
                continue
            best: tuple[int, int | None] | None = None
            for sub in r.subscribers:
                if not sub.exact:
                    continue
                size = sub.block_size
                if size is None or not sub.blocks.held:
                    held = 0  # it holds nothing
                else:
                    space = (size, sub.source.hash_seed)
                    if space not in looked:
                        try:
                            keys = sub.lookup_keys(token_ids, salt)
                            looked[space] = await self._call(self.index.scores, EVENTS_NAMESPACE, keys)
                        except PrefixIndexUnavailable:
                            looked[space] = None
                    scores = looked[space]
                    if scores is None:
                        continue
                    held = cached_prompt_tokens(n, scores.get(sub.replica, 0), size)
                if best is None or held > best[0]:
                    best = (held, sub.rank if held else None)
            if best is not None:
                out[r.name] = best
        return out

    def _by_cost(self, candidates: Sequence[Replica], cached: dict[str, int], prompt_tokens: int) -> Replica:
        """The cheapest replica (:func:`recipe.serve.routing.pick`); ``cached``: prompt tokens each holds."""
        now = time.monotonic()
        cands = [Candidate(cached[r.name], r.requests, r.served, r.load) for r in candidates]
        return candidates[pick(prompt_tokens, cands, self.weights, now)]

    async def scrape(self, client: httpx.AsyncClient) -> None:
        """Read every HTTP engine's ``/metrics`` once, at the same time, into its replica's ``load``
        (:func:`recipe.serve.routing.parse_engine_metrics`); an engine that does not answer, answers
        no request gauge or a page over 8 MiB keeps no load (its in-flight count alone is used)."""

        async def one(r: Replica) -> None:
            base = getattr(r.engine, "base_url", None)
            if not isinstance(base, str):
                return
            text = ""
            try:
                async with client.stream("GET", base + "/metrics") as response:
                    if response.status_code == 200:
                        body = bytearray()
                        async for chunk in response.aiter_bytes():
                            body += chunk
                            if len(body) > _METRICS_LIMIT:  # not an engine's metrics page: no load read
                                body.clear()
                                break
                        text = body.decode("utf-8", "replace")
            except httpx.HTTPError:
                text = ""
            r.load = parse_engine_metrics(text, time.monotonic()) if text else None
            if r.load is not None and r.load.engines > 1:  # data-parallel ranks its KV events must name
                for sub in r.subscribers:
                    sub.engine_ranks(r.load.engines, len(r.ranks) or 1)

        await asyncio.gather(*(one(r) for r in self.replicas))

    async def scrape_forever(self, interval: float) -> None:
        """:meth:`scrape` every ``interval`` seconds until cancelled (each scrape bounded by the interval)."""
        timeout = httpx.Timeout(max(interval, 0.1))
        async with httpx.AsyncClient(timeout=timeout) as client:
            while True:
                await self.scrape(client)
                await asyncio.sleep(interval)

    async def _call(self, fn, *args):  # type: ignore[no-untyped-def]
        if self._blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def follow_events(self, on_state: Any = None) -> list[KVEventSubscriber]:
        """Start a :class:`~recipe.serve.kv_events.KVEventSubscriber` for every replica whose engine
        names a KV-events source (its ``kv_events`` attribute), writing into this pool's index — one
        per data-parallel rank when the source names several (:attr:`Replica.ranks`); returns them
        (stopped by :meth:`aclose`). Needs pyzmq and msgpack (``dsrecipe[fleet]``).

        Raises:
            ImportError: a replica names a source and pyzmq or msgpack is missing (the message names
                the extra).
        """
        from recipe.serve.kv_events import require_fleet, sink_for

        started: list[KVEventSubscriber] = []
        for r in self.replicas:
            source = getattr(r.engine, "kv_events", None)
            if source is None or r.subscribers:
                continue
            require_fleet()
            sink = sink_for(self.index)
            if source.ranks > 1:  # one subscriber per data-parallel rank, each its own index field
                r.ranks = tuple(KVEventSubscriber(f"{r.name}@dp{k}", source.for_rank(k), sink, on_state=on_state, rank=k)
                                for k in range(source.ranks))
            else:
                r.events = KVEventSubscriber(r.name, source, sink, on_state=on_state)
            for sub in r.subscribers:
                sub.start()
                started.append(sub)
        return started

    async def aclose(self) -> None:
        """Stop the KV-event subscribers and close every engine."""
        for r in self.replicas:
            for sub in r.subscribers:
                await sub.aclose()
        for r in self.replicas:
            await r.engine.aclose()
