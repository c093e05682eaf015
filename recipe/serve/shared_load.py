"""Requests in flight on each replica, shared by every ``recipe serve`` frontend of a fleet through Redis.

Each frontend keeps its own counts (``Replica.in_flight``, changed by each request with no I/O) and,
every ``interval`` seconds in the background, publishes them and reads the others' (two round trips):

- its snapshot: one string ``{<prefix>}:frontend:<id>`` → ``{"<replica>": <requests>, …}`` (JSON),
  written with ``SET … PX ttl``, so it expires by itself ``ttl`` seconds after the last write: a
  frontend that dies (killed, its host lost) takes its counts with it within ``ttl``; one that stops
  cleanly deletes it at once;
- the registry: a set ``{<prefix>}:frontends`` of the frontend ids (``SADD`` with every write,
  expiring ``ttl`` after the last write of any frontend); a reader reads every member's snapshot
  (one ``MGET``) and removes the members whose snapshot has expired.

Every key carries the hash tag ``{<prefix>}``, so on a Redis Cluster they lie in one slot and the
``MGET`` and the pipelines stay valid. A request never waits for Redis: routing reads the sums of
the last sync (:attr:`Replica.others <recipe.serve.pool.Replica>`), at most about two intervals
old. When Redis fails, the last sums are kept for ``ttl`` seconds, then dropped (each frontend
routes by its own counts until Redis answers again); failures are logged once and counted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

__all__ = ["SharedLoad", "SharedLoadUnavailable"]

_log = logging.getLogger(__name__)


class SharedLoadUnavailable(RuntimeError):
    """Redis could not be reached or answered an error; the shared counts are not updated."""


class _Counted(Protocol):
    """A replica as the shared load sees it (:class:`recipe.serve.pool.Replica`)."""

    name: str
    in_flight: int
    others: int


def _frontend_id() -> str:
    host = socket.gethostname().replace("{", "").replace("}", "") or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


class SharedLoad:
    """This frontend's side of the fleet's shared in-flight counts (see the module docstring).

    Args:
        client: a ``redis.asyncio`` client (``redis.asyncio.Redis`` or ``RedisCluster``).
        prefix: the keys' hash tag (without braces): frontends with the same prefix share counts.
        interval: seconds between syncs (> 0).
        ttl: seconds a frontend's counts outlive its last sync (> ``interval``).
        frontend: this frontend's id (default: host, process id and 8 random hex digits, new each start).
        clock: seconds, for the age of the last sync (``time.monotonic``).

    Raises:
        ValueError: ``interval`` <= 0, ``ttl`` <= ``interval``, or braces in ``prefix`` or ``frontend``.
    """

    def __init__(self, client: Any, prefix: str = "recipe:load", interval: float = 0.1, ttl: float = 3.0,
                 frontend: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not interval > 0:
            raise ValueError(f"shared load interval must be > 0 seconds, got {interval!r}")
        if not ttl > interval:
            raise ValueError(f"shared load ttl ({ttl!r} s) must be longer than its interval ({interval!r} s)")
        frontend = frontend or _frontend_id()
        if any(c in s for s in (prefix, frontend) for c in "{}"):
            raise ValueError("the shared load prefix and frontend id may not hold braces (they make the hash tag)")
        self.client, self.interval, self.ttl, self.frontend, self.clock = client, interval, ttl, frontend, clock
        self.tag = "{" + prefix + "}"
        self.registry = f"{self.tag}:frontends"
        self.key = self.key_of(frontend)
        #: replica name -> requests the other live frontends have in flight there (the last sync's)
        self.others: dict[str, int] = {}
        #: how many other frontends the last sync saw alive
        self.frontends = 0
        #: ``clock()`` of the last successful sync, or None
        self.synced_at: float | None = None
        #: failed syncs so far
        self.errors = 0

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SharedLoad:
        """A shared load on the Redis server or cluster at ``url``
        (:func:`recipe.cache.redis_client.connect`; one-second socket timeouts); ``kwargs`` go to
        the constructor.

        Raises:
            SharedLoadUnavailable: redis-py is not installed.
            ValueError: a malformed URL, or a bad argument.
        """
        from recipe.cache.redis_client import connect

        try:
            client = connect(url, asyncio=True, socket_connect_timeout=1.0, socket_timeout=1.0)
        except ImportError as exc:  # pragma: no cover - optional extra
            raise SharedLoadUnavailable("the shared load needs redis-py: pip install 'dsrecipe[redis]' (or 'redis>=5')") from exc
        return cls(client, **kwargs)

    def key_of(self, frontend: str) -> str:
        """The key of ``frontend``'s snapshot."""
        return f"{self.tag}:frontend:{frontend}"

    async def sync(self, counts: Mapping[str, int]) -> dict[str, int]:
        """Publish this frontend's ``counts`` (replica name -> requests in flight) and read the other
        live frontends' sums into :attr:`others` (also returned); forget the expired ones.

        Raises:
            SharedLoadUnavailable: Redis failed (nothing is changed here).
        """
        from recipe.cache.redis_client import redis_errors

        ms = max(1, round(self.ttl * 1000))
        value = json.dumps({name: n for name, n in counts.items() if n}, separators=(",", ":"))
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.set(self.key, value, px=ms)
            pipe.sadd(self.registry, self.frontend)
            pipe.pexpire(self.registry, ms)
            pipe.smembers(self.registry)
            # members as the bytes Redis holds (a name that is not UTF-8, another writer's, is still
            # its own key and is removed as written)
            own = self.frontend.encode("utf-8")
            members = sorted(m for m in (x if isinstance(x, bytes) else str(x).encode("utf-8")
                                         for x in (await pipe.execute())[3]) if m != own)
            prefix = self.key_of("").encode("utf-8")
            snapshots = await self.client.mget([prefix + m for m in members]) if members else []
            gone = [m for m, v in zip(members, snapshots) if v is None]
            if gone:
                await self.client.srem(self.registry, *gone)
        except redis_errors() as exc:
            raise SharedLoadUnavailable(f"shared load unavailable: {type(exc).__name__}: {exc}") from exc
        sums: dict[str, int] = {}
        for raw in snapshots:
            for name, n in _counts(raw).items():
                sums[name] = sums.get(name, 0) + n
        self.others, self.frontends, self.synced_at = sums, len(members) - len(gone), self.clock()
        return sums

    async def run(self, replicas: Sequence[_Counted], on_error: Callable[[], None] | None = None) -> None:
        """Sync every :attr:`interval` seconds until cancelled: publish the replicas' ``in_flight``,
        set each one's ``others``. A failed sync (Redis, or any other exception) calls ``on_error``
        (the first is logged), keeps the last sums for :attr:`ttl` seconds after the last good sync,
        then sets them to 0; the loop goes on."""
        failing = False
        while True:
            try:
                await self.sync({r.name: r.in_flight for r in replicas})
                if failing:
                    _log.info("shared load: Redis answers again")
                failing = False
            except Exception as exc:  # SharedLoadUnavailable, or anything else: the loop must go on, or
                # the last sums would stay on the replicas for ever
                self.errors += 1
                if on_error is not None:
                    on_error()
                if not failing:
                    known = isinstance(exc, SharedLoadUnavailable)
                    _log.warning("%s; routing by this frontend's own counts once the last ones are %.0f s old",
                                 exc if known else f"shared load: sync failed: {exc!r}", self.ttl, exc_info=not known)
                failing = True
                if self.synced_at is None or self.clock() - self.synced_at > self.ttl:
                    self.others, self.frontends = {}, 0
            for r in replicas:
                r.others = self.others.get(r.name, 0)
            await asyncio.sleep(self.interval)

    async def leave(self) -> None:
        """Remove this frontend's counts and registry entry now (a clean shutdown); never raises."""
        from recipe.cache.redis_client import redis_errors

        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(self.key)
            pipe.srem(self.registry, self.frontend)
            await asyncio.wait_for(pipe.execute(), 2.0)
        except (asyncio.TimeoutError, *redis_errors()) as exc:
            _log.warning("shared load: could not remove this frontend's counts (they expire in %.0f s): %s", self.ttl, exc)

    async def aclose(self) -> None:
        """Close the client's connections."""
        close = getattr(self.client, "aclose", None) or self.client.close
        await close()

    def status(self) -> dict[str, Any]:
        """``/health``'s ``shared_load``: this frontend's id, the other live frontends, the age of the
        last good sync in seconds (None: none yet) and the failed syncs so far."""
        age = None if self.synced_at is None else round(self.clock() - self.synced_at, 3)
        return {"frontend": self.frontend, "other_frontends": self.frontends, "synced_seconds_ago": age,
                "errors": self.errors}


def _counts(raw: Any) -> dict[str, int]:
    """A snapshot's counts; an unreadable one (not JSON, not an object of counts) counts as none."""
    try:
        d = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    if not isinstance(d, dict):
        return {}
    return {str(k): v for k, v in d.items() if type(v) is int and v > 0}
