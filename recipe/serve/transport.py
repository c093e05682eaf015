"""One system call for a response's head and its first body bytes (uvicorn's HTTP protocol, adapted).

uvicorn writes an ASGI ``http.response.start`` to the socket at once, then each body message: a
stream's head and first frame are two system calls, and on a client waiting for the first token
two wake-ups. :class:`HeadHoldingTransport` wraps the connection's asyncio transport and holds a
response head until the next write, which carries it (``head + body`` in one ``write``), or until
the end of the current event-loop iteration (a head with no body yet goes out then on its own, as
before). Nothing else is held, order is kept, and ``close`` / ``write_eof`` / ``writelines`` send a
held head first. :func:`http_protocol` is uvicorn's HTTP protocol class with that transport,
which also reads a new connection's request when it is accepted (one non-blocking ``read``, not
over TLS) and keeps uvicorn's flow control for it, and (httptools) starts each request's handler in
the callback that read it (:class:`_EagerStart`); ``recipe serve`` and :func:`uvicorn_config` use it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from typing import Any

from recipe.serve.eager import EAGER_START, start_eagerly

__all__ = ["HeadHoldingTransport", "http_protocol", "uvicorn_config"]

#: A response head as uvicorn writes it (a status line); ``1xx`` heads (``100 Continue``) are not held.
_HEAD = b"HTTP/1.1 "


class HeadHoldingTransport:
    """An asyncio transport that holds a response head until the next write or the end of the loop
    iteration (module docstring); every other call goes to the wrapped transport.

    Args:
        transport: the connection's transport.
        loop: the loop it runs on (the held head's flush is scheduled there).
    """

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data``, after a held head (one write for both); hold it if it is a head."""
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + bytes(data))
        elif data[:9] == _HEAD and data[9:10] != b"1":
            self._held = bytes(data)
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def writelines(self, list_of_data: Any) -> None:
        """Write each piece (a held head first)."""
        self._flush()
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        """Send a held head, then close the write side."""
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        """Send a held head, then close (the transport sends what it buffered first)."""
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping a held head as the transport drops its buffer."""
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        """Whether the wrapped transport is closing."""
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        """Bytes buffered by the wrapped transport, a held head included."""
        return self._transport.get_write_buffer_size() + (len(self._held) if self._held is not None else 0)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The wrapped transport's ``get_extra_info``."""
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        """The wrapped transport's ``pause_reading``."""
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        """The wrapped transport's ``resume_reading``."""
        self._transport.resume_reading()

    def __getattr__(self, name: str) -> Any:  # the rest of the transport interface, unchanged
        return getattr(self._transport, name)


def http_protocol(impl: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol class whose connections write through a :class:`HeadHoldingTransport`
    (and read a new connection's request at once). Pass it as ``uvicorn.Config(http=…)``.

    Args:
        impl: uvicorn's parser, as its ``http`` option names it: ``"auto"`` (httptools, else h11:
            uvicorn's own choice), ``"httptools"`` or ``"h11"``.

    Raises:
        ImportError: uvicorn (or the parser asked for) is not installed.
        ValueError: ``impl`` is none of those three.
    """
    cls = _PROTOCOLS.get(impl)
    if cls is not None:
        return cls
    if impl == "auto":
        from uvicorn.protocols.http.auto import AutoHTTPProtocol as base
    elif impl == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    elif impl == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    else:
        raise ValueError(f"unknown HTTP implementation {impl!r}: expected 'auto', 'httptools' or 'h11'")

    eager = _EAGER_TASK and hasattr(base, "_start_asgi_task")  # httptools on uvicorn >= 0.45; h11 starts its own

    class RecipeHTTPProtocol(*((_EagerStart, base) if eager else (base,))):  # type: ignore[misc]
        """uvicorn's HTTP protocol over a :class:`HeadHoldingTransport` (and, with httptools, each
        request's handler started eagerly: :class:`_EagerStart`)."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            super().connection_made(HeadHoldingTransport(transport, self.loop))  # type: ignore[arg-type]
            if _EAGER:
                data = _read_now(transport)
                if data:
                    self.data_received(data)  # type: ignore[attr-defined]
                    if self.flow.read_paused:  # a pipelined request waits: see _pause_again
                        self.loop.call_soon(_pause_again, self)

    _PROTOCOLS[impl] = RecipeHTTPProtocol
    return RecipeHTTPProtocol


class _EagerStart:
    """Mixin for uvicorn's httptools protocol: a request read by a loop callback gets its ASGI task
    started eagerly (:func:`recipe.serve.eager.start_eagerly`, which leaves a loop with a task
    factory to that factory) once the parser is done with the data, instead of in the loop's next
    round; until then it counts among the server's tasks, as a task uvicorn started does (its
    ``limit_concurrency`` check for a request pipelined behind it). A request started from inside
    a task (a pipelined one, when the response before it completes) is left to uvicorn.
    ``RECIPE_NO_EAGER_TASK=1`` turns it off."""

    _recipe_ready: list[tuple[Any, Any]] | None = None

    def data_received(self, data: bytes) -> None:
        if asyncio.current_task() is not None:
            return super().data_received(data)  # type: ignore[misc]
        self._recipe_ready = ready = []
        try:
            super().data_received(data)  # type: ignore[misc]
        finally:  # (started even if the parse raised: uvicorn would have created their tasks already)
            self._recipe_ready = None
            for cycle, app in ready:  # the request's body, as far as it came with ``data``, is in
                self.tasks.discard(cycle)  # type: ignore[attr-defined]
                ctx = contextvars.Context() if getattr(self.config, "reset_contextvars", False) else contextvars.copy_context()  # type: ignore[attr-defined]
                task = start_eagerly(self.loop, cycle.run_asgi(app), ctx)  # type: ignore[attr-defined]
                task.add_done_callback(self.tasks.discard)  # type: ignore[attr-defined]
                self.tasks.add(task)  # type: ignore[attr-defined]

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        ready = self._recipe_ready
        if ready is None:
            return super()._start_asgi_task(cycle, app)  # type: ignore[misc]
        ready.append((cycle, app))
        self.tasks.add(cycle)  # type: ignore[attr-defined]  # in its task's place until data_received starts it


_PROTOCOLS: dict[str, type[asyncio.Protocol]] = {}
_EAGER = os.name == "posix" and not os.environ.get("RECIPE_NO_EAGER_READ")
_EAGER_TASK = EAGER_START and not os.environ.get("RECIPE_NO_EAGER_TASK")


def _pause_again(protocol: Any) -> None:
    """Pause reading again if uvicorn still wants it paused (its flow control's ``read_paused``).

    A pause asked for during ``connection_made`` (the accept-time read fed a pipelined request) does
    not hold: uvloop starts reading once ``connection_made`` returns whatever was asked (so does
    asyncio's loop in older Pythons, 3.11.2 for one), and uvicorn does not ask twice, so the next
    request's body would be read into memory without bound while the first one runs. Run in the
    loop's next round, after reading started; resume-then-pause sets the transport's own flag right
    on either loop.
    """
    transport = protocol.transport
    if protocol.flow.read_paused and not transport.is_closing():
        transport.resume_reading()
        transport.pause_reading()


def _read_now(transport: asyncio.BaseTransport) -> bytes:
    """What a new connection's client has sent already (one non-blocking ``read``), or b"" (none
    yet, TLS, or no socket)."""
    if transport.get_extra_info("sslcontext") is not None:
        return b""
    sock = transport.get_extra_info("socket")
    try:
        return os.read(sock.fileno(), 65536) if sock is not None else b""
    except OSError:  # BlockingIOError (nothing yet), or a reset: the transport's own read then sees the end
        return b""


def uvicorn_config(app: Any, **kwargs: Any) -> Any:
    """``uvicorn.Config(app, http=http_protocol(), **kwargs)``: how ``recipe serve`` runs an app
    (head and first frame in one write); any uvicorn option may be given. Unless ``access_log`` is
    given, it is on only when ``log_level`` is unset, ``info`` or more verbose (the lines would be
    dropped otherwise, after uvicorn formatted their arguments). ``http`` as uvicorn names a
    parser (``"auto"``, ``"httptools"``, ``"h11"``) gets this module's protocol over that parser; a
    protocol class is used as given.

    Raises:
        ImportError: uvicorn (or the parser asked for) is not installed.
        ValueError: ``http`` is a string naming no parser.
    """
    import uvicorn

    http = kwargs.get("http", "auto")
    kwargs["http"] = http_protocol(http) if isinstance(http, str) else http
    if "access_log" not in kwargs:  # uvicorn formats each request's access-log line's arguments even
        # when its logger drops them (any level above info): no access log then
        level = kwargs.get("log_level")
        level = logging.getLevelName(level.upper()) if isinstance(level, str) else level
        kwargs["access_log"] = level is None or (isinstance(level, int) and level <= logging.INFO)
    return uvicorn.Config(app, **kwargs)
