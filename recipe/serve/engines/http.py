"""What the HTTP connectors share: one httpx client per engine, an SSE ``data:`` reader, the mapping
of transport and HTTP failures to :class:`~recipe.serve.engines.base.EngineError`, and the output
constraint a connector can hand to an engine.

Read timeouts are the server's (first token, idle gap, total: :class:`recipe.serve.guard.Guard`);
the client itself only bounds connecting, writing and waiting for a pooled connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from recipe.serve.config import Timeouts
from recipe.serve.engines.base import EngineError, EngineRequest

__all__ = ["HTTPEngine", "sse_objects", "map_status", "structured_output"]


def map_status(status: int, body: bytes) -> EngineError:
    """The EngineError for an HTTP error answer (the engine's own message when its body has one)."""
    message = body.decode("utf-8", "replace")[:2000]
    try:
        obj = orjson.loads(body)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = err["message"]
        elif isinstance(err, str):
            message = err
        elif isinstance(obj, dict) and isinstance(obj.get("message"), str):
            message = obj["message"]
    except orjson.JSONDecodeError:
        pass
    if status in (429, 503):
        return EngineError("overloaded", f"engine overloaded ({status}): {message}", status)
    if status in (400, 422):
        return EngineError("bad_request", f"the engine refused the request ({status}): {message}", status)
    return EngineError("failed", f"engine error ({status}): {message}", status)


async def sse_objects(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an SSE stream's ``data:`` lines, until ``data: [DONE]`` or EOF.

    Raises:
        EngineError: ``protocol`` for a data line that is not a JSON object; ``unavailable`` when the
            connection breaks.
    """
    try:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise EngineError("protocol", f"engine sent malformed JSON: {exc}: {data[:200]!r}") from None
            if not isinstance(obj, dict):
                raise EngineError("protocol", f"engine sent a non-object frame: {data[:200]!r}")
            yield obj
    except httpx.TransportError as exc:
        raise EngineError("unavailable", f"engine connection broke mid-stream: {type(exc).__name__}: {exc}") from None


def structured_output(req: EngineRequest) -> tuple[str, str] | None:
    """The constraint an engine can enforce from the first token: ``("json", schema text)``,
    ``("json_object", "")`` or ``("regex", pattern)``; None otherwise.

    Tool-call constraints (DSML) have no engine-side form yet, and in thinking mode a grammar applied
    from token 0 would forbid the reasoning, so both run unconstrained (recipe still validates the
    answer and notes a mismatch). This is the seam where ``recipe.output_grammar(prep)`` (a grammar
    that covers reasoning and DSML) takes over once it exists.
    """
    c = req.constraint
    if c is None or c.kind not in ("json", "regex"):
        return None
    prep = req.prepared
    if prep is not None and prep.conversation.thinking:
        return None
    if c.kind == "regex":
        return ("regex", c.schema)
    return ("json", c.schema) if c.schema else ("json_object", "")


class HTTPEngine:
    """Base of the HTTP connectors: the client, POSTing a streamed request, error mapping.

    Args:
        base_url: ``http://HOST:PORT`` (a path prefix is kept).
        timeouts: the server's timeouts (``connect`` bounds the connection).
        name: the replica name.
        model: the engine's served model name to send, or None.
        headers: extra request headers (e.g. ``Authorization`` for a vLLM ``--api-key``).
    """

    def __init__(self, base_url: str, *, timeouts: Timeouts = Timeouts(), name: str | None = None,
                 model: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.name = name or self.base_url
        self.model = model
        connect = timeouts.connect
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers,
            timeout=httpx.Timeout(None, connect=connect, write=connect, pool=connect),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
        )

    @contextlib.asynccontextmanager
    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
        """POST ``body`` to ``path`` and yield the streaming response (2xx only).

        Raises:
            EngineError: connection refused / unreachable (``unavailable``), connect timeout
                (``timeout``), an HTTP error status (:func:`map_status`).
        """
        request = self._client.build_request("POST", path, content=orjson.dumps(body),
                                             headers={"content-type": "application/json"})
        try:
            response = await self._client.send(request, stream=True)
        except httpx.ConnectTimeout as exc:
            raise EngineError("timeout", f"engine {self.name}: connect timeout: {exc}") from None
        except httpx.TransportError as exc:
            raise EngineError("unavailable", f"engine {self.name} unreachable: {type(exc).__name__}: {exc}") from None
        try:
            if response.status_code >= 400:
                try:
                    data = await response.aread()
                except httpx.TransportError:
                    data = b""
                raise map_status(response.status_code, data)
            yield response
        finally:
            await response.aclose()

    async def post(self, path: str, body: dict[str, Any], timeout: float = 2.0) -> None:
        """Fire a small POST (e.g. an abort); failures are ignored."""
        try:
            await self._client.post(path, content=orjson.dumps(body), headers={"content-type": "application/json"},
                                    timeout=timeout)
        except httpx.HTTPError:
            pass

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()
