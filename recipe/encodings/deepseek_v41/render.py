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
generation prompt) are shared with :mod:`recipe.encodings.deepseek_v4.render`.

Template text is split into Special and Text segments here; message text is Text only, except an
image placeholder at an offset the conversion recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from recipe.conversation import (
    AssistantMessage,
    Conversation,
    ImagePlaceholder,
    ImageSource,
    LatestReminderMessage,
    Message,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
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

__all__ = ["render", "V41_DIALECT", "EFFORT_BUDGETS", "EFFORT_LINE", "JSON_OBJECT_TEXT", "UPDATED_TOOLS_HEAD", "effort_line"]

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
        out.append(Text(effort_line(conv.reasoning_effort)))
    if first is not None:
        out += _content(first.content, first.images, sink)
    if conv.tools:
        out += tools_block([t for t in conv.tools if not t.defer_loading], V41_DIALECT)
    if rf == "json_schema":
        out.append(Text(JSON_SCHEMA_HEAD + dumps_prompt_python(conv.response_format.schema)))
    elif rf == "json_object":
        out.append(Text(JSON_OBJECT_TEXT))
    if first is not None:
        out += _additions(first.tool_additions)
    return out


def _user_group(run: Sequence[Message], call_order: dict[str, int], sink: list[ImageSource]) -> list[Segment]:
    """One user turn: tool results in call order, then every user text (empty ones kept), joined
    by blank lines."""
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


def _body(conv: Conversation, start: int, base: int, starts: list[tuple[int, int]], sink: list[ImageSource]) -> tuple[list[Segment], bool]:
    """Message groups from ``start`` in order; returns (segments, ends_with_prefix)."""
    msgs = conv.messages
    think_history = conv.thinking and bool(conv.tools)
    out: list[Segment] = []
    call_order: dict[str, int] = {}
    i, n = start, len(msgs)
    while i < n:
        m = msgs[i]
        kind = type(m)
        if kind is LatestReminderMessage and i and type(msgs[i - 1]) is LatestReminderMessage:
            i += 1  # deepseek-recipe renders only the first reminder of a run (the reference encoder: each)
            continue
        starts.append((i, base + len(out)))
        if kind is UserMessage or kind is ToolMessage:
            j = i
            while j < n and type(msgs[j]) is ToolMessage:
                j += 1
            while j < n and type(msgs[j]) is UserMessage:
                j += 1
            out += _user_group(msgs[i:j], call_order, sink)
            i = j
            continue
        if kind is SystemMessage:
            out.append(_S_SYSTEM)
            out += _content(m.content, m.images, sink)
            out += _additions(m.tool_additions)
        elif kind is LatestReminderMessage:
            out += (_S_REMINDER, Text(m.content))
        elif kind is AssistantMessage:
            if m.prefix and i == n - 1:
                out += prefix_assistant_segments(m, conv.thinking)
                return out, True
            out += assistant_segments(m, think_history, m.tool_calls, V41_DIALECT)
            if m.tool_calls:
                call_order = {c.id: k for k, c in enumerate(m.tool_calls)}
        i += 1
    return out, False


def render(conv: Conversation) -> Prompt:
    """The DeepSeek-V4.1 prompt of ``conv`` as segments (deepseek-recipe 0.2.0 ``DeepseekV41Encoding``).

    ``prompt.images`` lists the image sources in the order of their image tokens. Never raises for
    a well-formed Conversation (``ValueError`` for image placeholders at wrong offsets).
    """
    sink: list[ImageSource] = []
    msgs = conv.messages
    first = msgs[0] if msgs and type(msgs[0]) is SystemMessage else None
    starts: list[tuple[int, int]] = [(0, 1)] if first is not None else []
    segs: list[Segment] = [_S_BOS]
    segs += _leading(conv, first, sink)
    body, ends_with_prefix = _body(conv, 1 if first is not None else 0, len(segs), starts, sink)
    segs += body
    if not ends_with_prefix:
        segs += generation_prompt(conv, V41_DIALECT)
    return Prompt(tuple(segs), tuple(starts), tuple(sink))
