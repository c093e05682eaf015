"""Connection admission for ``recipe serve``: a deadline for each request head and a cap on one
client's open connections, which uvicorn does not have (a client sending one header line every few
seconds held its connection open for ever, and 300 such connections held 300 descriptors).

:func:`admission_protocol` makes an ``asyncio.Protocol`` class for ``uvicorn.Config(http=…)`` that
wraps uvicorn's own HTTP protocol (``auto``, ``h11`` or ``httptools``, built with the arguments
uvicorn gives a protocol class) and passes every call on to it. It adds:

- the head deadline: a connection must complete a request head within ``head_timeout`` seconds of
  being opened, and again of the end of each response (keep-alive); past it the server answers
  ``408 Request Timeout`` and closes the connection. The app marks the head complete
  (:func:`request_started`, called by :class:`~recipe.serve.server.RecipeApp` as a request
  reaches it) and the response done (:func:`request_finished`); the wrapper is found through a
  context variable set while uvicorn's protocol handles received bytes, which the request's task
  inherits.
- the per-client cap: a client (peer IP address) with ``max_per_client`` connections open gets
  ``503 Service Unavailable`` and a closed connection for the next one.

An app served without this wrapper (embedded in another server) sees no difference: the two calls
find no wrapper and do nothing. uvicorn's ``reset_contextvars`` would hide the wrapper from the app
(every connection would then look idle), so :func:`recipe.serve.runner.uvicorn_config` refuses the
two together.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import Counter
from typing import Any

__all__ = ["admission_protocol", "request_started", "request_finished"]

_CONNECTION: contextvars.ContextVar[_Admitted | None] = contextvars.ContextVar("recipe_connection", default=None)

_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            b"content-length: 36\r\n\r\nThe request head took too long.\r\n\r\n")
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
         b"content-length: 43\r\n\r\nToo many connections from this client.\r\n\r\n")


def request_started() -> None:
    """The request head of the current connection is complete (call as the request reaches the app)."""
    conn = _CONNECTION.get()
    if conn is not None:
        conn.head_complete()


def request_finished() -> None:
    """The current request's response is done: its connection's next head is on the clock."""
    conn = _CONNECTION.get()
    if conn is not None:
        conn.response_done()


class _Admitted(asyncio.Protocol):
    """Base of the classes :func:`admission_protocol` makes (see the module docstring)."""

    inner_class: Any = None
    head_timeout: float | None = None
    max_per_client: int | None = None
    open_by_client: Counter[str] = Counter()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.inner = self.inner_class(*args, **kwargs)
        self.transport: asyncio.Transport | None = None
        self.client: str | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.active = 0  # requests whose head is complete and whose response is not done
        self.delegated = False  # the inner protocol has the connection

    def connection_made(self, transport: Any) -> None:  # noqa: D102 (asyncio.Protocol)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.client = peer[0] if isinstance(peer, (tuple, list)) and peer else None
        if self.client is not None and self.max_per_client is not None:
            if self.open_by_client[self.client] >= self.max_per_client:
                self.client = None  # (not counted)
                transport.write(_BUSY)
                transport.close()
                return
            self.open_by_client[self.client] += 1
        self._arm()
        self.delegated = True
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:  # noqa: D102
        token = _CONNECTION.set(self)
        try:
            self.inner.data_received(data)
        finally:
            _CONNECTION.reset(token)

    def eof_received(self) -> bool | None:  # noqa: D102
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        self._disarm()
        if self.client is not None:
            self.open_by_client[self.client] -= 1
            if self.open_by_client[self.client] <= 0:
                del self.open_by_client[self.client]
            self.client = None
        if self.delegated:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:  # noqa: D102
        self.inner.pause_writing()

    def resume_writing(self) -> None:  # noqa: D102
        self.inner.resume_writing()

    def head_complete(self) -> None:
        self.active += 1
        self._disarm()

    def response_done(self) -> None:
        self.active = max(self.active - 1, 0)
        if not self.active:
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        if self.head_timeout is not None:
            self.timer = asyncio.get_running_loop().call_later(self.head_timeout, self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        t = self.transport
        if t is None or t.is_closing() or self.active:
            return
        t.write(_TIMEOUT)
        t.close()


def admission_protocol(http: Any = "auto", head_timeout: float | None = 10.0, max_per_client: int | None = 256) -> type:
    """An ``asyncio.Protocol`` class for ``uvicorn.Config(http=…)``: uvicorn's ``http`` protocol
    (``"auto"``, ``"h11"``, ``"httptools"``, or a protocol class) with the head deadline and the
    per-client cap of the module docstring. Each class keeps its own count of open connections.

    Args:
        http: uvicorn's protocol, as ``uvicorn.Config``'s ``http`` takes it.
        head_timeout: seconds a connection has to complete a request head (None: no deadline).
        max_per_client: connections one client address may hold open (None: no cap).

    Raises:
        ValueError: an unknown protocol name, or a limit that is not positive.
    """
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    if head_timeout is not None and not head_timeout > 0:
        raise ValueError(f"head_timeout must be > 0 seconds or None, got {head_timeout!r}")
    if max_per_client is not None and max_per_client < 1:
        raise ValueError(f"max_per_client must be >= 1 or None, got {max_per_client!r}")
    if isinstance(http, str):
        if http not in HTTP_PROTOCOLS:
            raise ValueError(f"http={http!r}: want one of {', '.join(HTTP_PROTOCOLS)} or a protocol class")
        http = import_from_string(HTTP_PROTOCOLS[http])
    return type("AdmittedHTTP", (_Admitted,), {"inner_class": http, "head_timeout": head_timeout,
                                               "max_per_client": max_per_client, "open_by_client": Counter()})
