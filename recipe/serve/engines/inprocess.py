"""An in-process engine: a Python callable, for embedding recipe's server in an application.

``recipe.serve.app(engine=fn)`` accepts ``fn(request: EngineRequest)`` returning an async iterator
(an ``async def`` generator) of :class:`EngineDelta` or of plain lists of new token ids; or an
awaitable of such an iterator. Closing the iterator is the abort signal, as for any engine.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from recipe.serve.engines.base import EngineDelta, EngineError, EngineRequest

__all__ = ["CallableEngine"]


class CallableEngine:
    """Wraps ``fn(request) -> AsyncIterator[EngineDelta | Sequence[int]]`` as an engine.

    Args:
        fn: the generation function (see the module docstring).
        name: the replica name (default: the function's name).
    """

    def __init__(self, fn: Callable[[EngineRequest], Any], name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError("CallableEngine needs a callable")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Run ``fn(request)`` and adapt what it yields."""
        return self._run(request)

    async def _run(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        source = self.fn(request)
        if inspect.isawaitable(source):
            source = await source
        if not hasattr(source, "__anext__"):
            raise EngineError("protocol", f"engine callable {self.name} returned {type(source).__name__}, not an async iterator")
        try:
            async for item in source:
                if isinstance(item, EngineDelta):
                    yield item
                elif isinstance(item, (list, tuple)) and all(type(i) is int for i in item):
                    yield EngineDelta(tuple(item))
                else:
                    raise EngineError("protocol", f"engine callable {self.name} yielded {type(item).__name__}")
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()

    async def aclose(self) -> None:
        """Call ``fn.aclose()`` when the callable has one."""
        close = getattr(self.fn, "aclose", None)
        if close is not None:
            await close()
