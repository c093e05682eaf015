"""One error family for bad requests; each API adapter renders it in its own error body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["RequestError"]


@dataclass(eq=False)
class RequestError(Exception):
    """A request the library refuses, with everything an API error body needs.

    Attributes:
        message: human-readable reason (the parity target's wording where it has one).
        param: field path of the offending value (``"messages[1].tool_calls[0].function.name"``),
            or None when the error is about the request as a whole.
        status: HTTP status to answer with (400 unless stated).
        type: error type (OpenAI ``error.type`` / Anthropic ``error.type``).
        code: machine-readable code (OpenAI ``error.code``).
        stage: ``"parse"`` when the body failed schema validation (missing field, wrong type,
            unknown variant, not JSON), ``"convert"`` for a semantic error found while converting.
        details: machine-readable extras some clients act on (Anthropic ``error.details``, e.g.
            ``{"error_code": "thread_unsupported_request", …}``), or None.
    """

    message: str
    param: str | None = None
    status: int = 400
    type: str = "invalid_request_error"
    code: str | None = "invalid_request_error"
    stage: Literal["parse", "convert"] = "convert"
    details: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message if self.param is None else f"{self.message} (param: {self.param})"
