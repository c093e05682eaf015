"""One error family for bad requests; each API adapter renders it in its own error body."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["RequestError", "rust_debug"]

_RUST_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}
#: Unicode categories Rust's ``char::escape_debug`` escapes as ``\u{…}`` (besides ``" "``): the
#: characters it does not print (controls, format characters such as ZWNJ, surrogates, private use,
#: unassigned, separators) and the grapheme extenders (approximated by the marks Mn and Me).
_RUST_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs", "Mn", "Me"})


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


def rust_debug(s: str) -> str:
    """``s`` quoted as Rust's ``{:?}`` prints a ``str``, for messages worded as deepseek-recipe's
    (serde's ``invalid value: string "…"``, ``invalid url: "…"``): ``"`` ``\\`` newline, carriage
    return, tab and NUL as backslash escapes, the characters of :data:`_RUST_UNPRINTABLE` other than
    the space as ``\\u{hex}``, the rest as they are; in double quotes. An approximation of Rust's
    printable and grapheme-extend tables by Unicode category."""
    out = []
    for c in s:
        esc = _RUST_ESCAPES.get(c)
        if esc is not None:
            out.append(esc)
        elif c != " " and unicodedata.category(c) in _RUST_UNPRINTABLE:
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
