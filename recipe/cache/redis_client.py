"""Redis clients from a URL, for the prefix index, the conversation store and the shared load of a fleet.

``redis://HOST:PORT/DB``, ``rediss://…`` (TLS) and ``unix://PATH`` name one Redis server;
``redis+cluster://HOST:PORT`` and ``rediss+cluster://…`` name a Redis Cluster by any of its nodes
(the client learns the slot map from it and follows ``MOVED`` / ``ASK`` redirections). recipe's
commands suit a cluster: each is a single-key command, or a multi-key one on keys that share a hash
tag (``{…}``, one slot), and a pipeline is never a transaction across slots.

A cluster client is made on first use, not here, so a server starts while its Redis is still down;
until the cluster answers, every command fails with a Redis error, as a refused connection to a
single server does. Needs redis-py (the ``dsrecipe[redis]`` extra).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["REDIS_SCHEMES", "is_redis_url", "connect", "redis_errors"]

#: URL schemes :func:`connect` takes.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")

_CLUSTER = {"redis+cluster://": "redis://", "rediss+cluster://": "rediss://"}


def is_redis_url(url: str) -> bool:
    """Whether ``url`` names a Redis server or cluster (one of :data:`REDIS_SCHEMES`)."""
    return url.startswith(REDIS_SCHEMES)


def redis_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a failing Redis or Redis Cluster raises: ``redis.RedisError`` and redis-py's
    ``RedisClusterException`` (which is not one: an unreachable cluster, a lost slot map)."""
    import redis
    from redis.exceptions import RedisClusterException

    return (redis.RedisError, RedisClusterException)


class _OnFirstUse:
    """A client made by ``make`` when an attribute is first read (thread-safe); a failure to make it
    is raised to that caller, and the next use tries again."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
                client = self._client
        return getattr(client, name)

    def close(self) -> None:
        """Close the client's connections, if it was made."""
        if self._client is not None:
            self._client.close()


def connect(url: str, *, asyncio: bool = False, **kwargs: Any) -> Any:
    """A redis-py client for ``url``: ``redis.Redis`` (``asyncio``: ``redis.asyncio.Redis``), or for a
    ``…+cluster://`` URL a ``RedisCluster`` of the same flavour, made on first use. ``kwargs`` go to
    redis-py's ``from_url`` (timeouts …).

    Raises:
        ImportError: redis-py is not installed.
        ValueError: not a Redis URL, or one redis-py cannot parse.
    """
    if not is_redis_url(url):
        raise ValueError(f"{url!r} is not a Redis URL (want {', '.join(s + '…' for s in REDIS_SCHEMES)})")
    cluster = next((plain + url[len(scheme):] for scheme, plain in _CLUSTER.items() if url.startswith(scheme)), None)
    if asyncio:
        import redis.asyncio as aredis
        from redis.asyncio.cluster import RedisCluster as AsyncCluster

        return aredis.Redis.from_url(url, **kwargs) if cluster is None else AsyncCluster.from_url(cluster, **kwargs)
    import redis
    from redis.cluster import RedisCluster

    if cluster is None:
        return redis.Redis.from_url(url, **kwargs)
    from redis.connection import parse_url

    parse_url(cluster)  # a malformed URL is a ValueError now, not at the first request
    return _OnFirstUse(lambda: RedisCluster.from_url(cluster, **kwargs))
