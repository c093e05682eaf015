"""Server errors in each API's own shape: before the first byte (an HTTP status and the API's error
body) and after it (the API's in-stream error: Chat ``data: {"error":…}`` then ``[DONE]``, Responses
``error`` + ``response.failed``, Messages ``event: error``). Wire formats: the OpenAI and Anthropic
SDKs raise on exactly these (``openai.APIError`` on a data frame with an ``error`` key,
``anthropic.APIStatusError`` on ``event: error``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recipe.api.errors import error_body
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_wire
from recipe.serve.engines.base import EngineError

__all__ = ["ServeError", "KINDS", "from_engine_error", "error_json", "stream_error", "status_for"]


@dataclass(frozen=True, slots=True)
class _Kind:
    status: int  # OpenAI APIs
    anthropic_status: int
    openai_type: str
    code: str
    anthropic_type: str


#: Server error kind -> statuses and the two APIs' error types.
KINDS: dict[str, _Kind] = {
    "invalid_request": _Kind(400, 400, "invalid_request_error", "invalid_request_error", "invalid_request_error"),
    "authentication": _Kind(401, 401, "invalid_request_error", "invalid_api_key", "authentication_error"),
    "not_found": _Kind(404, 404, "invalid_request_error", "not_found", "not_found_error"),
    "too_large": _Kind(413, 413, "invalid_request_error", "request_too_large", "request_too_large"),
    "overloaded": _Kind(429, 529, "server_error", "overloaded", "overloaded_error"),
    "engine_rejected": _Kind(400, 400, "invalid_request_error", "engine_rejected", "invalid_request_error"),
    "context_length_exceeded": _Kind(400, 400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"),
    "engine_unavailable": _Kind(502, 502, "server_error", "engine_unavailable", "api_error"),
    "engine_failed": _Kind(502, 502, "server_error", "engine_error", "api_error"),
    "timeout": _Kind(504, 504, "server_error", "timeout", "timeout_error"),
    "store_unavailable": _Kind(503, 503, "server_error", "store_unavailable", "api_error"),
    "shutting_down": _Kind(503, 529, "server_error", "server_shutting_down", "overloaded_error"),
    "internal": _Kind(500, 500, "server_error", "internal_error", "api_error"),
}

#: EngineError.kind -> server error kind.
_ENGINE_KINDS = {
    "unavailable": "engine_unavailable",
    "overloaded": "overloaded",
    "timeout": "timeout",
    "bad_request": "engine_rejected",
    "context_length": "context_length_exceeded",
    "failed": "engine_failed",
    "protocol": "engine_failed",
}


class ServeError(Exception):
    """A request the server answers with an error (any stage).

    Attributes:
        kind: a key of :data:`KINDS` (picks the status and the error types of each API).
        message: the error message.
        param: the request field at fault, or None.
    """

    def __init__(self, kind: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        if kind not in KINDS:
            raise ValueError(f"unknown server error kind {kind!r}")
        self.kind = kind
        self.message = message
        self.param = param


#: API -> the request field that holds the prompt (named by a ``context_length_exceeded`` error).
_PROMPT_FIELDS = {"chat": "messages", "responses": "input", "messages": "messages"}


def from_engine_error(exc: EngineError, api: str | None = None) -> ServeError:
    """The server error for an engine failure: 400 ``engine_rejected`` (the engine refused the
    request), 400 ``context_length_exceeded`` naming ``api``'s prompt field (``messages`` /
    ``input``; the engine found prompt plus ``max_tokens`` longer than its window), 502 failed /
    unavailable, 504 timeout, 429 / 529 overloaded."""
    kind = _ENGINE_KINDS.get(exc.kind, "engine_failed")
    param = _PROMPT_FIELDS.get(api or "chat") if kind == "context_length_exceeded" else None
    return ServeError(kind, exc.message, param)


def status_for(api: str, kind: str) -> int:
    """The HTTP status ``api`` answers an error of ``kind`` with."""
    k = KINDS[kind]
    return k.anthropic_status if api == "messages" else k.status


def _openai_error(err: ServeError) -> dict[str, Any]:
    k = KINDS[err.kind]
    return {"message": err.message, "type": k.openai_type, "param": err.param, "code": k.code}


def _anthropic_error(err: ServeError) -> dict[str, Any]:
    message = err.message if err.param is None or err.param in err.message else f"{err.param}: {err.message}"
    return {"type": KINDS[err.kind].anthropic_type, "message": message}


def error_json(api: str, err: ServeError | RequestError) -> tuple[int, dict[str, Any]]:
    """(HTTP status, error body) for an error before the first byte, in ``api``'s shape."""
    if isinstance(err, RequestError):
        return err.status, error_body(api, err)
    if api == "messages":
        return status_for(api, err.kind), {"type": "error", "error": _anthropic_error(err)}
    return status_for(api, err.kind), {"error": _openai_error(err)}


def stream_error(api: str, err: ServeError, responses_state: dict[str, Any] | None = None) -> bytes:
    """The SSE bytes that end a stream with ``err`` after its first byte.

    ``responses_state`` (Responses only): ``{"seq": next sequence number, "response": the
    ``response.created`` object, "output": finished output items}``, for ``response.failed``.
    """
    if api == "chat":
        return b"data: " + dumps_wire({"error": _openai_error(err)}) + b"\n\ndata: [DONE]\n\n"
    if api == "messages":
        return b"event: error\ndata: " + dumps_wire({"type": "error", "error": _anthropic_error(err)}) + b"\n\n"
    state = responses_state or {}
    seq = int(state.get("seq", 0))
    inner = _openai_error(err)
    event = {"type": "error", "code": inner["code"], "message": err.message, "param": err.param,
             "sequence_number": seq, "error": inner}
    response = dict(state.get("response") or {})
    response.update(status="failed", error={"code": inner["code"], "message": err.message},
                    output=list(state.get("output") or ()))
    failed = {"type": "response.failed", "response": response, "sequence_number": seq + 1}
    return (b"event: error\ndata: " + dumps_wire(event) + b"\n\n"
            b"event: response.failed\ndata: " + dumps_wire(failed) + b"\n\n")
