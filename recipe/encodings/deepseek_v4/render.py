"""Conversation -> DeepSeek-V4 prompt segments, as deepseek-recipe 0.2.0 renders them (Pro / Flash).

Layout (deepseek-recipe behaviour map §1.2)::

    BOS + EFFORT_TEXT (thinking only) + SYSTEM_SECTION + message groups + GENERATION_PROMPT

Template text is split into :class:`~recipe.prompt.Special` and :class:`~recipe.prompt.Text`
segments here, once; everything taken from the conversation (system text, user text, reasoning,
tool names, arguments, results, schemas) becomes ``Text`` only, except the grounding tokens the
model itself wrote in an assistant turn's content or reasoning (:func:`model_text`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

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
    GROUNDING_TOKENS,
    LATEST_REMINDER,
    THINK_END,
    THINK_START,
    USER,
)
from recipe.encodings.base import Checkpoint, ResumableRender
from recipe.jsonfmt import dumps_prompt, parse_json_value
from recipe.prompt import Prompt, Segment, Special, Text

__all__ = [
    "render", "render_resumable", "render_context", "RESUMABLE", "template_segments", "EFFORT_TEXTS", "TOOLS_TEMPLATE",
    "JSON_SCHEMA_HEAD", "Dialect", "dialect", "V4_DIALECT", "tool_line", "tools_block", "invoke_segments",
    "tool_calls_segments", "by_id", "assistant_segments", "prefix_assistant_segments", "generation_prompt",
    "model_text",
]

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


_GROUNDING_RE = re.compile("(" + "|".join(map(re.escape, GROUNDING_TOKENS)) + ")")


def model_text(text: str) -> list[Segment]:
    """An assistant turn's content or reasoning (text the model wrote) as segments: the grounding
    tokens it emits (:data:`~.constants.GROUNDING_TOKENS`) are special tokens again, everything else
    text (deepseek-recipe 0.2.0 encodes exactly these eight there). Never for user, system or tool
    text."""
    if "<｜" not in text:
        return [Text(text)]
    out: list[Segment] = []
    for i, part in enumerate(_GROUNDING_RE.split(text)):
        if part:
            out.append(Special(part) if i % 2 else Text(part))
    return out or [Text("")]


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
JSON_SCHEMA_HEAD = "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
_JSON_OBJECT_TEXT = (
    "\n\nYou are a helpful assistant designed to output JSON.\n## Response Format:\n\nReply with JSON object ONLY."
)

_S_BOS, _S_EOS, _S_USER, _S_ASSISTANT = Special(BOS), Special(EOS), Special(USER), Special(ASSISTANT)
_S_THINK, _S_THINK_END, _S_DSML, _S_REMINDER = Special(THINK_START), Special(THINK_END), Special(DSML), Special(LATEST_REMINDER)


@dataclass(frozen=True, slots=True)
class Dialect:
    """What a family's prompt format changes in the shared building blocks: the DSML tag names
    after ``｜DSML｜``, how an invoke without parameters looks, and the JSON printer. Build with
    :func:`dialect`; the segment tuples are derived once.

    Attributes:
        calls, invoke, parameter: tag names (V4 ``tool_calls`` / ``invoke`` / ``parameter``; V4.1
            `` calls`` / `` invoke`` / `` parameter``, with a leading space).
        blank_empty_invoke: an invoke without parameters has a blank line (V4.1, and both reference
            encoders) instead of none (V4 API path).
        dumps: the prompt JSON printer (V4 :func:`~recipe.jsonfmt.dumps_prompt`; V4.1
            :func:`~recipe.jsonfmt.dumps_prompt_python`, Python's float format).
        calls_open, calls_close, invoke_close, tools_head, tools_tail, parameter_close: the fixed
            segments around calls, invokes, parameters and the tools block, built once by :func:`dialect`.
    """

    calls: str
    invoke: str
    parameter: str
    blank_empty_invoke: bool
    dumps: Callable[[Any], str] = dumps_prompt
    calls_open: tuple[Segment, ...] = ()
    calls_close: tuple[Segment, ...] = ()
    invoke_close: tuple[Segment, ...] = ()
    tools_head: tuple[Segment, ...] = ()
    tools_tail: tuple[Segment, ...] = ()
    parameter_close: Text = Text("")

    def tools_template(self) -> str:
        """:data:`TOOLS_TEMPLATE` in this spelling."""
        return (TOOLS_TEMPLATE.replace(f"{DSML}tool_calls", DSML + self.calls)
                .replace(f"{DSML}invoke", DSML + self.invoke).replace(f"{DSML}parameter", DSML + self.parameter))


def dialect(calls: str, invoke: str, parameter: str, blank_empty_invoke: bool, dumps: Callable[[Any], str] = dumps_prompt) -> Dialect:
    """A :class:`Dialect` with its segment tuples (block opener/closer, invoke closer, tools block)."""
    base = Dialect(calls, invoke, parameter, blank_empty_invoke, dumps)
    head, tail = (template_segments(p) for p in base.tools_template().split("{TOOL_LINES}"))
    return Dialect(
        calls, invoke, parameter, blank_empty_invoke, dumps,
        calls_open=(Text("\n\n<"), _S_DSML, Text(f"{calls}>\n")),
        calls_close=(Text("\n</"), _S_DSML, Text(f"{calls}>")),
        invoke_close=(Text("</"), _S_DSML, Text(f"{invoke}>")),
        tools_head=head,
        tools_tail=tail,
        parameter_close=Text(f"{parameter}>\n"),
    )


#: DeepSeek-V4's dialect (deepseek-recipe's API path: no blank line in an empty invoke).
V4_DIALECT = dialect("tool_calls", "invoke", "parameter", blank_empty_invoke=False)


#: ``(id(tool), id(dumps))`` -> ``(tool, dumps, line)``: each tool's line printed once per printer.
#: Tool definitions are immutable and shared between requests (the adapters memoise them), so an
#: agent loop re-sending its tools prints none of them again; entries hold the tool and printer,
#: so an id is never reused while its entry lives. Bounded: cleared when full.
_TOOL_LINES: dict[tuple[int, int], tuple[ToolDefinition, Callable[[Any], str], str]] = {}
_TOOL_LINES_MAX = 1024


def tool_line(tool: ToolDefinition, dumps: Callable[[Any], str] = dumps_prompt) -> str:
    """One line of the tools block: ``{"name": …, "description": …, "parameters": …}`` (prompt JSON)."""
    key = (id(tool), id(dumps))
    hit = _TOOL_LINES.get(key)
    if hit is not None and hit[0] is tool and hit[1] is dumps:
        return hit[2]
    line = dumps({"name": tool.name, "description": tool.description or "", "parameters": tool.parameters})
    if len(_TOOL_LINES) >= _TOOL_LINES_MAX:
        _TOOL_LINES.clear()
    _TOOL_LINES[key] = (tool, dumps, line)
    return line


def tools_block(tools: Iterable[ToolDefinition], d: Dialect) -> list[Segment]:
    """The ``\n\n## Tools`` block listing ``tools`` (one :func:`tool_line` each)."""
    return [*d.tools_head, Text("\n".join(tool_line(t, d.dumps) for t in tools)), *d.tools_tail]


def _system_section(conv: Conversation) -> list[Segment]:
    texts = [m.content for m in conv.messages if type(m) is SystemMessage and m.content]
    out: list[Segment] = [Text("\n\n".join(texts))] if texts else []
    if conv.tools:
        out += tools_block(conv.tools, V4_DIALECT)
    rf = conv.response_format
    if rf.type == "json_schema":
        out.append(Text(JSON_SCHEMA_HEAD + dumps_prompt(rf.schema)))
    elif rf.type == "json_object":
        out.append(Text(_JSON_OBJECT_TEXT))
    return out


#: The text segments every call block repeats, shared (segments are immutable).
_T_OPEN, _T_NEWLINE = Text("<"), Text("\n")


def _param(name: str, is_string: bool, value: str, d: Dialect) -> tuple[Segment, ...]:
    flag = "true" if is_string else "false"
    return (_T_OPEN, _S_DSML, Text(f'{d.parameter} name="{name}" string="{flag}">{value}</'), _S_DSML, d.parameter_close)


def invoke_segments(call: ToolCall, d: Dialect) -> list[Segment]:
    """One ``invoke`` of a history tool call; arguments that are not a JSON object become one
    ``arguments`` string parameter holding the raw text (behaviour map §1.2.5). Parameters are one
    per line; an invoke without any has an empty line when ``d.blank_empty_invoke``."""
    out: list[Segment] = [_T_OPEN, _S_DSML, Text(f'{d.invoke} name="{call.name}">\n')]
    try:
        args = parse_json_value(call.arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        for key, value in args.items():
            is_string = isinstance(value, str)
            out += _param(key, is_string, value if is_string else d.dumps(value), d)
        if not args and d.blank_empty_invoke:
            out.append(_T_NEWLINE)
    else:
        out += _param("arguments", True, call.arguments, d)
    out += d.invoke_close
    return out


def tool_calls_segments(calls: Iterable[ToolCall], d: Dialect) -> list[Segment]:
    """The ``\n\n<｜DSML｜…calls>`` block of ``calls``, in the order given."""
    out: list[Segment] = list(d.calls_open)
    for i, call in enumerate(calls):
        if i:
            out.append(_T_NEWLINE)
        out += invoke_segments(call, d)
    out += d.calls_close
    return out


def by_id(calls: Sequence[ToolCall]) -> list[ToolCall]:
    """V4's history call order: sorted by call id."""
    return sorted(calls, key=lambda c: c.id)


def assistant_segments(msg: AssistantMessage, think_history: bool, calls: Sequence[ToolCall], d: Dialect) -> list[Segment]:
    """A history assistant turn: ``<｜Assistant｜>`` + ``<think>R</think>`` (thinking with tools) or
    ``</think>`` + content + the tool-call block of ``calls`` (in that order) + EOS."""
    out: list[Segment] = [_S_ASSISTANT]
    if think_history:
        out += (_S_THINK, *model_text(msg.reasoning_content or ""), _S_THINK_END)
    else:
        out.append(_S_THINK_END)
    out += model_text(msg.content or "")
    if calls:
        out += tool_calls_segments(calls, d)
    out.append(_S_EOS)
    return out


def prefix_assistant_segments(msg: AssistantMessage, thinking: bool) -> list[Segment]:
    """A trailing ``prefix`` assistant to continue (no generation prompt follows)."""
    if not thinking:
        return [_S_ASSISTANT, _S_THINK_END, *model_text(msg.content or "")]
    out: list[Segment] = [_S_ASSISTANT, _S_THINK, *model_text(msg.reasoning_content or "")]
    if msg.content:
        out += (_S_THINK_END, *model_text(msg.content))
    return out


def generation_prompt(conv: Conversation, d: Dialect) -> tuple[Segment, ...]:
    """``<｜Assistant｜>`` + ``<think>`` | ``</think>``, then the opened tool-call block for a
    required / named tool choice without thinking."""
    head = (_S_ASSISTANT, _S_THINK if conv.thinking else _S_THINK_END)
    if conv.tool_choice.mode == "required" and conv.tools and not conv.thinking:
        return head + d.calls_open
    return head


def _user_group(tools: list[ToolMessage], users: list[UserMessage], call_order: Mapping[str, int]) -> list[Segment]:
    if len(tools) > 1:
        unknown = len(call_order)
        tools.sort(key=lambda m: call_order.get(m.tool_call_id, unknown))
    parts = [f"<tool_result>{m.content}</tool_result>" for m in tools]
    if users:
        parts.append("\n\n".join(u.content for u in users if u.content))
    return [_S_USER, Text("\n\n".join(parts))]


_EMPTY_ORDER: Mapping[str, int] = MappingProxyType({})


def _body(
    conv: Conversation,
    k: int,
    call_order: Mapping[str, int],
    segs: list[Segment],
    starts: list[tuple[int, int]],
    checkpoints: list[Checkpoint] | None,
) -> bool:
    """Render message groups from ``conv.messages[k]`` on (system messages skipped: they are hoisted),
    appending to ``segs`` and each group's ``(message index, segment index)`` to ``starts``; returns
    whether the prompt ends with a prefix assistant. ``call_order``: the result order set by the last
    assistant turn with tool calls before ``k``.

    A checkpoint follows every assistant turn (not a prefix) and every latest-reminder message: their
    segments never depend on what follows, and the next group begins with a special token. After a
    user or tool message a later message may still join the same user turn, so none is taken there.
    """
    messages = conv.messages
    n = len(messages)
    last = n - 1
    while last >= 0 and type(messages[last]) is SystemMessage:
        last -= 1
    think_history = conv.thinking and bool(conv.tools)
    while k < n:
        m = messages[k]
        kind = type(m)
        if kind is SystemMessage:
            k += 1
            continue
        starts.append((k, len(segs)))
        if kind is UserMessage or kind is ToolMessage:
            # one user turn = tool results, then user texts; a tool result after a user text opens
            # a new turn (reachable through Responses outputs without a call id)
            tools: list[ToolMessage] = []
            users: list[UserMessage] = []
            while k < n and ((kind := type(messages[k])) is ToolMessage or kind is SystemMessage):
                if kind is ToolMessage:
                    tools.append(messages[k])  # type: ignore[arg-type]
                k += 1
            while k < n and ((kind := type(messages[k])) is UserMessage or kind is SystemMessage):
                if kind is UserMessage:
                    users.append(messages[k])  # type: ignore[arg-type]
                k += 1
            segs += _user_group(tools, users, call_order)
            continue
        if kind is LatestReminderMessage:
            segs += (_S_REMINDER, Text(m.content))
            if checkpoints is not None:
                checkpoints.append(Checkpoint(k + 1, len(segs), len(starts), call_order))
        elif kind is AssistantMessage:
            if m.prefix and k == last:
                segs += prefix_assistant_segments(m, conv.thinking)
                return True
            calls = by_id(m.tool_calls)
            segs += assistant_segments(m, think_history, calls, V4_DIALECT)
            if calls:
                call_order = {c.id: j for j, c in enumerate(calls)}
            if checkpoints is not None and not m.prefix:
                checkpoints.append(Checkpoint(k + 1, len(segs), len(starts), call_order))
        k += 1
    return False


#: Effective effort -> its effort text as a segment (None for ``low``, which has none), built once.
_EFFORT_SEGMENTS: dict[str | None, Text | None] = {k: Text(v) if v else None for k, v in EFFORT_TEXTS.items()}


def _header(conv: Conversation) -> list[Segment]:
    segs: list[Segment] = [_S_BOS]
    if conv.thinking:
        effort = _EFFORT_SEGMENTS.get(conv.reasoning_effort, _EFFORT_SEGMENTS["high"])
        if effort is not None:
            segs.append(effort)
    segs += _system_section(conv)
    return segs


def _render(conv: Conversation, resume: tuple[Prompt, Checkpoint] | None, checkpoints: list[Checkpoint] | None) -> Prompt:
    starts: list[tuple[int, int]] = []
    for k, m in enumerate(conv.messages):
        if type(m) is SystemMessage:
            starts.append((k, 1))  # the system section is attributed to the first system message
            break
    if resume is None:
        segs = _header(conv)
        ends_with_prefix = _body(conv, 0, _EMPTY_ORDER, segs, starts, checkpoints)
    else:
        prompt, cp = resume
        segs = list(prompt.segments[: cp.segments])
        starts += prompt.message_starts[len(starts) : cp.starts]
        ends_with_prefix = _body(conv, cp.messages, cp.state, segs, starts, checkpoints)
    if not ends_with_prefix:
        segs += generation_prompt(conv, V4_DIALECT)
    return Prompt(tuple(segs), tuple(starts))


def render(conv: Conversation) -> Prompt:
    """The DeepSeek-V4 prompt of ``conv`` as segments (deepseek-recipe 0.2.0 ``render_conversation``, Pro).

    Rules (behaviour map §1.2): system text hoisted to the front and joined with ``\\n\\n``; tools
    block and response-format text appended to it; user/tool runs merged into one user turn with tool
    results ordered as the id-sorted calls; history reasoning shown only in thinking mode with tools;
    tool calls sorted by id; a generation prompt appended unless the last message is a prefix
    assistant. Never raises for a well-formed Conversation.
    """
    return _render(conv, None, None)


def render_context(conv: Conversation) -> tuple[Any, ...]:
    """What the rendering of a message prefix reads besides those messages: thinking, effort, tools,
    response format (all in the system section or the history's reasoning rule) and every system
    message's text (hoisted to the front wherever it stands). The tool choice only shapes the
    generation prompt, which is rendered anew each time."""
    return (
        conv.thinking,
        conv.reasoning_effort,
        conv.tools,
        conv.response_format,
        [m.content for m in conv.messages if type(m) is SystemMessage],
    )


def render_boundaries(conv: Conversation) -> list[int]:
    """Message counts where :func:`render_resumable` may place a checkpoint: after each assistant
    turn that is not a prefix and after each latest reminder."""
    return [
        k + 1
        for k, m in enumerate(conv.messages)
        if (type(m) is AssistantMessage and not m.prefix) or type(m) is LatestReminderMessage
    ]


def render_resumable(
    conv: Conversation, resume: tuple[Prompt, Checkpoint] | None = None
) -> tuple[Prompt, tuple[Checkpoint, ...]]:
    """:func:`render` with checkpoints (after each assistant turn and latest reminder), optionally
    resumed from an earlier prompt's checkpoint (contract: :class:`~recipe.encodings.base.ResumableRender`)."""
    checkpoints: list[Checkpoint] = []
    prompt = _render(conv, resume, checkpoints)
    return prompt, tuple(checkpoints)


#: The V4 renderer as the prompt cache uses it.
RESUMABLE = ResumableRender(context=render_context, boundaries=render_boundaries, render=render_resumable)


def iter_text(segments: Iterable[Segment]) -> str:
    """Concatenate segment texts (helper for debugging and tests)."""
    return "".join(s.text for s in segments)
