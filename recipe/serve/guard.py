"""One request's watchdog: client disconnect and the engine timeouts, as a cancellation.

The request's task runs the whole generation; a :class:`Guard` cancels it when the client goes away
(its own ``receive()`` watcher, independent of the ASGI server's spec version) or when a deadline
passes (first token, idle gap between deltas, total, or the server's shutdown deadline: :class:`Drain`),
and records why in :attr:`Guard.reason`.
One timer and one watcher task per request; a delta costs one clock read (:meth:`Guard.touch`). The
watcher task is started by the event loop's next round rather than in the constructor, so its cost is
not on the way to the first token when the engine answers at once; a client that leaves before then is
still seen (its ``http.disconnect`` waits for the watcher's ``receive()``).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Awaitable, Callable

from recipe.serve.config import Timeouts

__all__ = ["Guard", "Drain"]

Receive = Callable[[], Awaitable[dict[str, Any]]]


class Guard:
    """Cancels the current task on disconnect or timeout.

    Args:
        timeouts: the request's timeouts.
        receive: the ASGI ``receive`` to watch for ``http.disconnect`` (None: no watcher).
        drain: the server's :class:`Drain`: this guard is reachable by a shutdown while it is open.

    Attributes:
        reason: None, ``"disconnect"``, the timeout that fired (``"first_token"``, ``"idle"``,
            ``"total"``), or ``"shutdown"`` (the server's drain deadline passed).
        disconnected: the client went away.
    """

    __slots__ = ("_task", "_loop", "_handle", "_watcher", "_first_end", "_total_end", "_idle", "last", "reason",
                 "disconnected", "timeouts", "_armed", "_receive", "_drain", "_drain_end")

    def __init__(self, timeouts: Timeouts, receive: Receive | None, drain: Drain | None = None) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Guard must be created inside a task")
        self._task = task
        self._loop = loop = asyncio.get_running_loop()
        self.timeouts = timeouts
        now = loop.time()
        self._first_end = now + timeouts.first_token if timeouts.first_token else math.inf
        self._total_end = now + timeouts.total if timeouts.total else math.inf
        self._idle = timeouts.idle or math.inf
        self.last: float | None = None
        self.reason: str | None = None
        self.disconnected = False
        self._armed = True
        self._drain = drain
        self._drain_end = math.inf
        if drain is not None:
            drain.guards.add(self)
            self._drain_end = drain.at
        due = min(self._first_end, self._total_end, self._drain_end)
        self._handle = loop.call_at(due, self._check) if due < math.inf else None
        self._receive = receive
        self._watcher: asyncio.Task[None] | asyncio.Handle | None = loop.call_soon(self._start) if receive is not None else None

    def touch(self) -> None:
        """An engine delta arrived (resets the idle deadline)."""
        first = self.last is None
        self.last = self._loop.time()
        if first and self._armed:  # from the first-token deadline to the idle one
            if self._handle is not None:
                self._handle.cancel()
            due = min(self.last + self._idle, self._total_end, self._drain_end)
            self._handle = self._loop.call_at(due, self._check) if due < math.inf else None

    def _start(self) -> None:
        """Start the disconnect watcher (scheduled by the constructor)."""
        self._watcher = self._loop.create_task(self._watch(self._receive))

    def _due(self) -> tuple[float, str]:
        if self.last is None:
            due = (self._first_end, "first_token") if self._first_end <= self._total_end else (self._total_end, "total")
        else:
            idle_end = self.last + self._idle
            due = (idle_end, "idle") if idle_end <= self._total_end else (self._total_end, "total")
        return (self._drain_end, "shutdown") if self._drain_end < due[0] else due

    def drain(self, at: float) -> None:
        """The server shuts down: cancel at loop time ``at`` (reason ``"shutdown"``) unless the
        generation ends first."""
        self._drain_end = min(self._drain_end, at)
        if self._armed:
            if self._handle is not None:
                self._handle.cancel()
            self._handle = self._loop.call_at(self._due()[0], self._check)

    def _check(self) -> None:
        self._handle = None
        if not self._armed:
            return
        due, why = self._due()
        if self._loop.time() >= due:
            self._fire(why)
        elif due < math.inf:
            self._handle = self._loop.call_at(due, self._check)

    def _fire(self, why: str) -> None:
        if self.reason is None:
            self.reason = why
            self._task.cancel()

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message.get("type") == "http.disconnect":
                self.disconnected = True
                if self._armed:
                    self._fire("disconnect")
                return

    def disarm(self) -> None:
        """Stop the timers and stop cancelling (the generation is over); disconnects are still noted."""
        self._armed = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def absorb(self) -> bool:
        """After catching the CancelledError this guard caused: undo the cancellation request and
        return True; False when the cancellation came from elsewhere (re-raise it then)."""
        if self.reason is None:
            return False
        uncancel = getattr(self._task, "uncancel", None)
        if uncancel is not None:
            uncancel()
        self.disarm()
        return True

    def timeout_of(self, why: str) -> float | None:
        """The configured seconds of the timeout named ``why``."""
        return {"first_token": self.timeouts.first_token, "idle": self.timeouts.idle, "total": self.timeouts.total}.get(why)

    def close(self) -> None:
        """Release the timer and the watcher."""
        self.disarm()
        if self._drain is not None:
            self._drain.guards.discard(self)
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None


class Drain:
    """A server's shutdown: the open requests' guards, and the loop time at which they are cut.

    :meth:`start` (called when the server starts shutting down) gives every open guard, and every
    guard made afterwards, the deadline: a generation still running then is cancelled with reason
    ``"shutdown"`` and answered with the API's own error (in the stream when it started), so it
    ends cleanly before the HTTP server's own grace period cuts the connection.
    """

    __slots__ = ("guards", "at")

    def __init__(self) -> None:
        self.guards: set[Guard] = set()
        self.at = math.inf

    @property
    def started(self) -> bool:
        """Whether :meth:`start` was called (the server is shutting down)."""
        return self.at != math.inf

    def start(self, seconds: float) -> None:
        """Cut what is still generating ``seconds`` from now (in the running loop; at once for 0)."""
        self.at = asyncio.get_running_loop().time() + max(seconds, 0.0)
        for guard in list(self.guards):
            guard.drain(self.at)
