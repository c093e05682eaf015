"""Conversation -> DeepSeek-V4.1 prompt segments, as deepseek-recipe 0.2.0 renders them (V4.1-Flash).

Layout (reference/deepseek-v41-format.md §2)::

    BOS
    + LEADING SECTION   <｜System｜> + effort line (thinking) + message 0's text if it is a system
                        message + tools block + response-format text + its tool additions;
                        written when message 0 is a system message, tools are rendered, a
                        json_schema / json_object format is set, or thinking is on and there is
                        at least one message
    + message groups    system messages in place (<｜System｜> + text + tool additions);
                        user/tool runs, assistants, reminders as on V4 with V4.1's differences
    + GENERATION PROMPT as on V4, the forced block opened in V4.1's spelling

Differences from V4 kept here, each in one place: the dialect (:data:`V41_DIALECT`: spaced DSML
spelling, blank line in an empty invoke, Python's float format in prompt JSON),
history tool calls and tool results in request order, empty user texts kept in a joined run, the
numeric effort line (:data:`EFFORT_BUDGETS`), V4.1's json_object text, deferred tools left out of
the tools block, only the first of consecutive ``latest_reminder`` messages rendered (observed;
DeepSeek's reference encoder renders each), and image placeholders (:class:`~recipe.conversation.ImagePlaceholder`) as the
image special token. The V4 building blocks (assistant turns, invokes, prefix continuation,
generation prompt) are shared with :mod:`recipe.encodings.deepseek_v4.render`; a prefix assistant
that is the conversation's first message is continued as with thinking off (``<｜Assistant｜></think>``
+ content, its reasoning not shown; observed on deepseek-recipe 0.2.0's V4.1 path, where V4 opens
``<think>``), and :func:`parsing` starts its output in the answer accordingly.

Template text is split into Special and Text segments here; message text is Text only, except an
image placeholder at an offset the conversion recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from recipe.conversation import (
    AssistantMessage,
    Conversation,
    ImagePlaceholder,
    ImageSource,
    LatestReminderMessage,
    Message,
    ParsingOptions,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from recipe.encodings.base import Checkpoint, ResumableRender
from recipe.encodings.deepseek_v4.constants import BOS, LATEST_REMINDER, USER
from recipe.encodings.deepseek_v4.render import (
    JSON_SCHEMA_HEAD,
    assistant_segments,
    dialect,
    generation_prompt,
    prefix_assistant_segments,
    tool_line,
    tools_block,
)
from recipe.encodings.deepseek_v41.constants import IMAGE, SYSTEM
from recipe.jsonfmt import dumps_prompt_python
from recipe.prompt import Prompt, Segment, Special, Text

__all__ = ["render", "parsing", "render_resumable", "render_context", "RESUMABLE", "V41_DIALECT", "EFFORT_BUDGETS", "EFFORT_LINE", "JSON_OBJECT_TEXT", "UPDATED_TOOLS_HEAD", "effort_line"]

#: V4.1's dialect: tag names with a leading space, a blank line in an invoke without parameters,
#: Python's float format in prompt JSON (``1e-05``, where V4 prints ``0.00001``).
V41_DIALECT = dialect(" calls", " invoke", " parameter", blank_empty_invoke=True, dumps=dumps_prompt_python)

#: Effective effort -> the number on the effort line (deepseek-recipe: minimal/low 50,
#: medium/high/xhigh/unspecified 75, max/ultra 100; the official encoder's low/high/max tiers).
EFFORT_BUDGETS: dict[str | None, int] = {None: 75, "low": 50, "high": 75, "xhigh": 75, "max": 100}
EFFORT_LINE = "Reasoning Effort: {budget} (range 1-100, the higher the value, the more thorough the reasoning)\n\n"
JSON_OBJECT_TEXT = JSON_SCHEMA_HEAD + '{"type": "json_object"}'
UPDATED_TOOLS_HEAD = "\n\n### Updated Tool Schemas\n\n"

_S_BOS, _S_USER, _S_SYSTEM, _S_IMAGE, _S_REMINDER = (
    Special(BOS), Special(USER), Special(SYSTEM), Special(IMAGE), Special(LATEST_REMINDER))


def effort_line(effort: str | None) -> str:
    """The effort line for an effective effort (``low`` | ``high`` | ``xhigh`` | ``max`` | None)."""
    return EFFORT_LINE.format(budget=EFFORT_BUDGETS.get(effort, 75))


#: Effective effort -> its effort line as a segment (built once).
_EFFORT_SEGMENTS: dict[str | None, Text] = {effort: Text(effort_line(effort)) for effort in EFFORT_BUDGETS}


def _content(text: str, images: Sequence[ImagePlaceholder], sink: list[ImageSource]) -> list[Segment]:
    """Message text as segments: the image token at each placeholder offset, text elsewhere.

    Raises:
        ValueError: a placeholder offset that does not point at the image-token spelling (a
            Conversation built by hand with wrong offsets).
    """
    if not images:
        return [Text(text)]
    out: list[Segment] = []
    pos = 0
    for ph in images:
        if ph.offset < pos or not text.startswith(IMAGE, ph.offset):
            raise ValueError(f"image placeholder offset {ph.offset} does not point at {IMAGE!r} in the message text")
        if ph.offset > pos:
            out.append(Text(text[pos:ph.offset]))
        out.append(_S_IMAGE)
        sink.append(ph.source)
        pos = ph.offset + len(IMAGE)
    if pos < len(text):
        out.append(Text(text[pos:]))
    return out


def _additions(tools: Sequence[ToolDefinition]) -> list[Segment]:
    if not tools:
        return []
    return [Text(UPDATED_TOOLS_HEAD + "\n".join(tool_line(t, dumps_prompt_python) for t in tools))]


def _leading(conv: Conversation, first: SystemMessage | None, sink: list[ImageSource]) -> list[Segment]:
    rf = conv.response_format.type
    # the section belongs to message 0 (an empty system one is inserted for tools or a format):
    # thinking alone writes it only when there is a message
    if first is None and not conv.tools and rf not in ("json_schema", "json_object") and not (conv.thinking and conv.messages):
        return []
    out: list[Segment] = [_S_SYSTEM]
    if conv.thinking:
        effort = conv.reasoning_effort
        out.append(_EFFORT_SEGMENTS[effort] if effort in _EFFORT_SEGMENTS else Text(effort_line(effort)))
    if first is not None:
        out += _content(first.content, first.images, sink)
    if conv.tools:
        out += tools_block([t for t in conv.tools if not t.defer_loading], V41_DIALECT)
    if rf == "json_schema":
        out.append(Text(JSON_SCHEMA_HEAD + dumps_prompt_python(conv.response_format.schema)))
    elif rf == "json_object":
        out.append(Text(JSON_OBJECT_TEXT))
    if first is not None and first.tool_additions:
        out += _additions(first.tool_additions)
    return out


def _user_group(run: Sequence[Message], call_order: Mapping[str, int], sink: list[ImageSource]) -> list[Segment]:
    """One user turn: tool results in call order, then every user text (empty ones kept), joined
    by blank lines."""
    if len(run) == 1 and type(run[0]) is UserMessage:  # the common turn: one user message
        return [_S_USER, *_content(run[0].content, run[0].images, sink)]
    tools = [m for m in run if type(m) is ToolMessage]
    tools.sort(key=lambda m: call_order.get(m.tool_call_id, len(call_order)))
    out: list[Segment] = [_S_USER]
    first = True
    for m in tools:
        out.append(Text("<tool_result>" if first else "\n\n<tool_result>"))
        out += _content(m.content, m.images, sink)
        out.append(Text("</tool_result>"))
        first = False
    for m in run:
        if type(m) is UserMessage:
            if not first:
                out.append(Text("\n\n"))
            out += _content(m.content, m.images, sink)
            first = False
    return out


_EMPTY_ORDER: Mapping[str, int] = MappingProxyType({})


def _body(
    conv: Conversation,
    i: int,
    call_order: Mapping[str, int],
    segs: list[Segment],
    starts: list[tuple[int, int]],
    sink: list[ImageSource],
    checkpoints: list[Checkpoint] | None,
) -> bool:
    """Message groups from ``conv.messages[i]`` on, appended to ``segs`` (each group's ``(message
    index, segment index)`` to ``starts``, image sources to ``sink``); returns whether the prompt
    ends with a prefix assistant. ``call_order``: the result order set by the last assistant turn
    with tool calls before ``i``. A checkpoint follows every assistant turn that is not a prefix
    (state: the call order and the number of images so far)."""
    msgs = conv.messages
    think_history = conv.thinking and bool(conv.tools)
    n = len(msgs)
    while i < n:
        m = msgs[i]
        kind = type(m)
        if kind is LatestReminderMessage and i and type(msgs[i - 1]) is LatestReminderMessage:
            i += 1  # deepseek-recipe renders only the first reminder of a run (the reference encoder: each)
            continue
        starts.append((i, len(segs)))
        if kind is UserMessage or kind is ToolMessage:
            j = i
            while j < n and type(msgs[j]) is ToolMessage:
                j += 1
            while j < n and type(msgs[j]) is UserMessage:
                j += 1
            segs += _user_group(msgs[i:j], call_order, sink)
            i = j
            continue
        if kind is SystemMessage:
            segs.append(_S_SYSTEM)
            segs += _content(m.content, m.images, sink)
            if m.tool_additions:
                segs += _additions(m.tool_additions)
        elif kind is LatestReminderMessage:
            segs += (_S_REMINDER, Text(m.content))
        elif kind is AssistantMessage:
            if m.prefix and i == n - 1:  # a prefix that is the first message continues without thinking
                segs += prefix_assistant_segments(m, conv.thinking and i > 0)  # (observed, see parsing())
                return True
            segs += assistant_segments(m, think_history, m.tool_calls, V41_DIALECT)
            if m.tool_calls:
                call_order = {c.id: k for k, c in enumerate(m.tool_calls)}
            if checkpoints is not None and not m.prefix:
                checkpoints.append(Checkpoint(i + 1, len(segs), len(starts), (call_order, len(sink))))
        i += 1
    return False


def _render(conv: Conversation, resume: tuple[Prompt, Checkpoint] | None, checkpoints: list[Checkpoint] | None) -> Prompt:
    msgs = conv.messages
    first = msgs[0] if msgs and type(msgs[0]) is SystemMessage else None
    starts: list[tuple[int, int]] = [(0, 1)] if first is not None else []
    if resume is None:
        sink: list[ImageSource] = []
        segs: list[Segment] = [_S_BOS]
        segs += _leading(conv, first, sink)
        ends_with_prefix = _body(conv, 1 if first is not None else 0, _EMPTY_ORDER, segs, starts, sink, checkpoints)
    else:
        prompt, cp = resume
        call_order, n_images = cp.state
        sink = list(prompt.images[:n_images])
        segs = list(prompt.segments[: cp.segments])
        starts += prompt.message_starts[len(starts) : cp.starts]
        ends_with_prefix = _body(conv, cp.messages, call_order, segs, starts, sink, checkpoints)
    if not ends_with_prefix:
        segs += generation_prompt(conv, V41_DIALECT)
    return Prompt(tuple(segs), tuple(starts), tuple(sink))


def render(conv: Conversation) -> Prompt:
    """The DeepSeek-V4.1 prompt of ``conv`` as segments (deepseek-recipe 0.2.0 ``DeepseekV41Encoding``).

    ``prompt.images`` lists the image sources in the order of their image tokens. Never raises for
    a well-formed Conversation (``ValueError`` for image placeholders at wrong offsets).
    """
    return _render(conv, None, None)


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """The output's start as the V4.1 prompt leaves it: a prefix assistant that is the first message is
    rendered with ``</think>`` (see :func:`render`), so its continuation is the answer
    (``content_continuation``) even with thinking on. deepseek-recipe 0.2.0 renders that prompt but
    still parses the output as reasoning continued (its ``thinking_stage`` contradicts its prompt;
    docs/streaming.md, deviation 22); every other request keeps ``default``."""
    msgs = conv.messages
    if conv.thinking and len(msgs) == 1 and type(msgs[0]) is AssistantMessage and msgs[0].prefix:
        return replace(default, thinking_stage="content_continuation")
    return default


def render_context(conv: Conversation) -> tuple[Any, ...]:
    """What the rendering of a message prefix reads besides those messages: thinking, effort, tools
    (deferred ones included: the tools block leaves them out) and the response format, all in the
    leading section or the history's reasoning rule. System messages stay in place on V4.1, so they
    are part of the messages compared; the tool choice only shapes the generation prompt."""
    return (conv.thinking, conv.reasoning_effort, conv.tools, conv.response_format)


def render_boundaries(conv: Conversation) -> list[int]:
    """Message counts where :func:`render_resumable` may place a checkpoint: after each assistant
    turn that is not a prefix (what follows starts with a special token and never changes it)."""
    return [k + 1 for k, m in enumerate(conv.messages) if type(m) is AssistantMessage and not m.prefix]


def render_resumable(
    conv: Conversation, resume: tuple[Prompt, Checkpoint] | None = None
) -> tuple[Prompt, tuple[Checkpoint, ...]]:
    """:func:`render` with checkpoints (after each assistant turn), optionally resumed from an earlier
    prompt's checkpoint (contract: :class:`~recipe.encodings.base.ResumableRender`)."""
    checkpoints: list[Checkpoint] = []
    prompt = _render(conv, resume, checkpoints)
    return prompt, tuple(checkpoints)


#: The V4.1 renderer as the prompt cache uses it.
RESUMABLE = ResumableRender(context=render_context, boundaries=render_boundaries, render=render_resumable)
