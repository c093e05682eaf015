"""The replica pool: each request goes to the replica holding the longest cached prefix of its
block keys (the prefix index, memory or Redis), ties broken by fewest requests in flight; every
routed request records its keys for its replica.

With one replica nothing is hashed or looked up. A failing index (Redis down) never fails a request:
it is routed by load alone and counted (``recipe_prefix_index_errors_total``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from recipe.cache.index import MemoryPrefixIndex, PrefixIndex, PrefixIndexUnavailable, RedisPrefixIndex, namespace
from recipe.cache.keys import DEFAULT_BLOCK_SIZE, KeySpec, block_keys, cached_prompt_tokens
from recipe.serve.engines.base import Engine

__all__ = ["Replica", "Route", "ReplicaPool"]


@dataclass(slots=True)
class Replica:
    """One engine of the pool and its load."""

    engine: Engine
    name: str
    in_flight: int = 0
    served: int = 0


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes: the replica, its index namespace and keys, the matched prefix.

    Attributes:
        cached_tokens: prompt tokens the chosen replica is expected to hold (the index's estimate;
            the engine's own count, when it reports one, wins in the usage).
        index_failed: the index could not be read (routed by load).
    """

    replica: Replica
    ns: str = ""
    keys: Sequence[bytes] = field(default=())
    cached_tokens: int = 0
    index_failed: bool = False


class ReplicaPool:
    """Replicas behind one server.

    Args:
        engines: the replicas (names must be unique; duplicates get ``#2``, ``#3`` suffixes).
        index: the prefix index (default: in memory).
        block_size: tokens per block for the keys (DeepSeek's 64).
        max_imbalance: skip the longest-prefix replica for the least loaded one when it has this many
            more requests in flight (None: never).
    """

    def __init__(self, engines: Sequence[Engine], index: PrefixIndex | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 max_imbalance: int | None = 32) -> None:
        if not engines:
            raise ValueError("a replica pool needs at least one engine")
        names: set[str] = set()
        self.replicas: list[Replica] = []
        for e in engines:
            name, n = e.name, 1
            while name in names:
                n += 1
                name = f"{e.name}#{n}"
            names.add(name)
            self.replicas.append(Replica(e, name))
        self.index: PrefixIndex = index if index is not None else MemoryPrefixIndex()
        self.block_size = block_size
        self.max_imbalance = max_imbalance
        self._blocking = isinstance(self.index, RedisPrefixIndex)

    def __len__(self) -> int:
        return len(self.replicas)

    def _by_load(self, candidates: Sequence[Replica]) -> Replica:
        return min(candidates, key=lambda r: (r.in_flight, r.served))

    async def route(self, token_ids: Sequence[int], salt: str | None, model: str = "") -> Route:
        """Pick the replica for a prompt and record its keys there (see the module docstring)."""
        if len(self.replicas) == 1:
            return Route(self.replicas[0])
        spec = KeySpec(block_size=self.block_size, model=model, salt=salt)
        keys = block_keys(token_ids, spec).keys
        ns = namespace(spec)
        try:
            scores = await self._call(self.index.scores, ns, keys)
        except PrefixIndexUnavailable:
            return Route(self._by_load(self.replicas), ns, keys, 0, True)
        best = max((scores.get(r.name, 0) for r in self.replicas), default=0)
        chosen = self._by_load([r for r in self.replicas if scores.get(r.name, 0) == best])
        least = self._by_load(self.replicas)
        if self.max_imbalance is not None and chosen.in_flight - least.in_flight >= self.max_imbalance:
            chosen, best = least, scores.get(least.name, 0)
        failed = False
        try:
            await self._call(self.index.put, ns, keys, chosen.name)
        except PrefixIndexUnavailable:
            failed = True
        return Route(chosen, ns, keys, cached_prompt_tokens(len(token_ids), best, self.block_size), failed)

    async def _call(self, fn, *args):  # type: ignore[no-untyped-def]
        if self._blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def aclose(self) -> None:
        """Close every engine."""
        for r in self.replicas:
            await r.engine.aclose()
