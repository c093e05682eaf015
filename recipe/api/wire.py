"""Shared pieces of the pydantic wire models: strict scalar types and parse-error translation."""

from __future__ import annotations

import functools
import re

from contextvars import ContextVar
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from recipe.api.reuse import MemoMatch
from recipe.errors import RequestError
from recipe.jsonfmt import MAX_DEPTH, loads_request, nesting_message, surrogate_path, too_deep

__all__ = ["WireModel", "EngineSamplingFields", "U32", "U64", "parse_body", "parse_body_reusing", "check_u32", "field_path",
           "DEPTH_CHECKED"]

#: serde-style unsigned integers: no floats, no strings, no booleans.
U32 = Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)]
U64 = Annotated[int, Field(strict=True, ge=0, le=2**64 - 1)]


class WireModel(BaseModel):
    """Base of every request model: strict scalars, unknown keys ignored, frozen."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class EngineSamplingFields(WireModel):
    """The fields of vLLM's / SGLang's own servers every API's request may carry at its top level
    (the openai SDK's ``extra_body``), read as sent and checked at conversion: the sampling fields
    (:mod:`recipe.api.engine_sampling`; ``Options.engine_sampling``) and ``chat_template_kwargs``
    (its ``thinking`` / ``enable_thinking`` switch: :func:`recipe.api.common.template_thinking`;
    ``Options.chat_template_kwargs``)."""

    top_k: Any = None
    min_p: Any = None
    repetition_penalty: Any = None
    logit_bias: Any = None
    min_tokens: Any = None
    stop_token_ids: Any = None
    chat_template_kwargs: Any = None


#: Discriminator values pydantic puts into error locations after a list index (not real fields).
_TAGS = frozenset(
    "system user assistant tool latest_reminder developer text image_url file json_object json_schema regex "
    "input_text output_text input_image input_file message function_call function_call_output reasoning "
    "image document tool_use tool_result thinking redacted_thinking".split()
)


def field_path(loc: tuple[Any, ...]) -> str:
    """pydantic location -> ``messages[1].content[0].text`` (union-branch and tag names dropped)."""
    out = ""
    prev: Any = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(("function-", "union[", "tagged-union[", "literal[", "list[", "dict[")) or part in {"str", "list", "dict", "int", "bool", "float"} or part[:1].isupper():
            pass
        elif part in _TAGS and (isinstance(prev, int) or prev in ("response_format", "tool_choice", "format")):
            pass
        elif isinstance(prev, str) and prev.startswith("tagged-union["):
            pass  # the tag pydantic puts after a nested tagged union (Responses tool_choice)
        else:
            out += f".{part}" if out else part
        prev = part
    return out


def _serde_expected(listed: str) -> str:
    """pydantic's ``'a', 'b' or 'c'`` as serde words it: ``expected `a```, ``expected `a` or `b```,
    ``expected one of `a`, `b`, `c```."""
    values = re.findall(r"'((?:[^'\\]|\\.)*)'", listed)
    if len(values) == 1:
        return f"expected `{values[0]}`"
    if len(values) == 2:
        return f"expected `{values[0]}` or `{values[1]}`"
    return "expected one of " + ", ".join(f"`{v}`" for v in values)


def _describe(err: dict[str, Any]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return f"missing field `{err['loc'][-1]}`"
    if kind == "union_tag_invalid":
        expected = ", ".join(f"`{t.strip()}`" for t in str(ctx.get("expected_tags", "")).replace("'", "").split(","))
        return f"unknown variant `{ctx.get('tag')}`, expected one of {expected}"
    if kind == "literal_error":
        return f"unknown variant `{err.get('input')}`, {_serde_expected(str(ctx.get('expected', '')))}"
    return f"{err['msg']} (got {type(err.get('input')).__name__})"


#: ``id()`` of a body dict whose nesting depth was already checked, by whoever parsed its JSON text
#: with :func:`~recipe.jsonfmt.loads_request` (``prepare`` sets it around the adapter's parse), so
#: :func:`parse_body` does not walk it a second time.
DEPTH_CHECKED: ContextVar[int] = ContextVar("recipe_depth_checked", default=0)


def _check_dict_body(body: Any) -> None:
    """A body given as a Python object gets the JSON body's rules: its nesting depth limit and no
    lone surrogates (the JSON parser refuses their escapes).

    One ``orjson.dumps`` pass (C) clears the common case: it refuses every lone surrogate, and a
    text with at most :data:`~recipe.jsonfmt.MAX_DEPTH` opening brackets cannot nest deeper (each
    level opens one; brackets inside strings only raise the count). Otherwise the walks decide.

    Raises:
        RequestError: stage ``parse``, naming the field path of the first problem.
    """
    try:
        text: bytes | None = orjson.dumps(body)
    except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, a non-JSON value: walked below
        text = None
    if text is not None and text.count(b"[") + text.count(b"{") <= MAX_DEPTH:
        return
    if too_deep(body):
        message, path = nesting_message(body)
        raise RequestError(f"invalid request body: {message}", param=path, stage="parse")
    if text is None and (path := surrogate_path(body)) is not None:
        raise RequestError(f"invalid request body: lone surrogate in a string at {path or 'the body'} "
                           "(not valid Unicode; UTF-8 cannot carry it)", param=path or None, stage="parse")


@functools.cache
def _u32_adapter() -> TypeAdapter[int]:
    return TypeAdapter(U32)


def check_u32(value: Any, field: str) -> int:
    """``value`` validated as a :data:`U32` field is at parse time, for a field read only later
    (e.g. Chat ``max_completion_tokens``, read only when an option says so).

    Raises:
        RequestError: stage ``parse``, the same ``invalid request body: …`` message a :data:`U32`
            field of a wire model gives, ``param`` = ``field``.
    """
    try:
        return _u32_adapter().validate_python(value)
    except ValidationError as exc:
        raise RequestError(f"invalid request body: {_describe(exc.errors(include_url=False)[0])}", param=field,
                           stage="parse") from None


def parse_body(model: type[WireModel], body: Any) -> Any:
    """Validate ``body`` (dict, JSON str or bytes) into ``model``.

    Raises:
        RequestError: stage ``parse``, message ``invalid request body: …`` / ``invalid JSON request: …``
            with the field path of the first problem in ``param``.
    """
    if isinstance(body, (bytes, bytearray, memoryview, str)):
        body = loads_request(bytes(body) if not isinstance(body, str) else body)
    elif DEPTH_CHECKED.get() != id(body):
        _check_dict_body(body)
    if not isinstance(body, dict):
        raise RequestError("invalid request body: expected a JSON object", stage="parse")
    try:
        return model.__pydantic_validator__.validate_python(body)  # what model_validate(body) runs
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        # Prefer the deepest, most specific error (union branches produce several).
        err = max(errs, key=lambda e: (e["type"] != "missing" or len(e["loc"]) > 1, len(e["loc"])))
        for e in errs:
            if e["type"].startswith("value_error") or e["type"] == "union_tag_invalid":
                err = e
                break
        msg = err["msg"].removeprefix("Value error, ") if err["type"] == "value_error" else _describe(err)
        raise RequestError(f"invalid request body: {msg}", param=field_path(err["loc"]) or None, stage="parse") from None


def parse_body_reusing(model: type[WireModel], body: dict[str, Any], field: str, match: MemoMatch | None) -> Any:
    """:func:`parse_body` of a body parsed from JSON text (its nesting already checked), validating
    only ``body[field][match.length:]`` and the other fields: the first ``match.length`` items of the
    list ``field`` are the wire models the memo kept for the same JSON bytes
    (:mod:`recipe.api.reuse`). When the rest does not validate, the whole body is validated as
    :func:`parse_body` does, so the error is a cold request's.

    Raises:
        RequestError: as :func:`parse_body`.
    """
    if match is not None and match.length:
        rest = {**body, field: body[field][match.length:]}
        try:
            request = model.__pydantic_validator__.validate_python(rest)
        except ValidationError:
            pass
        else:
            return request.model_copy(update={field: [*match.wire(), *getattr(request, field)]})
    token = DEPTH_CHECKED.set(id(body))
    try:
        return parse_body(model, body)
    finally:
        DEPTH_CHECKED.reset(token)
