"""The conversation store on Redis, for a fleet of servers sharing ``previous_response_id`` turns.

One string per response, ``<prefix>:<id>`` → the record as JSON (wire JSON: ``input``, ``output``,
``response``, ``previous_response_id``, ``model``, ``created_at``), with an optional expiry; every
command names one key, so the store runs on a Redis Cluster too (``redis+cluster://``). Every
Redis failure (connection refused, timeout, error reply) raises
:class:`~recipe.store.conversations.StoreUnavailable`: a request that needs the store gets a clear
error, never a wrong or silently missing turn. Needs redis-py (the ``dsrecipe[redis]`` extra).
"""

from __future__ import annotations

from typing import Any


from recipe.jsonfmt import dumps_wire
from recipe.store.conversations import StoredResponse, StoreUnavailable, _loads

__all__ = ["RedisStore"]


class RedisStore:
    """A :class:`~recipe.store.conversations.ConversationStore` on Redis (thread-safe: redis-py's pool).

    Args:
        client: a ``redis.Redis``.
        prefix: key prefix (``recipe:resp``).
        ttl: seconds a record lives after it is saved (None: forever).
    """

    def __init__(self, client: Any, prefix: str = "recipe:resp", ttl: float | None = None) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl = ttl

    @classmethod
    def from_url(cls, url: str, prefix: str = "recipe:resp", ttl: float | None = None, **kwargs: Any) -> RedisStore:
        """A client for ``url`` (:func:`recipe.cache.redis_client.connect`: a Redis server, or a Redis
        Cluster with ``redis+cluster://``; short socket timeouts unless given, so a dead server fails
        fast).

        Raises:
            StoreUnavailable: redis-py is not installed.
            ValueError: a malformed URL.
        """
        from recipe.cache.redis_client import connect

        kwargs.setdefault("socket_connect_timeout", 2.0)
        kwargs.setdefault("socket_timeout", 5.0)
        try:
            return cls(connect(url, **kwargs), prefix, ttl)
        except ImportError as exc:  # pragma: no cover - optional extra
            raise StoreUnavailable("the Redis store needs redis-py: pip install 'dsrecipe[redis]' (or 'redis>=5')") from exc

    def _key(self, response_id: str) -> bytes:
        return f"{self.prefix}:{response_id}".encode("utf-8")

    def _call(self, command: str, *args: Any, **kwargs: Any) -> Any:
        from recipe.cache.redis_client import redis_errors

        try:
            return getattr(self.client, command)(*args, **kwargs)  # (a cluster client is made on first use)
        except redis_errors() as exc:
            raise StoreUnavailable(f"conversation store unavailable: {type(exc).__name__}: {exc}") from exc

    def save(self, record: StoredResponse) -> None:
        """Store ``record`` (replacing one with the same id).

        Raises:
            StoreUnavailable: Redis failed; nothing was stored.
        """
        value = dumps_wire({
            "id": record.id, "previous_response_id": record.previous_response_id, "input": list(record.input_items),
            "output": list(record.output_items), "model": record.model, "created_at": record.created_at,
            "response": record.response,
        })
        px = None if self.ttl is None else max(1, int(self.ttl * 1000))
        self._call("set", self._key(record.id), value, px=px)

    def load(self, response_id: str) -> StoredResponse | None:
        """The record for ``response_id``, or None when Redis has none.

        Raises:
            StoreUnavailable: Redis failed (never reported as a missing record).
        """
        raw = self._call("get", self._key(response_id))
        if raw is None:
            return None
        try:
            d = _loads(raw)
        except ValueError as exc:
            raise StoreUnavailable(f"conversation store: record {response_id!r} is not JSON: {exc}") from exc
        if not isinstance(d, dict):
            raise StoreUnavailable(f"conversation store: record {response_id!r} is not an object")
        return StoredResponse(str(d.get("id", response_id)), d.get("previous_response_id"), tuple(d.get("input") or ()),
                              tuple(d.get("output") or ()), str(d.get("model") or ""), int(d.get("created_at") or 0),
                              d.get("response"))

    def delete(self, response_id: str) -> bool:
        """Remove ``response_id``'s record; True when Redis had one (an expired key counts as none).

        Raises:
            StoreUnavailable: Redis failed; nothing is known to be deleted.
        """
        return bool(self._call("delete", self._key(response_id)))

    def close(self) -> None:
        """Close the client's connections."""
        close = getattr(self.client, "close", None)
        if close is not None:
            close()


