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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from recipe.encodings.deepseek_v4.constants import (
    ASSISTANT,
    BOS,
    DSML,
    EOS,
    LATEST_REMINDER,
    TASK_TOKENS,
    TEMPLATE_SPECIALS,
    THINK_END,
    THINK_START,
    USER,
)
from recipe.encodings.deepseek_v4.render import (
    EFFORT_TEXTS,
    V4_DIALECT,
    Dialect,
    template_segments,
)
from recipe.prompt import Prompt, Segment, Special, Text, encode_prompt
from recipe.tokenizer import Tokenizer, load_tokenizer

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
# Value helpers
# ---------------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    """``value`` as ``str.format`` would insert it (``None`` -> ``"None"``, like the reference)."""
    return value if type(value) is str else format(value)


def _to_json(value: Any) -> str:
    """Python ``json.dumps`` with ``", "``/``": "`` separators, non-ASCII kept (reference ``to_json``)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        try:
            return json.dumps(value, ensure_ascii=True)
        except (TypeError, ValueError) as exc:
            raise ReferenceEncodingError(f"value is not JSON-serialisable: {exc}") from exc


def _require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ReferenceEncodingError(f"{what} must be a string, got {type(value).__name__}")
    return value


def _get(obj: Any, key: str, what: str) -> Any:
    """``obj[key]`` for a mapping, else :class:`ReferenceEncodingError`."""
    if not isinstance(obj, Mapping) or key not in obj:
        raise ReferenceEncodingError(f"{what} has no {key!r}")
    return obj[key]


# ---------------------------------------------------------------------------------------------
# Preprocessing: tool messages -> user content blocks, result order, dropped thinking
# ---------------------------------------------------------------------------------------------


def _merge_tool_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Fold ``tool`` messages (and runs of user messages) into user messages with ``content_blocks``."""
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
            block = {"type": "text", "text": msg.get("content", "")}
            if joinable and last.get("task") is None:
                last["content_blocks"].append(block)
            else:
                new = {"role": "user", "content": msg.get("content", ""), "content_blocks": [block]}
                for key in ("task", "wo_eos", "mask"):
                    if key in msg:
                        new[key] = msg[key]
                merged.append(new)
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
            for pos, call in enumerate(msg["tool_calls"]):
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


def _last_user_index(messages: Sequence[Message]) -> int:
    """Index of the last ``user`` or ``developer`` message, or -1."""
    for idx in range(len(messages) - 1, -1, -1):
        if messages[idx].get("role") in ("user", "developer"):
            return idx
    return -1


_KEEP_ROLES = frozenset({"user", "system", "tool", "latest_reminder", "direct_search_results"})


def _drop_thinking(messages: Sequence[dict[str, Any]], last_user_index: Callable[[Sequence[Message]], int] = _last_user_index) -> list[dict[str, Any]]:
    """Before the last user message (as ``last_user_index`` finds it): strip assistants' reasoning,
    remove developer and other messages not in :data:`_KEEP_ROLES` (V4 and V4.1 reference rule)."""
    last_user = last_user_index(messages)
    out: list[dict[str, Any]] = []
    for idx, msg in enumerate(messages):
        role = msg.get("role")
        if role in _KEEP_ROLES or idx >= last_user:
            out.append(msg)
        elif role == "assistant":
            out.append({k: v for k, v in msg.items() if k != "reasoning_content"})
    return out


def _plan(
    ctx: list[dict[str, Any]],
    msgs: list[dict[str, Any]],
    thinking_mode: str,
    drop_thinking: bool,
    last_user_index: Callable[[Sequence[Message]], int] = _last_user_index,
) -> tuple[list[dict[str, Any]], int, int, bool]:
    """``(full, start, count, effective_drop)``: the merged context + messages with tool results
    ordered and, in thinking mode, reasoning dropped; render ``full[start:start + count]``.

    Reasoning is dropped only when no message declares tools. The reference counts what to render
    as len(dropped full) - len(dropped context), each dropped on its own; the two can disagree
    about the context's tail (kept for parity).
    """
    full = _sort_tool_results(ctx + msgs)
    effective_drop = drop_thinking and not any(m.get("tools") for m in full)
    if thinking_mode == "thinking" and effective_drop:
        full = _drop_thinking(full, last_user_index)
        count = len(full) - len(_drop_thinking(ctx, last_user_index))
        return full, len(full) - count, count, effective_drop
    return full, len(ctx), len(msgs), effective_drop


# ---------------------------------------------------------------------------------------------
# Rendering one message
# ---------------------------------------------------------------------------------------------


def _render_tools_and_format(out: _Out, msg: Message, d: Dialect = V4_DIALECT) -> None:
    """The ``## Tools`` (in ``d``'s DSML spelling) and ``## Response Format`` sections of a
    system/developer message."""
    tools = msg.get("tools")
    if tools:
        out.segs.extend(d.tools_head)
        out.text("\n".join(_to_json(_get(t, "function", "a tool")) for t in tools))
        out.segs.extend(d.tools_tail)
    response_format = msg.get("response_format")
    if response_format:
        out.lit(_RESPONSE_FORMAT_HEAD)
        out.text(_to_json(response_format))


def _render_user_blocks(out: _Out, blocks: Sequence[Any]) -> None:
    """User content blocks joined by blank lines; tool results wrapped in ``<tool_result>``."""
    for i, block in enumerate(blocks):
        if i:
            out.lit("\n\n")
        if not isinstance(block, Mapping):
            raise ReferenceEncodingError("a content block is not a dict")
        kind = block.get("type")
        if kind == "text":
            out.text(_require_str(block.get("text", ""), "user content"))
        elif kind == "tool_result":
            result = block.get("content", "")
            if isinstance(result, list):
                parts = []
                for part in result:
                    if not isinstance(part, Mapping):
                        raise ReferenceEncodingError("a tool result part is not a dict")
                    if part.get("type") == "text":
                        parts.append(_require_str(part.get("text", ""), "tool result text"))
                    else:
                        parts.append(f"[Unsupported {_fmt(part.get('type'))}]")
                result = "\n\n".join(parts)
            out.lit("<tool_result>")
            out.text(_fmt(result))
            out.lit("</tool_result>")
        else:
            out.text(f"[Unsupported {_fmt(kind)}]")


def _params(args: Mapping[Any, Any]) -> list[tuple[str, str, str]]:
    """``(name, "true"|"false", value)`` per argument: strings as they are, other values as JSON."""
    return [(_fmt(k), "true" if isinstance(v, str) else "false", v if isinstance(v, str) else _to_json(v)) for k, v in args.items()]


def _dsml_arguments(raw: Any) -> list[tuple[str, str, str]]:
    """:func:`_params` of the parsed arguments; unparsable arguments become one ``arguments`` string."""
    try:
        args = json.loads(raw)
    except Exception:  # noqa: BLE001 - the reference wraps anything json.loads refuses
        args = {"arguments": raw}
    if not isinstance(args, dict):
        raise ReferenceEncodingError(f"tool call arguments must be a JSON object, got {type(args).__name__}")
    return _params(args)


def _render_tool_calls(
    out: _Out,
    calls: Sequence[Any],
    d: Dialect = V4_DIALECT,
    arguments: Callable[[Any], list[tuple[str, str, str]]] = _dsml_arguments,
) -> None:
    """``\\n\\n<｜DSML｜tool_calls>`` block (tag names as ``d`` spells them) with one ``invoke`` per call;
    an invoke without parameters has a blank line (both reference encoders)."""
    out.lit(f"\n\n<{DSML}{d.calls}>\n")
    for i, call in enumerate(calls):
        fn = _get(call, "function", "a tool call")
        name = _get(fn, "name", "a tool call's function")
        params = arguments(_get(fn, "arguments", "a tool call's function"))
        if i:
            out.lit("\n")
        out.lit(f'<{DSML}{d.invoke} name="')
        out.text(_fmt(name))
        out.lit('">\n')
        for j, (key, is_str, value) in enumerate(params):
            if j:
                out.lit("\n")
            out.lit(f'<{DSML}{d.parameter} name="')
            out.text(key)
            out.lit(f'" string="{is_str}">')
            out.text(value)
            out.lit(f"</{DSML}{d.parameter}>")
        out.lit(f"\n</{DSML}{d.invoke}>")
    out.lit(f"\n</{DSML}{d.calls}>")


def _render_assistant(
    out: _Out,
    index: int,
    messages: Sequence[dict[str, Any]],
    last_user: int,
    thinking: bool,
    drop_thinking: bool,
    emit: Callable[[_Out, Any], None],
    d: Dialect = V4_DIALECT,
    arguments: Callable[[Any], list[tuple[str, str, str]]] = _dsml_arguments,
) -> None:
    """An assistant message: reasoning + ``</think>`` when kept (thinking mode, not after a task,
    after the last user message unless nothing is dropped), content via ``emit``, tool calls, EOS
    unless ``wo_eos``."""
    msg = messages[index]
    prev_has_task = index >= 1 and messages[index - 1].get("task") is not None
    if thinking and not prev_has_task and (not drop_thinking or index > last_user):
        out.text(_fmt(msg.get("reasoning_content") or ""))
        out.special(THINK_END)
    emit(out, msg.get("content") or "")
    calls = msg.get("tool_calls")
    if calls:
        _render_tool_calls(out, calls, d, arguments)
    if not msg.get("wo_eos", False):
        out.special(EOS)


def _render_transition(
    out: _Out,
    index: int,
    messages: Sequence[dict[str, Any]],
    opens_turn: bool,
    thinking: bool,
    open_thinking: bool,
) -> None:
    """After message ``index``, when it is the last or followed by an assistant/reminder turn: its
    task token (``action`` first opens the assistant turn), or, for a message that ``opens_turn``,
    ``<｜Assistant｜>`` + ``<think>`` (``open_thinking``) or ``</think>``."""
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
        out.special(THINK_START if open_thinking else THINK_END)


def _emit_text(out: _Out, value: Any) -> None:
    out.text(_fmt(value))


def _render_message(
    out: _Out,
    index: int,
    messages: Sequence[dict[str, Any]],
    last_user: int,
    thinking: bool,
    drop_thinking: bool,
    reasoning_effort: str | None,
) -> None:
    """Append message ``index`` of ``messages`` and, when due, the transition to the next turn."""
    msg = messages[index]
    role = msg.get("role")
    content = msg.get("content")
    if index == 0 and thinking and reasoning_effort == "max":
        out.lit(_EFFORT_MAX_PREFIX)

    if role == "system":
        out.text(_fmt(content or ""))
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
        out.text(_fmt(content))
    elif role == "assistant":
        _render_assistant(out, index, messages, last_user, thinking, drop_thinking, _emit_text)
    else:
        raise ReferenceEncodingError(f"unknown role: {role!r}")
    open_thinking = thinking and (not drop_thinking or index >= last_user)
    _render_transition(out, index, messages, role in ("user", "developer"), thinking, open_thinking)


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
    full, start, count, effective_drop = _plan(ctx, msgs, thinking_mode, drop_thinking)
    out = _Out()
    if add_default_bos_token and not context:
        out.special(BOS)

    if count > 0:
        if thinking_mode not in _THINKING_MODES:
            raise ReferenceEncodingError(f"invalid thinking_mode {thinking_mode!r}; expected 'chat' or 'thinking'")
        if reasoning_effort not in _EFFORTS:
            raise ReferenceEncodingError(f"invalid reasoning_effort {reasoning_effort!r}; expected None, 'high' or 'max'")
        last_user = _last_user_index(full)
        thinking = thinking_mode == "thinking"
        for index in range(start, start + count):
            _render_message(out, index, full, last_user, thinking, effective_drop, reasoning_effort)
    return Prompt(tuple(out.segs))


def encode_messages(
    messages: Sequence[Message],
    thinking_mode: str,
    context: Sequence[Message] | None = None,
    drop_thinking: bool = True,
    add_default_bos_token: bool = True,
    reasoning_effort: str | None = None,
) -> str:
    """The prompt text of DeepSeek's reference ``encode_messages`` (``encoding_dsv4.py``), byte for byte.

    Arguments and errors as :func:`render_messages`. The text spells special tokens out; to get
    token ids use :func:`encode_messages_to_ids`, never a special-token-aware encode of this text
    (message text may itself contain special-token spellings).
    """
    return render_messages(
        messages,
        thinking_mode,
        context=context,
        drop_thinking=drop_thinking,
        add_default_bos_token=add_default_bos_token,
        reasoning_effort=reasoning_effort,
    ).text


def encode_messages_to_ids(
    messages: Sequence[Message],
    thinking_mode: str,
    *,
    tokenizer: Tokenizer | None = None,
    context: Sequence[Message] | None = None,
    drop_thinking: bool = True,
    add_default_bos_token: bool = True,
    reasoning_effort: str | None = None,
) -> list[int]:
    """Token ids of :func:`encode_messages`'s prompt, safe against special-token spellings in messages.

    Only the template's own special tokens (:data:`REFERENCE_SPECIALS`) become special ids; all
    message-derived text is encoded with ``encode_ordinary``. For messages whose text contains no
    added-token spelling the ids equal HF ``tokenizers``' encoding of the prompt text.

    Args:
        tokenizer: the vocabulary (default: the embedded DeepSeek-V4 ``tokenizer.json``).
        others: as :func:`render_messages`.

    Raises:
        ReferenceEncodingError: as :func:`render_messages`.
        KeyError: ``tokenizer`` lacks one of the template's special tokens.
    """
    prompt = render_messages(
        messages,
        thinking_mode,
        context=context,
        drop_thinking=drop_thinking,
        add_default_bos_token=add_default_bos_token,
        reasoning_effort=reasoning_effort,
    )
    return encode_prompt(tokenizer if tokenizer is not None else load_tokenizer(), prompt)
