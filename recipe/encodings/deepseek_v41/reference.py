"""DeepSeek-V4.1 prompts from the reference encoder's message dicts, as text or as safe token ids.

Semantics: DeepSeek's reference encoder released with DeepSeek-V4.1 (``encoding/encoding.py`` of
the checkpoint; sglang ships an adaptation as ``encoding_dsv41.py``), function ``encode_messages``.
Message dicts as for V4 (:mod:`recipe.encodings.deepseek_v4.reference`), with V4.1's rules:

* roles ``system`` | ``user`` | ``assistant`` | ``tool`` | ``latest_reminder``; a system message
  after the first is rendered in place as ``<｜System｜>`` + text and, like a user message, opens the
  next assistant turn (it counts as the last user message for dropped reasoning);
* the first message is preceded by ``<｜System｜>`` when it is a system message or in thinking mode,
  which then starts with ``Reasoning Effort: N (range 1-100, …)``: ``reasoning_effort`` is
  ``"low"`` (50), ``"high"`` (75, the default) or ``"max"`` (100), or an int in [1, 100];
* DSML with spaced tag names (`` calls``, `` invoke``, `` parameter``); parameters one per line, an
  invoke without any has a blank line; arguments that are a JSON string (even double-encoded) are
  parsed, anything that is not an object becomes one ``arguments`` string parameter;
* content may be a list of content blocks: ``image`` / ``image_url`` blocks become the image
  placeholder (a special token, default ``<｜deepseek_image｜>``) and are returned in order with
  ``return_multi_modal_data``; the placeholder spelled in message text or reasoning is an error.

Differences from deepseek-recipe's V4.1 API path (:mod:`.render`), each the official encoder's:
reasoning of assistant turns after the last user message is kept; double-encoded arguments are
unwrapped; every ``latest_reminder`` is rendered; the image placeholder is ``<｜deepseek_image｜>``
(deepseek-recipe: ``<｜image｜>``); the effort names are the encoder's (``low`` / ``high`` / ``max``
or a number; deepseek-recipe maps API levels onto them). sglang's adaptation (index version
``0e43c224``) differs from the release: a stale effort table (low 25 / high 50 / xhigh 75 / max
100), a ``developer`` role, and strict arguments; this module follows the release.

As for V4: inputs the reference rejects raise :class:`ReferenceEncodingError` (a ``ValueError``);
the caller's dicts are never mutated; only template special tokens become special ids.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from recipe.encodings.deepseek_v4.constants import (
    BOS,
    LATEST_REMINDER,
    TASK_TOKENS,
    TEMPLATE_SPECIALS,
    USER,
)

# shared with the V4 reference encoder: segment accumulator, merged tool messages, tool-result
# order, dropped reasoning, the tools section, user blocks, assistant turns and turn transitions
from recipe.encodings.deepseek_v4.reference import (
    IMAGE_BLOCK,
    ReferenceEncodingError,
    Turns,
    _merge_tool_messages,
    _Out,
    _plan,
    _render_assistant,
    _render_tools_and_format,
    _render_transition,
    _render_user_blocks,
    _require_str,
)
from recipe.encodings.deepseek_v41.constants import REFERENCE_IMAGE, SYSTEM
from recipe.encodings.deepseek_v41.render import EFFORT_LINE, V41_DIALECT
from recipe.encodings.dsml_reference import CallSyntax, Param, fmt, ids_of, params
from recipe.prompt import Prompt
from recipe.tokenizer import load_tokenizer

__all__ = [
    "ReferenceEncodingError",
    "EFFORT_BUDGETS",
    "REFERENCE_SPECIALS",
    "render_messages",
    "encode_messages",
    "encode_messages_to_ids",
]

Message = Mapping[str, Any]

#: Effort names of the release encoder -> the number on the effort line (default ``high``).
EFFORT_BUDGETS = {"low": 50, "high": 75, "max": 100}

#: Spellings the reference template emits as special tokens (plus the image placeholder chosen).
REFERENCE_SPECIALS: frozenset[str] = frozenset(TEMPLATE_SPECIALS) | frozenset(TASK_TOKENS.values()) | {SYSTEM}

_IMAGE = object()  # an image placeholder inside :class:`_Mixed` text


class _Mixed(tuple):  # type: ignore[type-arg]
    """Message text joined from content blocks: ``str`` pieces and :data:`_IMAGE` markers."""


def _emit(out: _Out, value: Any, placeholder: str) -> None:
    """Message-derived text (or :class:`_Mixed` text with image placeholders as special tokens)."""
    if type(value) is _Mixed:
        for piece in value:
            if piece is _IMAGE:
                out.special(placeholder)
            else:
                out.text(piece)
    else:
        out.text(fmt(value))


# ---------------------------------------------------------------------------------------------
# Preprocessing: images, tool messages, dropped thinking
# ---------------------------------------------------------------------------------------------


def _image_record(block: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"type": "image"}
    if block.get("type") == "image_url":
        image_url = block.get("image_url")
        if isinstance(image_url, str):
            record["url"] = image_url
        else:
            record["url"] = image_url.get("url", "") if isinstance(image_url, Mapping) else ""
    else:
        for key in ("source", "url", "data"):
            if key in block:
                record[key] = copy.deepcopy(block[key])
    if not any(record.get(key) for key in ("source", "url", "data")):
        raise ReferenceEncodingError("Image block does not contain a valid source")
    return record


def _image_blocks(blocks: Sequence[Any], placeholder: str, images: list[dict[str, Any]]) -> list[Any]:
    """Image blocks -> placeholder blocks (records appended to ``images``), recursing into tool results."""
    out: list[Any] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            out.append(block)
        elif block.get("type") in ("image", "image_url"):
            images.append(_image_record(block))
            out.append({"type": IMAGE_BLOCK})
        elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            out.append({**block, "content": _image_blocks(block["content"], placeholder, images)})
        elif block.get("type") == "text" and placeholder in (block.get("text") or ""):
            raise ReferenceEncodingError(f"Text block contains image placeholder {placeholder!r}; images should be separate content blocks")
        else:
            out.append(block)
    return out


def _process_images(messages: Sequence[Message], placeholder: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Copies of ``messages`` with list content as content blocks and images as placeholders, and
    the image records in order."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise ReferenceEncodingError(f"message {i} is not a dict")
        msg = dict(msg)
        for key in ("content", "reasoning_content"):
            if isinstance(msg.get(key), str) and placeholder in msg[key]:
                raise ReferenceEncodingError(f"{key} of message {i} contains the image placeholder {placeholder!r}")
        if isinstance(msg.get("content"), list) and "content_blocks" not in msg:
            msg["content_blocks"] = msg.pop("content")
        if msg.get("content_blocks"):
            msg["content_blocks"] = _image_blocks(msg["content_blocks"], placeholder, images)
            if not isinstance(msg.get("content"), str):
                # the text blocks (and image placeholders) joined by blank lines
                pieces: list[Any] = []
                for b in msg["content_blocks"]:
                    if isinstance(b, Mapping) and b.get("type") in ("text", IMAGE_BLOCK):
                        if pieces:
                            pieces.append("\n\n")
                        pieces.append(_IMAGE if b["type"] == IMAGE_BLOCK else _require_str(b.get("text", ""), "text block"))
                msg["content"] = _Mixed(pieces)
        out.append(msg)
    return out, images


def _user_turn(msg: Mapping[str, Any]) -> dict[str, Any]:
    """A user message as a merged user turn: all its keys, its content blocks (or its content as one
    text block)."""
    blocks = msg.get("content_blocks")
    return {**msg, "content_blocks": list(blocks) if blocks is not None else [{"type": "text", "text": msg.get("content", "")}]}


def _last_user_index(messages: Sequence[Message]) -> int:
    """Index of the last ``user`` message or system message after the first, or -1."""
    for idx in range(len(messages) - 1, -1, -1):
        role = messages[idx].get("role")
        if role == "user" or (role == "system" and idx > 0):
            return idx
    return -1


# ---------------------------------------------------------------------------------------------
# Rendering one message
# ---------------------------------------------------------------------------------------------


def _effort_line(effort: Any) -> str:
    if effort is None:
        effort = "high"
    if not ((type(effort) is int and 1 <= effort <= 100) or (isinstance(effort, str) and effort in EFFORT_BUDGETS)):
        raise ReferenceEncodingError(f"invalid reasoning_effort {effort!r}; expected an int in [1, 100] or one of {list(EFFORT_BUDGETS)}")
    return EFFORT_LINE.format(budget=EFFORT_BUDGETS[effort] if isinstance(effort, str) else effort)


def _tool_result(out: _Out, result: Any, placeholder: str) -> None:
    """A tool result's content: its text (and image placeholders), or its parts one by one, joined
    by blank lines."""
    if type(result) is _Mixed:
        _emit(out, result, placeholder)
    elif isinstance(result, list):
        for j, part in enumerate(result):
            if j:
                out.lit("\n\n")
            if not isinstance(part, Mapping):
                raise ReferenceEncodingError("a tool result part is not a dict")
            if part.get("type") == "text":
                out.text(_require_str(part.get("text", ""), "tool result text"))
            elif part.get("type") == IMAGE_BLOCK:
                out.special(placeholder)
            else:
                out.text(f"[Unsupported {fmt(part.get('type'))}]")
    else:
        out.text(fmt(result))


def _arguments(raw: Any) -> list[Param]:
    """``(name, "true"|"false", value)`` per argument: a dict as is, a JSON string (even encoded
    twice) parsed; anything else is one ``arguments`` parameter holding the raw value."""
    args = raw
    for _ in range(2):
        if isinstance(args, dict) or not isinstance(args, str):
            break
        try:
            args = json.loads(args)
        except Exception:  # noqa: BLE001 - the reference keeps what json.loads refuses
            break
    return params(args if isinstance(args, dict) else {"arguments": raw}, ReferenceEncodingError)


#: V4.1's tool calls: its spaced tag names, arguments read as above.
V41_CALLS = CallSyntax(V41_DIALECT.calls, V41_DIALECT.invoke, V41_DIALECT.parameter, _arguments)


def _render_message(out: _Out, index: int, turns: Turns, effort: Any, placeholder: str) -> None:
    msg = turns.messages[index]
    role = msg.get("role")
    content = msg.get("content")
    effort_text = _effort_line(effort) if index == 0 and turns.thinking else ""
    if index == 0 and (effort_text or role == "system"):
        out.special(SYSTEM)
    out.lit(effort_text)

    if role == "system":
        if index > 0:
            out.special(SYSTEM)
        _emit(out, content or "", placeholder)
        _render_tools_and_format(out, msg, V41_DIALECT)
    elif role == "user":
        out.special(USER)
        blocks = msg.get("content_blocks")
        if blocks:
            _render_user_blocks(out, blocks, functools.partial(_tool_result, placeholder=placeholder), placeholder)
        else:
            out.text(_require_str(content or "", "user content"))
    elif role == "latest_reminder":
        out.special(LATEST_REMINDER)
        _emit(out, content, placeholder)
    elif role == "assistant":
        emit = functools.partial(_emit, placeholder=placeholder)
        _render_assistant(out, index, turns, emit, V41_CALLS)
    else:
        raise ReferenceEncodingError(f"unknown role: {role!r}")
    _render_transition(out, index, turns, role == "user" or (role == "system" and index > 0))


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def _render(messages: Sequence[Message], thinking_mode: str, context: Sequence[Message] | None, drop_thinking: bool,
            add_default_bos_token: bool, reasoning_effort: Any, placeholder: str) -> tuple[Prompt, list[dict[str, Any]]]:
    ctx, _ = _process_images(context, placeholder) if context else ([], [])
    msgs, images = _process_images(messages, placeholder)
    ctx, msgs = _merge_tool_messages(ctx, _user_turn), _merge_tool_messages(msgs, _user_turn)
    turns = _plan(ctx, msgs, thinking_mode, drop_thinking, _last_user_index)
    out = _Out()
    if add_default_bos_token and not context:
        out.special(BOS)
    if turns.count > 0:
        if thinking_mode not in ("chat", "thinking"):
            raise ReferenceEncodingError(f"invalid thinking_mode {thinking_mode!r}; expected 'chat' or 'thinking'")
        _effort_line(reasoning_effort)  # validated even when not rendered, as the reference does
        for index in range(turns.start, turns.start + turns.count):
            _render_message(out, index, turns, reasoning_effort, placeholder)
    return Prompt(tuple(out.segs)), images


def render_messages(
    messages: Sequence[Message],
    thinking_mode: str,
    context: Sequence[Message] | None = None,
    drop_thinking: bool = True,
    add_default_bos_token: bool = True,
    reasoning_effort: str | int | None = None,
    *,
    image_placeholder: str = REFERENCE_IMAGE,
) -> Prompt:
    """The V4.1 reference encoder's prompt as segments: template specials vs. plain text.

    Args:
        messages, thinking_mode, context, drop_thinking, add_default_bos_token: as the V4
            :func:`recipe.encodings.deepseek_v4.reference.render_messages`.
        reasoning_effort: None (``high``), ``"low"``, ``"high"``, ``"max"`` or an int in [1, 100].
        image_placeholder: the image token's spelling (special in the prompt).

    Raises:
        ReferenceEncodingError: invalid mode / effort / role / task, malformed tool call, an image
            block without a source, the image placeholder in message text.
    """
    return _render(messages, thinking_mode, context, drop_thinking, add_default_bos_token, reasoning_effort, image_placeholder)[0]


def encode_messages(
    messages: Sequence[Message],
    thinking_mode: str,
    context: Sequence[Message] | None = None,
    drop_thinking: bool = True,
    add_default_bos_token: bool = True,
    reasoning_effort: str | int | None = None,
    return_multi_modal_data: bool = False,
    *,
    image_placeholder: str = REFERENCE_IMAGE,
) -> Any:
    """The prompt text of DeepSeek's V4.1 reference ``encode_messages``; with
    ``return_multi_modal_data`` the pair ``(prompt, {"images": [records in prompt order]})``.

    Arguments and errors as :func:`render_messages`. For token ids use :func:`encode_messages_to_ids`.
    """
    prompt, images = _render(messages, thinking_mode, context, drop_thinking, add_default_bos_token, reasoning_effort, image_placeholder)
    return (prompt.text, {"images": images}) if return_multi_modal_data else prompt.text


encode_messages_to_ids = ids_of(render_messages, load_tokenizer, """Token ids of :func:`encode_messages`'s
prompt: template specials (:data:`REFERENCE_SPECIALS`, the image placeholder) by id, all message text
with ``encode_ordinary``.

Args:
    tokenizer: a DeepSeek-V4.1 vocabulary (default: the embedded DeepSeek-V4 one, which lacks
        ``<｜System｜>`` and the image token).
    others: as :func:`render_messages`.

Raises:
    ReferenceEncodingError: as :func:`render_messages`.
    MissingSpecialTokenError: the vocabulary lacks a special token the prompt uses.
""")
