"""The demo engine: what ``recipe serve`` answers with when no engine is given.

A replay of a few canned turns chosen by the request, so the official SDKs work against a fresh
install: a tool call to the first declared tool, with arguments valid for its schema, when tools are
declared and the conversation does not end in a tool result; a short answer otherwise (after a tool
result it quotes it); JSON valid for the schema when a JSON response format was asked for; with
reasoning first in thinking mode. Output is played one id per delta.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from recipe.conversation import Conversation, ToolMessage
from recipe.encodings.table import get_encoding
from recipe.jsonfmt import dumps_compact
from recipe.serve.engines.base import EngineDelta, EngineRequest
from recipe.tokenizer import Tokenizer, load_tokenizer

__all__ = ["DemoEngine", "demo_text", "example_value"]

EOS = "<｜end▁of▁sentence｜>"
_ANSWER = "Hello! I am recipe's demo engine: connect a real engine with `recipe serve --engine vllm+http://HOST:PORT`."
_SCALARS: dict[str, Any] = {"string": "example", "integer": 1, "number": 1.5, "boolean": True, "null": None}


#: the most array items and string characters one example holds in all (a schema's nested
#: ``minItems`` multiply: the example stops growing here instead of taking the server's memory)
EXAMPLE_BUDGET = 10_000


def example_value(schema: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """A small JSON value valid for common JSON Schemas: ``const``, ``enum``, ``default``, the first
    of ``anyOf`` / ``oneOf`` / a type list, objects with their required properties (all of them
    when none is required), arrays of ``minItems`` items, strings of ``minLength`` — at most
    :data:`EXAMPLE_BUDGET` items and characters in all (past it arrays and strings are shorter than
    asked). Never raises; unknown shapes give ``{}`` or ``"example"``."""
    if budget is None:
        budget = [EXAMPLE_BUDGET]
    if not isinstance(schema, dict) or depth > 8:
        return "example"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example_value(schema[key][0], depth + 1, budget)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [k for k in schema.get("required") or () if isinstance(k, str)]
        names = required or list(props)
        return {k: example_value(props.get(k, {}), depth + 1, budget) for k in names}
    if kind == "array":
        n = schema.get("minItems") if isinstance(schema.get("minItems"), int) else 0
        n = max(0, min(n, budget[0]))
        budget[0] -= n
        return [example_value(schema.get("items", {}), depth + 1, budget) for _ in range(n)]
    if kind == "string":
        n = schema.get("minLength") if isinstance(schema.get("minLength"), int) else 0
        n = max(0, min(n - 7, budget[0]))
        budget[0] -= n
        return "example" + "x" * n
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = _SCALARS[kind]
        if isinstance(low, (int, float)) and not isinstance(low, bool) and value <= low:
            value = int(low) + 1 if kind == "integer" else low + 1.5
        return value
    return _SCALARS.get(kind, "example")


def _schema_of(tool: Any) -> Any:
    """The schema a tool's arguments are held to (a strict tool's enforced schema), for its example."""
    schema = tool.enforced if tool.enforced is not None else tool.parameters
    return schema if isinstance(schema, dict) and schema else {"type": "object"}


def _call(name: str, arguments: dict[str, Any], opened: bool) -> str:
    params = "".join(
        f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
        f'{v if isinstance(v, str) else dumps_compact(v)}</｜DSML｜parameter>\n'
        for k, v in arguments.items())
    head = "" if opened else "\n\n<｜DSML｜tool_calls>\n"
    return f'{head}<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n</｜DSML｜tool_calls>'


#: The families whose output format the demo writes tool calls in (DSML); the earlier generations
#: (DeepSeek-V3 … V3.2) get the answer text.
_DSML_FAMILIES = frozenset({"deepseek_v4", "deepseek_v41"})


def demo_text(conv: Conversation, starts_in_tool_calls: bool = False, encoding: str = "deepseek_v4") -> str:
    """The completion text (special tokens spelled out) the demo answers ``conv`` with, in the
    output format of the model family ``encoding`` (tool calls only for DeepSeek-V4 and V4.1)."""
    last = conv.messages[-1] if conv.messages else None
    after_tool = isinstance(last, ToolMessage)
    think = ""
    if conv.thinking and not starts_in_tool_calls:
        think = ("The tool answered; I will report its result." if after_tool
                 else "The user wants an answer; I will reply briefly.") + "</think>"
    if conv.tools and (not after_tool or starts_in_tool_calls) and encoding in _DSML_FAMILIES:
        tool = conv.tools[0]
        args = example_value(_schema_of(tool))
        if not isinstance(args, dict):
            args = {}
        return think + _call(tool.name, args, starts_in_tool_calls) + EOS
    rf = conv.response_format
    if rf.type == "json_schema":
        answer = dumps_compact(example_value(rf.schema if rf.enforced is None else rf.enforced))
    elif rf.type == "json_object":
        answer = '{"answer": "hello"}'
    elif after_tool:
        answer = f"The tool returned: {last.content[:200]}"
    else:
        answer = _ANSWER
    return think + answer + EOS


class DemoEngine:
    """The demo engine (see the module docstring); needs :attr:`EngineRequest.prepared`."""

    def __init__(self, tokenizer: Tokenizer | None = None, name: str = "demo") -> None:
        self.name = name
        self._tok = tokenizer

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Answer ``request`` by its content, one id per delta."""
        return self._play(request)

    async def _play(self, req: EngineRequest) -> AsyncIterator[EngineDelta]:
        prep = req.prepared
        if prep is None:
            text = _ANSWER + EOS
        else:
            text = demo_text(prep.conversation, prep.parsing.starts_in_tool_calls, prep.encoding)
        # the ids of the request's own vocabulary (an earlier generation's is DeepSeek-V3's)
        tok = self._tok or (get_encoding(prep.encoding).tokenizer() if prep is not None else load_tokenizer())
        ids = tok.encode_with_special_tokens(text)[: req.max_tokens]
        finish = "stop" if ids and ids[-1] in req.stop_token_ids or not req.stop_token_ids else "length"
        for i, t in enumerate(ids):
            if i:
                await asyncio.sleep(0)
            last = i == len(ids) - 1
            yield EngineDelta((t,), None, finish if last else None, len(req.token_ids) if i == 0 else None,
                              0 if i == 0 else None)

    async def aclose(self) -> None:
        """Nothing to release."""
