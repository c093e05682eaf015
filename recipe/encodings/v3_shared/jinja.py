"""Jinja value rules the template emulations follow, so that they fail exactly where the template does.

The published chat templates are jinja; rendered by transformers, a message key that is absent is
``Undefined`` (``is none`` false, ``is defined`` false, ``+`` raises, iterating it yields nothing),
``+`` needs two strings, and ``x in content`` needs a string. These helpers give the same answers
and raise :class:`~recipe.encodings.v3_shared.segments.ChatTemplateError` where jinja raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recipe.encodings.v3_shared.segments import ChatTemplateError, Out, require_str

__all__ = ["MISSING", "get", "s", "calls_of", "function_of", "check_messages", "system_prompt"]

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
