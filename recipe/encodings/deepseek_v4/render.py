"""Conversation -> DeepSeek-V4 prompt segments, as deepseek-recipe 0.2.0 renders them (Pro / Flash).

Layout (deepseek-recipe behaviour map §1.2)::

    BOS + EFFORT_TEXT (thinking only) + SYSTEM_SECTION + message groups + GENERATION_PROMPT

Template text is split into :class:`~recipe.prompt.Special` and :class:`~recipe.prompt.Text`
segments here, once; everything taken from the conversation (system text, user text, reasoning,
tool names, arguments, results, schemas) becomes ``Text`` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from recipe.conversation import (
    AssistantMessage,
    Conversation,
    LatestReminderMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from recipe.encodings.deepseek_v4.constants import (
    ASSISTANT,
    BOS,
    DSML,
    EOS,
    LATEST_REMINDER,
    THINK_END,
    THINK_START,
    USER,
)
from recipe.jsonfmt import dumps_prompt, parse_json_value
from recipe.prompt import Prompt, Segment, Special, Text

__all__ = ["render", "template_segments", "EFFORT_TEXTS", "TOOLS_TEMPLATE"]

_TEMPLATE_SPECIAL_RE = re.compile("(" + "|".join(map(re.escape, (DSML, THINK_START, THINK_END))) + ")")


def template_segments(text: str) -> tuple[Segment, ...]:
    """Split fixed template text at ``｜DSML｜``, ``<think>``, ``</think>`` into special/text segments.

    Only for text the template itself owns (never for message text).
    """
    out: list[Segment] = []
    for i, part in enumerate(_TEMPLATE_SPECIAL_RE.split(text)):
        if part:
            out.append(Special(part) if i % 2 else Text(part))
    return tuple(out)


_EFFORT_HIGH = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"
)
_EFFORT_MAX = (
    "Reasoning Effort: Beyond maximum \u2014 exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose "
    "the problem into its most fundamental components, trace every causal chain to its root, and resolve the "
    "underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are certain "
    "that no assumption remains unchecked and no error remains undiscovered.\n\n"
)

#: Effort text printed right after BOS in thinking mode, by effective effort (behaviour map §1.2.3).
EFFORT_TEXTS: dict[str | None, str] = {
    None: _EFFORT_HIGH,
    "low": "",
    "high": _EFFORT_HIGH,
    "xhigh": _EFFORT_HIGH,
    "max": _EFFORT_MAX,
}

#: The tools block around the tool lines (reference encoder ``render_tools``), split at ``{TOOL_LINES}``.
TOOLS_TEMPLATE = (
    "\n\n## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools "
    'by writing a "<｜DSML｜tool_calls>" block like the following:\n\n<｜DSML｜tool_calls>\n'
    '<｜DSML｜invoke name="$TOOL_NAME">\n'
    '<｜DSML｜parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</｜DSML｜parameter>\n'
    '...\n</｜DSML｜invoke>\n<｜DSML｜invoke name="$TOOL_NAME2">\n...\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n\n'
    'String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, '
    'arrays, objects), pass the value in JSON format and set `string="false"`.\n\n'
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n{TOOL_LINES}\n\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"
)
_TOOLS_HEAD, _TOOLS_TAIL = (template_segments(p) for p in TOOLS_TEMPLATE.split("{TOOL_LINES}"))

_JSON_SCHEMA_HEAD = "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
_JSON_OBJECT_TEXT = (
    "\n\nYou are a helpful assistant designed to output JSON.\n## Response Format:\n\nReply with JSON object ONLY."
)

_S_BOS, _S_EOS, _S_USER, _S_ASSISTANT = Special(BOS), Special(EOS), Special(USER), Special(ASSISTANT)
_S_THINK, _S_THINK_END, _S_DSML, _S_REMINDER = Special(THINK_START), Special(THINK_END), Special(DSML), Special(LATEST_REMINDER)
_CALLS_OPEN = (Text("\n\n<"), _S_DSML, Text("tool_calls>\n"))
_CALLS_CLOSE = (Text("\n</"), _S_DSML, Text("tool_calls>"))
_FORCED_CALLS_OPEN = (Text("\n\n<"), _S_DSML, Text("tool_calls>\n"))


def tool_line(tool: ToolDefinition) -> str:
    """One line of the tools block: ``{"name": …, "description": …, "parameters": …}`` (prompt JSON)."""
    return dumps_prompt(
        {"name": tool.name, "description": tool.description or "", "parameters": tool.parameters}
    )


def _system_section(conv: Conversation) -> list[Segment]:
    texts = [m.content for m in conv.messages if type(m) is SystemMessage and m.content]
    out: list[Segment] = [Text("\n\n".join(texts))] if texts else []
    if conv.tools:
        out += _TOOLS_HEAD
        out.append(Text("\n".join(tool_line(t) for t in conv.tools)))
        out += _TOOLS_TAIL
    rf = conv.response_format
    if rf.type == "json_schema":
        out.append(Text(_JSON_SCHEMA_HEAD + dumps_prompt(rf.schema)))
    elif rf.type == "json_object":
        out.append(Text(_JSON_OBJECT_TEXT))
    return out


def _param(name: str, is_string: bool, value: str) -> tuple[Segment, ...]:
    flag = "true" if is_string else "false"
    return (Text("<"), _S_DSML, Text(f'parameter name="{name}" string="{flag}">{value}</'), _S_DSML, Text("parameter>\n"))


def _invoke(call: ToolCall) -> list[Segment]:
    """One ``invoke`` of a history tool call; arguments that are not a JSON object become one
    ``arguments`` string parameter holding the raw text (behaviour map §1.2.5)."""
    out: list[Segment] = [Text("<"), _S_DSML, Text(f'invoke name="{call.name}">\n')]
    try:
        args = parse_json_value(call.arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        for key, value in args.items():
            is_string = isinstance(value, str)
            out += _param(key, is_string, value if is_string else dumps_prompt(value))
    else:
        out += _param("arguments", True, call.arguments)
    out += (Text("</"), _S_DSML, Text("invoke>"))
    return out


def _tool_calls(calls: Sequence[ToolCall]) -> list[Segment]:
    out: list[Segment] = list(_CALLS_OPEN)
    for i, call in enumerate(sorted(calls, key=lambda c: c.id)):
        if i:
            out.append(Text("\n"))
        out += _invoke(call)
    out += _CALLS_CLOSE
    return out


def _user_group(run: Sequence[Message], call_order: dict[str, int]) -> list[Segment]:
    tools = [m for m in run if type(m) is ToolMessage]
    tools.sort(key=lambda m: call_order.get(m.tool_call_id, len(call_order)))
    parts = [f"<tool_result>{m.content}</tool_result>" for m in tools]
    users = [m.content for m in run if type(m) is UserMessage]
    if users:
        parts.append("\n\n".join(u for u in users if u))
    return [_S_USER, Text("\n\n".join(parts))]


def _assistant(msg: AssistantMessage, think_history: bool) -> list[Segment]:
    out: list[Segment] = [_S_ASSISTANT]
    if think_history:
        out += (_S_THINK, Text(msg.reasoning_content or ""), _S_THINK_END)
    else:
        out.append(_S_THINK_END)
    out.append(Text(msg.content or ""))
    if msg.tool_calls:
        out += _tool_calls(msg.tool_calls)
    out.append(_S_EOS)
    return out


def _prefix_assistant(msg: AssistantMessage, thinking: bool) -> list[Segment]:
    if not thinking:
        return [_S_ASSISTANT, _S_THINK_END, Text(msg.content or "")]
    out: list[Segment] = [_S_ASSISTANT, _S_THINK, Text(msg.reasoning_content or "")]
    if msg.content:
        out += (_S_THINK_END, Text(msg.content))
    return out


def _body(conv: Conversation, base: int, starts: list[tuple[int, int]]) -> tuple[list[Segment], bool]:
    """Message groups in order; returns (segments, ends_with_prefix). Appends each group's
    (message index, segment index) to ``starts``, segment indices offset by ``base``."""
    indexed = [(k, m) for k, m in enumerate(conv.messages) if type(m) is not SystemMessage]
    msgs = [m for _, m in indexed]
    think_history = conv.thinking and bool(conv.tools)
    out: list[Segment] = []
    call_order: dict[str, int] = {}
    i, n = 0, len(msgs)
    while i < n:
        m = msgs[i]
        kind = type(m)
        starts.append((indexed[i][0], base + len(out)))
        if kind is UserMessage or kind is ToolMessage:
            # one user turn = tool results, then user texts; a tool result after a user text opens
            # a new turn (reachable through Responses outputs without a call id)
            j = i
            while j < n and type(msgs[j]) is ToolMessage:
                j += 1
            while j < n and type(msgs[j]) is UserMessage:
                j += 1
            out += _user_group(msgs[i:j], call_order)
            i = j
            continue
        if kind is LatestReminderMessage:
            out += (_S_REMINDER, Text(m.content))
        elif kind is AssistantMessage:
            if m.prefix and i == n - 1:
                out += _prefix_assistant(m, conv.thinking)
                return out, True
            out += _assistant(m, think_history)
            if m.tool_calls:
                call_order = {c.id: k for k, c in enumerate(sorted(m.tool_calls, key=lambda c: c.id))}
        i += 1
    return out, False


def render(conv: Conversation) -> Prompt:
    """The DeepSeek-V4 prompt of ``conv`` as segments (deepseek-recipe 0.2.0 ``render_conversation``, Pro).

    Rules (behaviour map §1.2): system text hoisted to the front and joined with ``\\n\\n``; tools
    block and response-format text appended to it; user/tool runs merged into one user turn with tool
    results ordered as the id-sorted calls; history reasoning shown only in thinking mode with tools;
    tool calls sorted by id; a generation prompt appended unless the last message is a prefix
    assistant. Never raises for a well-formed Conversation.
    """
    segs: list[Segment] = [_S_BOS]
    starts: list[tuple[int, int]] = []
    first_system = next((k for k, m in enumerate(conv.messages) if type(m) is SystemMessage), None)
    if first_system is not None:
        starts.append((first_system, 1))
    if conv.thinking:
        effort = EFFORT_TEXTS.get(conv.reasoning_effort, _EFFORT_HIGH)
        if effort:
            segs.append(Text(effort))
    segs += _system_section(conv)
    body, ends_with_prefix = _body(conv, len(segs), starts)
    segs += body
    if not ends_with_prefix:
        segs += (_S_ASSISTANT, _S_THINK if conv.thinking else _S_THINK_END)
        if conv.tool_choice.mode == "required" and conv.tools and not conv.thinking:
            segs += _FORCED_CALLS_OPEN
    return Prompt(tuple(segs), tuple(starts))


def iter_text(segments: Iterable[Segment]) -> str:
    """Concatenate segment texts (helper for debugging and tests)."""
    return "".join(s.text for s in segments)
