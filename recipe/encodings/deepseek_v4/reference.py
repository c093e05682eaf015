"""DeepSeek-V4 prompts from the reference encoder's message dicts, as text or as safe token ids.

Training and evaluation pipelines call DeepSeek's public reference encoder (``encoding_dsv4.py``,
function ``encode_messages``) with plain message dicts. This module gives them the same prompt
*text*, byte for byte, and in addition the prompt's *token ids* computed safely: only the
template's own special-token spellings become special ids; every piece of message-derived text
(content, reasoning, tool names, arguments and results, schemas) is ordinary text, so a user
typing ``<｜Assistant｜>`` cannot forge a turn.

Message dicts (the reference's format; unknown keys are ignored):

* ``role``: ``system`` | ``developer`` | ``user`` | ``assistant`` | ``tool`` | ``latest_reminder``;
* ``content``; ``reasoning_content`` and ``tool_calls`` (OpenAI shape:
  ``{"id", "function": {"name", "arguments"}}``) on assistants; ``tool_call_id`` on tools;
* ``tools`` (OpenAI shape ``[{"type": "function", "function": {...}}]``) and ``response_format``
  on a system or developer message;
* ``task`` (a key of :data:`~recipe.encodings.deepseek_v4.constants.TASK_TOKENS`): quick
  instruction, appends the task's token; ``wo_eos``: an assistant turn without EOS.

Rules reproduced (source: the reference encoder; verified by ``tests/test_reference_encoder.py``
against DeepSeek's own vectors): tool messages are merged into a user message as
``<tool_result>…</tool_result>`` blocks (consecutive user messages merge too, joined by a blank
line), tool results are ordered like the preceding assistant's calls, and in thinking mode with
``drop_thinking`` the reasoning of turns before the last user message is dropped (and developer
messages before it are removed) unless some message declares tools.

Deliberate differences: inputs the reference rejects with ``AssertionError``/``KeyError``/
``TypeError``/``NotImplementedError`` raise :class:`ReferenceEncodingError` (a ``ValueError``)
here; the caller's dicts are never mutated.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from recipe.encodings.deepseek_v4.constants import (
    ASSISTANT,
    BOS,
    EOS,
    LATEST_REMINDER,
    TASK_TOKENS,
    TEMPLATE_SPECIALS,
    THINK_END,
    THINK_START,
    USER,
)
from recipe.encodings.deepseek_v4.render import EFFORT_TEXTS, V4_DIALECT, Dialect, template_segments
from recipe.encodings.dsml_reference import (
    CallSyntax,
    Param,
    drop_thinking_messages,
    fmt,
    get,
    ids_of,
    last_user_index,
    params,
    render_tool_calls,
    text_of,
    to_json,
)
from recipe.prompt import Prompt, Segment, Special, Text
from recipe.tokenizer import load_tokenizer

__all__ = [
    "ReferenceEncodingError",
    "render_messages",
    "encode_messages",
    "encode_messages_to_ids",
    "REFERENCE_SPECIALS",
]

Message = Mapping[str, Any]


class ReferenceEncodingError(ValueError):
    """Messages the reference encoder cannot encode (unknown role, bad task, malformed tool call …)."""


#: Every spelling the reference template emits as a special token: the V4 role/format tokens
#: plus the quick-instruction task tokens. Anything else the template writes is plain text.
REFERENCE_SPECIALS: frozenset[str] = frozenset(TEMPLATE_SPECIALS) | frozenset(TASK_TOKENS.values())

_THINKING_MODES = ("chat", "thinking")
_EFFORTS = (None, "high", "max")

# ---------------------------------------------------------------------------------------------
# Template text: shared with the API renderer (same model format, one copy of the prose)
# ---------------------------------------------------------------------------------------------

#: The reference's ``reasoning_effort="max"`` prefix is the text deepseek-recipe prints for "high".
_EFFORT_MAX_PREFIX = EFFORT_TEXTS["high"]
_RESPONSE_FORMAT_HEAD = "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"

#: Template literal -> segments (its ``｜DSML｜``/``<think>``/``</think>`` spellings are Special).
_template_segments = functools.lru_cache(maxsize=64)(template_segments)


class _Out:
    """Segment accumulator: ``lit`` for template text, ``text`` for message-derived text."""

    __slots__ = ("segs",)

    def __init__(self) -> None:
        self.segs: list[Segment] = []

    def lit(self, literal: str) -> None:
        self.segs.extend(_template_segments(literal))

    def special(self, spelling: str) -> None:
        self.segs.append(Special(spelling))

    def text(self, value: str) -> None:
        if value:
            self.segs.append(Text(value))


# ---------------------------------------------------------------------------------------------
# Value helpers (the others are :mod:`recipe.encodings.dsml_reference`'s)
# ---------------------------------------------------------------------------------------------


def _require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ReferenceEncodingError(f"{what} must be a string, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------
# Preprocessing: tool messages -> user content blocks, result order, dropped thinking
# ---------------------------------------------------------------------------------------------


def _user_turn(msg: Message) -> dict[str, Any]:
    """A user message as a merged user turn: its content as one text block (V4 keeps only the
    ``task``, ``wo_eos`` and ``mask`` keys besides)."""
    content = msg.get("content", "")
    turn = {"role": "user", "content": content, "content_blocks": [{"type": "text", "text": content}]}
    for key in ("task", "wo_eos", "mask"):
        if key in msg:
            turn[key] = msg[key]
    return turn


def _merge_tool_messages(messages: Sequence[Message], user_turn: Callable[[Message], dict[str, Any]] = _user_turn) -> list[dict[str, Any]]:
    """Fold ``tool`` messages into user messages as ``tool_result`` content blocks; consecutive user
    turns (as ``user_turn`` makes them) merge their blocks, except into one with a ``task``."""
    merged: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise ReferenceEncodingError(f"message {i} is not a dict")
        role = msg.get("role")
        last = merged[-1] if merged else None
        joinable = last is not None and last.get("role") == "user" and "content_blocks" in last
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", ""), "content": msg.get("content", "")}
            if joinable:
                last["content_blocks"].append(block)
            else:
                merged.append({"role": "user", "content_blocks": [block]})
        elif role == "user":
            turn = user_turn(msg)
            if joinable and last.get("task") is None:
                last["content_blocks"].extend(turn["content_blocks"])
            else:
                merged.append(turn)
        else:
            merged.append(dict(msg))
    return merged


def _call_order_key(order: dict[Any, int], block: Mapping[str, Any]) -> int:
    try:
        return order.get(block.get("tool_use_id", ""), 0)
    except TypeError as exc:
        raise ReferenceEncodingError("tool_call_id must be a string") from exc


def _sort_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reorder each user message's tool-result blocks by the latest assistant's call order.

    Text blocks keep their positions; results whose id is unknown sort as position 0 (stable).
    """
    order: dict[Any, int] = {}
    for msg in messages:
        role = msg.get("role")
        if role == "assistant" and msg.get("tool_calls"):
            order = {}
            calls = msg["tool_calls"]
            if not isinstance(calls, Iterable):
                raise ReferenceEncodingError(f"tool_calls must be a list, got {type(calls).__name__}")
            for pos, call in enumerate(calls):
                if not isinstance(call, Mapping):
                    raise ReferenceEncodingError("a tool call is not a dict")
                fn = call.get("function", {})
                call_id = call.get("id") or (fn.get("id", "") if isinstance(fn, Mapping) else "")
                if call_id:
                    order[call_id] = pos
        elif role == "user" and msg.get("content_blocks"):
            blocks = msg["content_blocks"]
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if len(results) > 1 and order:
                ranked = iter(sorted(results, key=lambda b: _call_order_key(order, b)))
                msg["content_blocks"] = [next(ranked) if b.get("type") == "tool_result" else b for b in blocks]
    return messages


#: Roles kept before the last user message when reasoning is dropped (V4 and V4.1).
_KEEP_ROLES = frozenset({"user", "system", "tool", "latest_reminder", "direct_search_results"})


class Turns(NamedTuple):
    """A planned rendering: the conversation to render and what each message's rendering reads of it.

    Attributes:
        messages: context + messages, tool messages merged, tool results ordered, reasoning dropped.
        start, count: render ``messages[start:start + count]``.
        last_user: index of the last user message in ``messages`` (-1: none).
        thinking: thinking mode.
        drop_thinking: reasoning before ``last_user`` is dropped (asked for, and no message
            declares tools).
    """

    messages: list[dict[str, Any]]
    start: int
    count: int
    last_user: int
    thinking: bool
    drop_thinking: bool


def _plan(
    ctx: list[dict[str, Any]],
    msgs: list[dict[str, Any]],
    thinking_mode: str,
    drop_thinking: bool,
    last_user: Callable[[Sequence[Message]], int] = last_user_index,
) -> Turns:
    """The :class:`Turns` of merged context + messages: tool results ordered and, in thinking mode,
    reasoning dropped before the last user message (as ``last_user`` finds it).

    Reasoning is dropped only when no message declares tools. The reference counts what to render
    as len(dropped full) - len(dropped context), each dropped on its own; the two can disagree
    about the context's tail (kept for parity).
    """
    full = _sort_tool_results(ctx + msgs)
    effective_drop = drop_thinking and not any(m.get("tools") for m in full)
    start, count = len(ctx), len(msgs)
    if thinking_mode == "thinking" and effective_drop:
        full = drop_thinking_messages(full, last_user(full), _KEEP_ROLES)
        count = len(full) - len(drop_thinking_messages(ctx, last_user(ctx), _KEEP_ROLES))
        start = len(full) - count
    return Turns(full, start, count, last_user(full), thinking_mode == "thinking", effective_drop)


# ---------------------------------------------------------------------------------------------
# Rendering one message
# ---------------------------------------------------------------------------------------------


def _render_tools_and_format(out: _Out, msg: Message, d: Dialect = V4_DIALECT) -> None:
    """The ``## Tools`` (in ``d``'s DSML spelling) and ``## Response Format`` sections of a
    system/developer message."""
    tools = msg.get("tools")
    if tools:
        out.segs.extend(d.tools_head)
        out.text("\n".join(to_json(get(t, "function", "a tool", ReferenceEncodingError), ReferenceEncodingError)
                           for t in tools))
        out.segs.extend(d.tools_tail)
    response_format = msg.get("response_format")
    if response_format:
        out.lit(_RESPONSE_FORMAT_HEAD)
        out.text(to_json(response_format, ReferenceEncodingError))


#: The type of a user content block that stands for an image (V4.1's reference turns image blocks
#: into these; rendered as "[Unsupported __image__]" where no image placeholder is given).
IMAGE_BLOCK = "__image__"


def _tool_result_text(out: _Out, result: Any) -> None:
    """A tool result's text: a list of parts joined by blank lines (non-text parts as
    ``[Unsupported …]``), one text segment."""
    if isinstance(result, list):
        parts = []
        for part in result:
            if not isinstance(part, Mapping):
                raise ReferenceEncodingError("a tool result part is not a dict")
            if part.get("type") == "text":
                parts.append(_require_str(part.get("text", ""), "tool result text"))
            else:
                parts.append(f"[Unsupported {fmt(part.get('type'))}]")
        result = "\n\n".join(parts)
    out.text(fmt(result))


def _render_user_blocks(
    out: _Out,
    blocks: Sequence[Any],
    tool_result: Callable[[_Out, Any], None] = _tool_result_text,
    image: str | None = None,
) -> None:
    """User content blocks joined by blank lines: text, tool results (``tool_result`` writes the
    content) wrapped in ``<tool_result>``, :data:`IMAGE_BLOCK` s as the special token ``image``."""
    for i, block in enumerate(blocks):
        if i:
            out.lit("\n\n")
        if not isinstance(block, Mapping):
            raise ReferenceEncodingError("a content block is not a dict")
        kind = block.get("type")
        if kind == "text":
            out.text(_require_str(block.get("text", ""), "user content"))
        elif kind == "tool_result":
            out.lit("<tool_result>")
            tool_result(out, block.get("content", ""))
            out.lit("</tool_result>")
        elif kind == IMAGE_BLOCK and image is not None:
            out.special(image)
        else:
            out.text(f"[Unsupported {fmt(kind)}]")


def _dsml_arguments(raw: Any) -> list[Param]:
    """The parameters of the parsed arguments; unparsable arguments become one ``arguments`` string."""
    try:
        args = json.loads(raw)
    except Exception:  # noqa: BLE001 - the reference wraps anything json.loads refuses
        args = {"arguments": raw}
    if not isinstance(args, dict):
        raise ReferenceEncodingError(f"tool call arguments must be a JSON object, got {type(args).__name__}")
    return params(args, ReferenceEncodingError)


#: V4's tool calls: its tag names, arguments parsed as above.
V4_CALLS = CallSyntax(V4_DIALECT.calls, V4_DIALECT.invoke, V4_DIALECT.parameter, _dsml_arguments)


def _render_assistant(out: _Out, index: int, turns: Turns, emit: Callable[[_Out, Any], None],
                      syntax: CallSyntax = V4_CALLS) -> None:
    """Assistant message ``index``: reasoning + ``</think>`` when kept (thinking mode, not after a
    task, after the last user message unless nothing is dropped), content via ``emit``, tool calls
    in ``syntax``, EOS unless ``wo_eos``."""
    messages = turns.messages
    msg = messages[index]
    prev_has_task = index >= 1 and messages[index - 1].get("task") is not None
    if turns.thinking and not prev_has_task and (not turns.drop_thinking or index > turns.last_user):
        out.text(fmt(msg.get("reasoning_content") or ""))
        out.special(THINK_END)
    emit(out, msg.get("content") or "")
    calls = msg.get("tool_calls")
    if calls:
        render_tool_calls(out, calls, syntax, ReferenceEncodingError)
    if not msg.get("wo_eos", False):
        out.special(EOS)


def _render_transition(out: _Out, index: int, turns: Turns, opens_turn: bool) -> None:
    """After message ``index``, when it is the last or followed by an assistant/reminder turn: its
    task token (``action`` first opens the assistant turn), or, for a message that ``opens_turn``,
    ``<｜Assistant｜>`` + ``<think>`` (thinking mode, and from the last user message on unless
    nothing is dropped) or ``</think>``."""
    messages, thinking = turns.messages, turns.thinking
    if index + 1 < len(messages) and messages[index + 1].get("role") not in ("assistant", "latest_reminder"):
        return
    task = messages[index].get("task")
    if task is not None:
        token = TASK_TOKENS.get(task) if isinstance(task, str) else None
        if token is None:
            raise ReferenceEncodingError(f"invalid task {task!r}; valid tasks: {sorted(TASK_TOKENS)}")
        if task == "action":
            out.special(ASSISTANT)
            out.special(THINK_START if thinking else THINK_END)
        out.special(token)
    elif opens_turn:
        out.special(ASSISTANT)
        open_thinking = thinking and (not turns.drop_thinking or index >= turns.last_user)
        out.special(THINK_START if open_thinking else THINK_END)


def _emit_text(out: _Out, value: Any) -> None:
    out.text(fmt(value))


def _render_message(out: _Out, index: int, turns: Turns, reasoning_effort: str | None) -> None:
    """Append message ``index`` of ``turns`` and, when due, the transition to the next turn."""
    msg = turns.messages[index]
    role = msg.get("role")
    content = msg.get("content")
    if index == 0 and turns.thinking and reasoning_effort == "max":
        out.lit(_EFFORT_MAX_PREFIX)

    if role == "system":
        out.text(fmt(content or ""))
        _render_tools_and_format(out, msg)
    elif role == "developer":
        if not content:
            raise ReferenceEncodingError("a developer message needs non-empty content")
        out.special(USER)
        out.text(_require_str(content, "developer content"))
        _render_tools_and_format(out, msg)
    elif role == "user":
        out.special(USER)
        blocks = msg.get("content_blocks")
        if blocks:
            _render_user_blocks(out, blocks)
        else:
            out.text(_require_str(content or "", "user content"))
    elif role == "latest_reminder":
        out.special(LATEST_REMINDER)
        out.text(fmt(content))
    elif role == "assistant":
        _render_assistant(out, index, turns, _emit_text)
    else:
        raise ReferenceEncodingError(f"unknown role: {role!r}")
    _render_transition(out, index, turns, role in ("user", "developer"))


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def render_messages(
    messages: Sequence[Message],
    thinking_mode: str,
    context: Sequence[Message] | None = None,
    drop_thinking: bool = True,
    add_default_bos_token: bool = True,
    reasoning_effort: str | None = None,
) -> Prompt:
    """The reference encoder's prompt as segments: template specials vs. plain text.

    Args:
        messages: message dicts to render (reference format, see the module docstring).
        thinking_mode: ``"chat"`` or ``"thinking"``.
        context: earlier messages already in the model's cache; they shape the rendering (tool
            result order, which reasoning is dropped) but are not emitted, and no BOS is added.
        drop_thinking: drop reasoning of turns before the last user message (thinking mode only;
            ignored when any message has ``tools``).
        add_default_bos_token: start with BOS (only when there is no ``context``).
        reasoning_effort: ``None``, ``"high"`` or ``"max"`` (``"max"`` prefixes the first message
            in thinking mode).

    Returns:
        :class:`~recipe.prompt.Prompt` whose ``text`` equals the reference ``encode_messages``.

    Raises:
        ReferenceEncodingError: invalid mode/effort/role/task, malformed tool call, non-string
            user/developer content, non-JSON-serialisable schema.
    """
    ctx = _merge_tool_messages(context) if context else []
    msgs = _merge_tool_messages(messages)
    turns = _plan(ctx, msgs, thinking_mode, drop_thinking)
    out = _Out()
    if add_default_bos_token and not context:
        out.special(BOS)

    if turns.count > 0:
        if thinking_mode not in _THINKING_MODES:
            raise ReferenceEncodingError(f"invalid thinking_mode {thinking_mode!r}; expected 'chat' or 'thinking'")
        if reasoning_effort not in _EFFORTS:
            raise ReferenceEncodingError(f"invalid reasoning_effort {reasoning_effort!r}; expected None, 'high' or 'max'")
        for index in range(turns.start, turns.start + turns.count):
            _render_message(out, index, turns, reasoning_effort)
    return Prompt(tuple(out.segs))


encode_messages = text_of(render_messages, """The prompt text of DeepSeek's reference ``encode_messages``
(``encoding_dsv4.py``), byte for byte.

Arguments and errors as :func:`render_messages`. The text spells special tokens out; to get token ids
use :func:`encode_messages_to_ids`, never a special-token-aware encode of this text (message text
may itself contain special-token spellings).
""")

encode_messages_to_ids = ids_of(render_messages, load_tokenizer, """Token ids of :func:`encode_messages`'s
prompt, safe against special-token spellings in messages.

Only the template's own special tokens (:data:`REFERENCE_SPECIALS`) become special ids; all
message-derived text is encoded with ``encode_ordinary``. For messages whose text contains no
added-token spelling the ids equal HF ``tokenizers``' encoding of the prompt text.

Args:
    tokenizer: the vocabulary (default: the embedded DeepSeek-V4 ``tokenizer.json``).
    others: as :func:`render_messages`.

Raises:
    ReferenceEncodingError: as :func:`render_messages`.
    KeyError: ``tokenizer`` lacks one of the template's special tokens.
""")
