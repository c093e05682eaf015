"""Measuring the event loop of a server under test: uvicorn on 127.0.0.1 (port 0) in a thread whose
asyncio loop also runs a probe task that sleeps 5 ms and records how late each wake-up is. The
largest lateness while a request is served is the longest the loop was held (by that request's work
on the loop, or a C call holding the GIL elsewhere). Loopback only; stops at the end of its block."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


class LoopProbe:
    """A served app and the lateness of its loop: ``url``; :meth:`reset`, then :attr:`worst` (s)."""

    def __init__(self, app: Any) -> None:
        self.app, self.worst, self.url = app, 0.0, ""
        self._ready, self._stop = threading.Event(), False

    def reset(self) -> None:
        """Start a new measurement."""
        self.worst = 0.0

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = uvicorn.Server(uvicorn.Config(self.app, log_level="error", lifespan="on"))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        self._ready.set()
        while not self._stop:
            t0 = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - t0 - 0.005)
        server.should_exit = True
        await task


@contextmanager
def loop_probe(app: Any) -> Iterator[LoopProbe]:
    """Serve ``app`` with a :class:`LoopProbe` on its loop for the ``with`` block."""
    probe = LoopProbe(app)
    thread = threading.Thread(target=probe._run, daemon=True)
    thread.start()
    assert probe._ready.wait(30), "the server did not start"
    try:
        yield probe
    finally:
        probe._stop = True
        thread.join(30)
