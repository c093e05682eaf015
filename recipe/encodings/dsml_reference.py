"""What the DSML-family reference encoders share: DeepSeek-V3.2 (``encoding_dsv32.py``), V4
(``encoding_dsv4.py``) and V4.1 (``encoding.py`` of the V4.1 release).

The three published encoders are one lineage: the same value printing (``str.format``, Python's
``json.dumps``), the same ``<｜DSML｜…>`` tool-call block, the same rule for dropping earlier
reasoning, and the same three entry points (``render_messages`` -> ``encode_messages`` /
``encode_messages_to_ids``). What differs is data each family passes in: the tag names and the
argument reader (:class:`CallSyntax`), which roles survive dropped reasoning, and the error type
its inputs are refused with (:class:`~recipe.encodings.deepseek_v4.reference.ReferenceEncodingError`
for V4 and V4.1, :class:`~recipe.encodings.v3_shared.segments.ChatTemplateError` for V3.2).

Every writer takes a segment accumulator ``out`` with ``lit(template_text)`` and
``text(message_text)``: the family's accumulator decides which template spellings are special
tokens (``｜DSML｜`` is one in the V4 vocabulary, ordinary text in V3's); message text is always text.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from recipe.prompt import Prompt, encode_prompt
from recipe.tokenizer import Tokenizer

__all__ = [
    "CallSyntax", "fmt", "to_json", "get", "params", "last_user_index", "drop_thinking_messages", "render_tool_calls",
    "text_of", "ids_of",
]

#: One argument as the block writes it: ``(name, "true" | "false", value)`` (``string="…"``).
Param = tuple[str, str, str]


class Writer(Protocol):
    """The segment accumulator the writers append to."""

    def lit(self, literal: str) -> None: ...

    def text(self, value: str) -> None: ...


class CallSyntax(NamedTuple):
    """How a family's reference encoder writes an assistant's tool calls.

    Attributes:
        calls, invoke, parameter: the tag names after ``｜DSML｜`` (V3.2 ``function_calls`` /
            ``invoke`` / ``parameter``; V4 ``tool_calls`` / …; V4.1 `` calls`` / `` invoke`` /
            `` parameter``, with a leading space).
        arguments: a call's ``function.arguments`` -> its parameters (:data:`Param` each); raises
            the family's error for arguments its encoder refuses.
    """

    calls: str
    invoke: str
    parameter: str
    arguments: Callable[[Any], list[Param]]


def fmt(value: Any) -> str:
    """``value`` as ``str.format`` inserts it (``None`` -> ``"None"``), as the reference encoders do."""
    return value if type(value) is str else format(value)


def to_json(value: Any, error: type[ValueError]) -> str:
    """Python ``json.dumps`` with ``", "`` / ``": "`` separators, non-ASCII kept (the references'
    ``to_json``: ASCII-escaped when that fails). Raises ``error`` for a value neither can print."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        try:
            return json.dumps(value, ensure_ascii=True)
        except (TypeError, ValueError) as exc:
            raise error(f"value is not JSON-serialisable: {exc}") from exc


def get(obj: Any, key: str, what: str, error: type[ValueError]) -> Any:
    """``obj[key]`` for a mapping that has ``key``; else ``error`` naming ``what``."""
    if not isinstance(obj, Mapping) or key not in obj:
        raise error(f"{what} has no {key!r}")
    return obj[key]


def params(args: Mapping[Any, Any], error: type[ValueError]) -> list[Param]:
    """:data:`Param` per argument: strings as they are (``"true"``), other values as JSON (``"false"``)."""
    return [(fmt(k), "true" if isinstance(v, str) else "false", v if isinstance(v, str) else to_json(v, error))
            for k, v in args.items()]


def last_user_index(messages: Sequence[Mapping[str, Any]], roles: Collection[str] = ("user", "developer")) -> int:
    """Index of the last message whose role is in ``roles`` (V3.2 and V4: user or developer), or -1."""
    for idx in range(len(messages) - 1, -1, -1):
        if messages[idx].get("role") in roles:
            return idx
    return -1


def drop_thinking_messages(messages: Sequence[Mapping[str, Any]], last_user: int, keep: Collection[str]) -> list[Any]:
    """The references' dropped thinking: before message ``last_user`` assistants lose their
    ``reasoning_content`` and messages of roles neither in ``keep`` nor ``assistant`` are removed;
    from ``last_user`` on every message stays as it is."""
    out: list[Any] = []
    for idx, msg in enumerate(messages):
        role = msg.get("role")
        if role in keep or idx >= last_user:
            out.append(msg)
        elif role == "assistant":
            out.append({k: v for k, v in msg.items() if k != "reasoning_content"})
    return out


def render_tool_calls(out: Writer, calls: Iterable[Any], syntax: CallSyntax, error: type[ValueError]) -> None:
    """``\\n\\n<｜DSML｜calls>`` + one ``invoke`` per call (names and values as message text, one
    parameter a line, a blank line in an invoke without any) + ``\\n</｜DSML｜calls>``, tag names as
    ``syntax`` spells them. Raises ``error`` for ``calls`` that is not a list, a call without
    ``function`` / ``name`` / ``arguments``, and whatever ``syntax.arguments`` raises."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Iterable):
        raise error(f"tool_calls must be a list, got {type(calls).__name__}")
    dsml = "｜DSML｜"
    out.lit(f"\n\n<{dsml}{syntax.calls}>\n")
    for i, call in enumerate(calls):
        fn = get(call, "function", "a tool call", error)
        name = get(fn, "name", "a tool call's function", error)
        args = syntax.arguments(get(fn, "arguments", "a tool call's function", error))
        if i:
            out.lit("\n")
        out.lit(f'<{dsml}{syntax.invoke} name="')
        out.text(fmt(name))
        out.lit('">\n')
        for j, (key, is_str, value) in enumerate(args):
            if j:
                out.lit("\n")
            out.lit(f'<{dsml}{syntax.parameter} name="')
            out.text(key)
            out.lit(f'" string="{is_str}">')
            out.text(value)
            out.lit(f"</{dsml}{syntax.parameter}>")
        out.lit(f"\n</{dsml}{syntax.invoke}>")
    out.lit(f"\n</{dsml}{syntax.calls}>")


def _entry(render: Callable[..., Prompt], call: Callable[..., Any], name: str, doc: str,
           signature: inspect.Signature) -> Callable[..., Any]:
    functools.update_wrapper(call, render)
    del call.__wrapped__  # type: ignore[attr-defined]  # (its own signature, below, not render's)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


def text_of(render: Callable[..., Prompt], doc: str) -> Callable[..., str]:
    """``encode_messages``: the prompt text of ``render`` (a family's ``render_messages``), with
    its arguments; ``doc`` is its docstring."""

    def encode_messages(*args: Any, **kwargs: Any) -> str:
        return render(*args, **kwargs).text

    signature = inspect.signature(render).replace(return_annotation="str")
    return _entry(render, encode_messages, "encode_messages", doc, signature)


def ids_of(render: Callable[..., Prompt], vocabulary: Callable[[], Tokenizer], doc: str) -> Callable[..., list[int]]:
    """``encode_messages_to_ids``: the token ids of ``render``'s prompt (template specials by id,
    message text with ``encode_ordinary``: :func:`recipe.prompt.encode_prompt`), with ``render``'s
    arguments plus ``tokenizer=`` (default: ``vocabulary()``); ``doc`` is its docstring."""

    def encode_messages_to_ids(*args: Any, tokenizer: Tokenizer | None = None, **kwargs: Any) -> list[int]:
        return encode_prompt(tokenizer if tokenizer is not None else vocabulary(), render(*args, **kwargs))

    signature = inspect.signature(render)
    tokenizer = inspect.Parameter("tokenizer", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="Tokenizer | None")
    parameters = list(signature.parameters.values())
    at = next((i for i, p in enumerate(parameters) if p.kind is inspect.Parameter.KEYWORD_ONLY), len(parameters))
    signature = signature.replace(parameters=[*parameters[:at], tokenizer, *parameters[at:]], return_annotation="list[int]")
    return _entry(render, encode_messages_to_ids, "encode_messages_to_ids", doc, signature)
