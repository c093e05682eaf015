"""Coalescing SSE writes: frames that arrive within a short window share one ``send``.

A stream's first frame goes out at once (time to first token is never delayed); a later frame is
sent at once too when the previous write is at least ``window`` seconds old — the normal case for a
decoding engine, whose deltas come tens of milliseconds apart. Only frames arriving faster than
that (bursts, a batched engine, a busy server) are held, and joined into one write — one ASGI
message, one HTTP chunk, one system call instead of many — sent with the first frame after the
window, or by a timer after two windows if the stream pauses. The stream's last frame and the end of
the body go out together (:meth:`FrameWriter.close`).

**A busy server widens the window** (as Linux's TCP autocorking joins small writes while the device
queue is busy): when the event loop runs late — every stream of a CPU-bound server then waits a
whole loop cycle between its frames anyway — the window becomes twice the loop's lag (:class:`LoopLag`,
a timer's lateness, smoothed), at most ``MAX_WIDEN`` times the configured one. Fewer writes leave
more CPU for the streams; a server that keeps up (lag well under half the window) behaves exactly as
with the fixed window, and the first frame is never held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["FrameWriter", "LoopLag", "MAX_WIDEN"]

Send = Callable[[dict[str, Any]], Awaitable[None]]

#: a busy loop widens the coalescing window to at most this many times the configured one.
MAX_WIDEN = 8.0


class LoopLag:
    """How late one event loop runs its timers (seconds, smoothed): about a loop cycle when the
    server is CPU-bound, about 0 when it keeps up.

    :meth:`poke` (each frame) arms a probe timer ``PERIOD`` ahead when none is armed; when it fires,
    its lateness moves :attr:`value` a quarter of the way. No frames, no timer: an idle server
    never wakes for it.
    """

    PERIOD = 0.002

    __slots__ = ("_loop", "_due", "_armed", "value")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due = 0.0
        self._armed = False
        self.value = 0.0

    def poke(self) -> None:
        """Arm the probe unless it is armed."""
        if not self._armed:
            self._armed = True
            self._due = self._loop.time() + self.PERIOD
            self._loop.call_at(self._due, self._fire)

    def _fire(self) -> None:
        self._armed = False
        late = self._loop.time() - self._due
        self.value += ((late if late > 0 else 0.0) - self.value) * 0.25

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> LoopLag:
        """The probe of ``loop`` (one per loop)."""
        hit = _LAGS.get(id(loop))
        if hit is None or hit._loop is not loop:
            if len(_LAGS) > 16:  # loops of finished asyncio.run calls: let them go
                _LAGS.clear()
            hit = _LAGS[id(loop)] = cls(loop)
        return hit


_LAGS: dict[int, LoopLag] = {}


class FrameWriter:
    """Writes SSE bytes through an ASGI ``send``, coalescing within ``window`` seconds (0: never).

    Call :meth:`write` for each piece and :meth:`close` once at the end, with the last piece (it
    sends what is held with it and ends the body, in one message, unless told not to end). Order
    is always preserved.
    """

    __slots__ = ("_send", "_window", "_cur", "_loop", "_lag", "_buf", "_last", "_timer", "_task", "_busy", "wrote")

    def __init__(self, send: Send, window: float) -> None:
        self._send = send
        self._window = self._cur = window
        self._loop = loop = asyncio.get_running_loop()
        self._lag = LoopLag.of(loop)
        self._buf: list[bytes] = []
        self._last = -1e18
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._busy = False
        self.wrote = False  #: True once any byte went out

    def hold(self, data: bytes) -> bool:
        """Queue ``data``; True when it must be sent now (await :meth:`flush`): the last write is
        ``window`` old (widened on a busy loop). Otherwise it is held: the next piece that comes after the window sends it,
        and a timer sends it if none comes within two windows (an engine that paused). Cheap on the
        hot path: no coroutine, no task, at most one timer per held run."""
        self._buf.append(data)
        if self._busy:
            return False  # the running flush takes it
        window = self._window
        if not window:
            return True
        lag = self._lag
        if not lag._armed:
            lag.poke()
        wide = lag.value * 2
        if wide > window:  # a busy loop: wider (module docstring)
            window = wide if wide < window * MAX_WIDEN else window * MAX_WIDEN
        self._cur = window
        if self._loop.time() - self._last >= window:
            return True
        if self._timer is None:
            self._timer = self._loop.call_at(self._last + 2 * window, self._on_timer)
        return False

    async def write(self, data: bytes) -> None:
        """Queue ``data`` and send it now when the last write is ``window`` old."""
        if self.hold(data):
            await self.flush()

    def _on_timer(self) -> None:
        self._timer = None
        if not self._buf or self._busy:
            return
        if self._loop.time() - self._last >= 2 * self._cur:
            self._task = self._loop.create_task(self.flush())  # the stream paused: send what waits
        else:  # written since the timer was set: wait for the next piece, or this timer again
            self._timer = self._loop.call_at(self._last + 2 * self._cur, self._on_timer)

    async def flush(self) -> None:
        """Send what is held now (nothing when a flush is already running: it takes what is held)."""
        if self._busy:
            return
        self._busy = True
        try:
            while self._buf:
                data = self._buf[0] if len(self._buf) == 1 else b"".join(self._buf)
                self._buf.clear()
                self._last = self._loop.time()
                self.wrote = True
                await self._send({"type": "http.response.body", "body": data, "more_body": True})
        finally:
            self._busy = False

    async def close(self, last: bytes = b"", end: bool = True) -> None:
        """Send what is held and ``last`` (after a flush in progress) and, with ``end``, end the
        response body. With ``end`` the data and the end go out as one message: one HTTP chunk and
        the body's terminator in a single write."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is not None and not task.done():
            await task
        if last:
            self._buf.append(last)
        if not end:
            if self._buf:
                await self.flush()
            return
        buf = self._buf
        data = (buf[0] if len(buf) == 1 else b"".join(buf)) if buf else b""
        buf.clear()
        if data:
            self.wrote = True
        await self._send({"type": "http.response.body", "body": data, "more_body": False})

    def abandon(self) -> None:
        """Drop what is held (the client is gone)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._buf.clear()
