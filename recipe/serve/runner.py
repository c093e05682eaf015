"""How ``recipe serve`` runs an app under uvicorn, through uvicorn's public configuration only.

:func:`uvicorn_config` is ``uvicorn.Config`` with ``recipe serve``'s defaults; :func:`use_eager_tasks`
installs the standard library's eager task factory (Python 3.12 and newer) on the server's loop, so a
request's handler runs its first step in the callback that read the request instead of the loop's
next round.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import uvicorn

__all__ = ["EAGER_TASKS", "Server", "use_eager_tasks", "uvicorn_config"]

#: Whether this Python has ``asyncio.eager_task_factory`` (3.12 and newer).
EAGER_TASKS = sys.version_info >= (3, 12)


def use_eager_tasks(loop: asyncio.AbstractEventLoop) -> bool:
    """Install ``asyncio.eager_task_factory`` on ``loop`` (Python 3.12 and newer) unless the loop
    already has a task factory (a tracing integration's, say), which is left as it is.

    Returns:
        True when the eager factory is now the loop's task factory; False on Python 3.11 (no eager
        factory: tasks start in the loop's next round) or when another factory was kept.
    """
    if not EAGER_TASKS:
        return False
    factory = loop.get_task_factory()
    if factory is None:
        loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined]
        return True
    return factory is asyncio.eager_task_factory  # type: ignore[attr-defined]


def uvicorn_config(app: Any, *, head_timeout: float | None = 10.0, max_client_connections: int | None = 256,
                   **kwargs: Any) -> Any:
    """``uvicorn.Config(app, **kwargs)`` as ``recipe serve`` builds it; any uvicorn option may be
    given and is passed on as given. Unless ``access_log`` is given, it is on only when
    ``log_level`` is unset, ``info`` or more verbose (the lines would be dropped otherwise, after
    uvicorn formatted their arguments). Unless both limits are None, uvicorn's ``http`` protocol
    is wrapped by :func:`recipe.serve.admission.admission_protocol`.

    Args:
        head_timeout: seconds a connection has to complete each request head (``recipe serve
            --head-timeout``); past it a 408 and the connection closed. None: no deadline.
        max_client_connections: connections one client address may hold open (``recipe serve
            --max-client-connections``); the next gets a 503 and is closed. None: no cap.

    Raises:
        ValueError: a limit that is not positive; a limit with ``reset_contextvars=True``.
    """
    if "access_log" not in kwargs:  # uvicorn formats each request's access-log line's arguments even
        # when its logger drops them (any level above info): no access log then
        level = kwargs.get("log_level")
        level = logging.getLevelName(level.upper()) if isinstance(level, str) else level
        kwargs["access_log"] = level is None or (isinstance(level, int) and level <= logging.INFO)
    if head_timeout is not None or max_client_connections is not None:
        if kwargs.get("reset_contextvars"):
            raise ValueError("head_timeout and max_client_connections need reset_contextvars off")
        from recipe.serve.admission import admission_protocol

        kwargs["http"] = admission_protocol(kwargs.get("http", "auto"), head_timeout, max_client_connections)
    return uvicorn.Config(app, **kwargs)


class Server(uvicorn.Server):
    """``uvicorn.Server`` whose :meth:`serve` first installs the eager task factory on its loop
    (:func:`use_eager_tasks`: Python 3.12 and newer; nothing on 3.11)."""

    async def serve(self, sockets: Any = None) -> None:
        """uvicorn's ``serve``, on a loop whose new tasks start eagerly where the Python allows it."""
        use_eager_tasks(asyncio.get_running_loop())
        await super().serve(sockets)
