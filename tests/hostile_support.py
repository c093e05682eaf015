"""Measuring the event loop of a server under test: uvicorn on 127.0.0.1 (port 0) in a thread whose
asyncio loop also runs a probe task that sleeps 5 ms and records, for each wake-up, the CPU time the
loop's thread spent since the last one (:func:`time.thread_time`): the longest is the longest run of
work on the loop (a request's parsing, preparing, printing …). CPU time, not wall time, so that other
processes on a loaded machine (which delay every thread) do not count; wall-clock lateness is kept
too (:attr:`LoopProbe.late`). Loopback only; stops at the end of its block."""

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
    """A served app and its loop: ``url``; :meth:`reset`, then :attr:`worst` (the longest run of the
    loop thread's CPU time between two wake-ups, s) and :attr:`late` (the largest wall-clock lateness, s)."""

    def __init__(self, app: Any) -> None:
        self.app, self.worst, self.late, self.url = app, 0.0, 0.0, ""
        self._ready, self._stop = threading.Event(), False

    def reset(self) -> None:
        """Start a new measurement."""
        self.worst = self.late = 0.0

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
            cpu, late = await cpu_between_wakeups()
            self.worst, self.late = max(self.worst, cpu), max(self.late, late)
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


async def cpu_between_wakeups(sleep: float = 0.005) -> tuple[float, float]:
    """Sleep ``sleep`` seconds on the running loop; returns the CPU time this thread spent meanwhile
    (the loop's other work) and how late the wake-up was (wall clock), in seconds."""
    c0, t0 = time.thread_time(), time.perf_counter()
    await asyncio.sleep(sleep)
    return time.thread_time() - c0, time.perf_counter() - t0 - sleep
