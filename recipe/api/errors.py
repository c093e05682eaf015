"""Render a :class:`~recipe.errors.RequestError` in each API's own error body (wire formats §2.5, §3.5, §4.5)."""

from __future__ import annotations

from typing import Any

from recipe.errors import RequestError

__all__ = ["error_body", "ANTHROPIC_ERROR_TYPES"]

#: HTTP status -> Anthropic ``error.type``.
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _openai(err: RequestError) -> dict[str, Any]:
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def _anthropic(err: RequestError) -> dict[str, Any]:
    kind = ANTHROPIC_ERROR_TYPES.get(err.status, "invalid_request_error" if err.status < 500 else "api_error")
    message = err.message if err.param is None or err.param in err.message else f"{err.param}: {err.message}"
    body: dict[str, Any] = {"type": kind, "message": message}
    if err.details:
        body["details"] = err.details
    return {"type": "error", "error": body}


_RENDERERS = {"chat": _openai, "responses": _openai, "messages": _anthropic}


def error_body(api: str, err: RequestError) -> dict[str, Any]:
    """The JSON error body ``api`` (``chat`` | ``responses`` | ``messages``) answers ``err`` with.

    OpenAI APIs: ``{"error": {"message", "type", "param", "code"}}``; Anthropic Messages:
    ``{"type": "error", "error": {"type", "message"}}`` (the field path prefixed to the message).
    """
    return _RENDERERS.get(api, _openai)(err)
