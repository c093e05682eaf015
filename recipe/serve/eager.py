"""Eager task start: a coroutine's first step run at once, in its own task, rather than in the
event loop's next round (what Python 3.12's ``asyncio.Task(..., eager_start=True)`` does, here on 3.11 too).

A request's handler started with ``loop.create_task`` waits for the loop's next round, behind every
callback already queued: under a burst of stream deltas that is most of a request's wait before its
first byte. :func:`start_eagerly` runs the first step inside the caller (a protocol's
``data_received``), as the task: ``asyncio.current_task()`` is the task, the context is the task's,
and what the step yielded, returned or raised is handed to the task's own first step, so the result,
exception, cancellation and done callbacks are a task's as usual.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

__all__ = ["EAGER_START", "start_eagerly"]

#: Whether :func:`start_eagerly` runs a first step now: it needs asyncio's current-task bookkeeping
#: (``asyncio.tasks._enter_task`` / ``_leave_task``, private but present from 3.7 to 3.14, tested on
#: 3.11–3.13); without them it is ``loop.create_task``.
EAGER_START = hasattr(asyncio.tasks, "_enter_task") and hasattr(asyncio.tasks, "_leave_task")

_NOTHING = object()
_COROUTINE_ATTRIBUTES = frozenset(("cr_frame", "cr_code", "cr_running", "cr_await", "cr_suspended", "__name__", "__qualname__"))


class _Resumed(Coroutine):  # type: ignore[type-arg]
    """The task's view of a coroutine whose first step already ran: the task's first ``send`` gets
    what that step yielded (or raises its exception, or its ``StopIteration``); everything after goes
    straight to the coroutine."""

    __slots__ = ("_coro", "_first", "_error")

    def __init__(self, coro: Coroutine) -> None:  # type: ignore[type-arg]
        self._coro = coro
        self._first: Any = _NOTHING
        self._error: BaseException | None = None

    def send(self, value: Any) -> Any:
        """The eager step's outcome the first time, then the coroutine's ``send``."""
        first = self._first
        if first is _NOTHING:
            return self._coro.send(value)
        error, self._first, self._error = self._error, _NOTHING, None
        if error is not None:
            raise error
        return first

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Into the coroutine where it waits; one that ended in its eager step keeps that ending. A
        cancellation while the eager step's future (one of this loop) is pending cancels that future
        and hands it back (the task wakes with its ``CancelledError``), as a task's ``cancel`` cancels
        what it awaits."""
        first = self._first
        if first is not _NOTHING and self._error is not None:
            return self.send(None)
        self._first = _NOTHING
        exc = typ if val is None and tb is None else typ(val) if tb is None else typ(val).with_traceback(tb)
        if (isinstance(exc, asyncio.CancelledError) and asyncio.isfuture(first)  # (one of this loop only)
                and getattr(first, "get_loop", lambda: None)() is asyncio.get_running_loop()
                and first.cancel(msg=exc.args[0] if exc.args else None)):
            return first
        return self._coro.throw(exc)

    def close(self) -> None:
        """Close the coroutine."""
        self._first = _NOTHING
        self._coro.close()

    def __await__(self) -> Any:  # the Coroutine interface; a task never awaits it
        return self._coro.__await__()

    def __getattr__(self, name: str) -> Any:
        """The coroutine's own attributes (``cr_frame``, ``cr_code``, ``cr_running``, ``cr_await``,
        ``cr_suspended``, ``__name__``, ``__qualname__``), for what inspects a task's coroutine: its
        repr, ``get_stack``, ``inspect.getcoroutinestate``. ``AttributeError`` for any other name."""
        if name in _COROUTINE_ATTRIBUTES:
            return getattr(self._coro, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"<eagerly started {self._coro!r}>"


def start_eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine, context: contextvars.Context) -> asyncio.Task:  # type: ignore[type-arg]
    """A task running ``coro`` in ``context`` whose first step (up to its first real suspension) runs
    before this returns.

    Args:
        loop: the running loop.
        coro: a coroutine not yet started.
        context: the task's context (the first step runs in it too).

    Returns:
        The task, as ``loop.create_task(coro, context=context)`` returns it: its result or exception
        is the coroutine's; a cancellation before its first scheduled step reaches the coroutine
        where it waits, cancelling the future it awaits as a task's ``cancel`` does (a coroutine
        that already ended keeps its result).

    Must be called from a loop callback, not from inside a running task (``RuntimeError`` from
    asyncio otherwise). Without :data:`EAGER_START`, or on a loop with a task factory (one set by
    ``loop.set_task_factory``: it makes the task, may wrap the coroutine or start it itself, as
    3.12's ``asyncio.eager_task_factory`` does), this is ``loop.create_task(coro, context=context)``.
    """
    if not EAGER_START or loop.get_task_factory() is not None:
        return loop.create_task(coro, context=context)  # type: ignore[call-arg]
    held = _Resumed(coro)
    task = loop.create_task(held, context=context)  # type: ignore[call-arg, arg-type]
    asyncio.tasks._enter_task(loop, task)  # type: ignore[attr-defined]
    try:
        held._first = context.run(coro.send, None)
    except StopIteration as stop:
        held._first, held._error = None, StopIteration(stop.value)
    except BaseException as exc:  # noqa: BLE001 - the task's first step raises it, as it would have
        held._first, held._error = None, exc
    finally:
        asyncio.tasks._leave_task(loop, task)  # type: ignore[attr-defined]
    return task
