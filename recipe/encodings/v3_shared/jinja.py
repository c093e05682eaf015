"""Jinja value rules the template emulations follow, so that they fail exactly where the template does.

The published chat templates are jinja; rendered by transformers, a message key that is absent is
``Undefined`` (``is none`` false, ``is defined`` false, ``+`` raises, iterating it yields nothing),
``+`` needs two strings, and ``x in content`` needs a string. These helpers give the same answers
and raise :class:`~recipe.encodings.v3_shared.segments.ChatTemplateError` where jinja raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from recipe.encodings.v3_shared.constants import (
    ASSISTANT,
    EOS,
    TOOL_CALLS_BEGIN,
    TOOL_CALLS_END,
    TOOL_OUTPUT_BEGIN,
    TOOL_OUTPUT_END,
    TOOL_OUTPUTS_BEGIN,
    USER,
)
from recipe.encodings.v3_shared.segments import ChatTemplateError, Out, require_str

__all__ = ["MISSING", "get", "s", "calls_of", "function_of", "check_messages", "system_prompt", "turns", "user_turn",
           "tool_result", "open_results", "calls_turn"]

MISSING = Out.MISSING


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` as jinja reads it: :data:`MISSING` for an absent key (or a non-mapping)."""
    if isinstance(obj, Mapping):
        return obj.get(key, MISSING)
    return MISSING


def s(value: Any, what: str, template: str) -> str:
    """``value`` where the template concatenates it with ``+`` (a ``str``, else the template raises)."""
    return require_str(value, what, template)


def calls_of(value: Any, template: str) -> Sequence[Any]:
    """The items of ``{% for tool in message['tool_calls'] %}`` (absent: none; ``None``: raises)."""
    if value is MISSING:
        return ()
    if isinstance(value, (list, tuple)):
        return value
    raise ChatTemplateError(f"{template} template: tool_calls is {type(value).__name__}, not a list (the template iterates it)")


def function_of(call: Any, template: str) -> tuple[str, str]:
    """``(tool['function']['name'], tool['function']['arguments'])``, both strings (else raises:
    the template concatenates them; a dict ``arguments`` is a ``TypeError`` in jinja)."""
    fn = get(call, "function")
    if not isinstance(fn, Mapping):
        raise ChatTemplateError(f"{template} template: a tool call has no 'function' object")
    return s(fn.get("name", MISSING), "a tool call's function name", template), s(
        fn.get("arguments", MISSING), "a tool call's function arguments (a JSON string is expected)", template)


def check_messages(messages: Sequence[Any]) -> None:
    """Every message must be a dict (transformers raises ``TypeError`` otherwise)."""
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ChatTemplateError(f"message {i} is not a dict")


def system_prompt(messages: Sequence[Mapping[str, Any]], template: str) -> tuple[str, int | None]:
    """The templates' hoisted system prompt: every system content joined with ``\\n\\n``, and the index
    of the first system message (None when there is none)."""
    parts: list[str] = []
    first = None
    for i, m in enumerate(messages):
        if m.get("role") == "system":
            parts.append(s(m.get("content", MISSING), "a system message's content", template))
            if first is None:
                first = i
    return "\n\n".join(parts), first


# ----------------------------------------------------------------------------- pieces of every template


def turns(out: Out, messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[int, Any, Any, Mapping[str, Any]]]:
    """``(index, role, content, message)`` for each message of a template's loop, marking where each
    non-system message begins (``content`` as jinja reads ``message['content']``)."""
    for i, m in enumerate(messages):
        role = m.get("role")
        if role != "system":
            out.mark(i)
        yield i, role, get(m, "content"), m


def user_turn(out: Out, i: int, content: Any, template: str, assistant: bool = False) -> None:
    """``<｜User｜>`` + the user's content (+ ``<｜Assistant｜>`` where the template writes it there)."""
    out.special(USER)
    out.content(i, s(content, "a user message's content", template))
    if assistant:
        out.special(ASSISTANT)


def tool_result(out: Out, i: int, content: Any, template: str) -> None:
    """``<｜tool▁output▁begin｜>`` + a tool message's content + ``<｜tool▁output▁end｜>``."""
    out.special(TOOL_OUTPUT_BEGIN)
    out.content(i, s(content, "a tool message's content", template))
    out.special(TOOL_OUTPUT_END)


def open_results(out: Out, first: bool) -> bool:
    """Before a tool result: ``<｜tool▁outputs▁begin｜>`` for the first of a run, else ``"\n"``;
    returns False (the run's first result is written)."""
    if first:
        out.special(TOOL_OUTPUTS_BEGIN)
    else:
        out.lit("\n")
    return False


def calls_turn(out: Out, i: int, content: Any, calls: Any, template: str, write_call: Callable[[Out, Any, str], None],
               sep: str) -> None:
    """An assistant turn with calls, as the templates that start each turn afresh write it:
    ``[content]`` (unless None) ``<｜tool▁calls▁begin｜>`` + each call (``sep`` between them) +
    ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``."""
    for k, call in enumerate(calls_of(calls, template)):
        if k == 0:
            if content is not None:
                out.content(i, s(content, "an assistant message's content", template))
            out.special(TOOL_CALLS_BEGIN)
        else:
            out.lit(sep)
        write_call(out, call, template)
    out.special(TOOL_CALLS_END)
    out.special(EOS)
