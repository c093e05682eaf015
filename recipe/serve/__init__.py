"""``recipe serve``: an OpenAI- and Anthropic-compatible server over any token-in/token-out engine.

``recipe.serve.app(engine=…)`` is the ASGI app (Starlette; run it with uvicorn). Modules:
:mod:`.server` (the app and its routes), :mod:`.generation` (one driver for the three APIs), :mod:`.guard`
(disconnects and timeouts), :mod:`.errors` (each API's error shapes), :mod:`.pool` (replica routing
by longest cached prefix), :mod:`.tenants` (API keys, cache salts), :mod:`.metrics` (Prometheus),
:mod:`.config`, :mod:`.runner` (how ``recipe serve`` runs uvicorn: :func:`uvicorn_config`, and the
standard library's eager task factory on Python 3.12 and newer), and :mod:`.engines` (the engine
contract, vLLM, SGLang, replay, demo, callables).
docs/serving.md is the user's guide.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app", "uvicorn_config"]


def app(engine: Any = None, **kwargs: Any) -> Any:
    """The server as an ASGI app; see :func:`recipe.serve.server.app` for the arguments."""
    from recipe.serve.server import app as build

    return build(engine, **kwargs)


def uvicorn_config(app: Any, **kwargs: Any) -> Any:
    """A ``uvicorn.Config`` that runs ``app`` as ``recipe serve`` does; see
    :func:`recipe.serve.runner.uvicorn_config` (and :class:`recipe.serve.runner.Server`, which runs it
    with eager task start on Python 3.12 and newer)."""
    from recipe.serve.runner import uvicorn_config as build

    return build(app, **kwargs)
