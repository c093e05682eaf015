"""DeepSeek-V3.1's chat templates (``V3.1`` and ``V3.2-Exp``), emulated exactly, as segments, plus the
model card's tools block.

The published jinja templates are the reference (reference/deepseek-v3x-formats.md §4; checked
against jinja2 rendering of the template strings in ``tests/test_v3x_templates.py``). Template
variable ``thinking`` (default false)::

    BOS + SYS (system contents joined "\\n\\n")
    user        <｜User｜> + content
    assistant   after a user turn: <｜Assistant｜> + (<think> if prefix and thinking else </think>)
                + content.split('</think>', 1)[1] (when it contains </think>) + <EOS>
                after tool results: content + <EOS> (no marker, no cut)
    with calls  after a user turn: <｜Assistant｜></think>; then [content]
                <TCS><TC>{name}<SEP>{arguments}</TC><TC>…</TC></TCS><EOS>
    tool        <TO>content</TO>
    end         only after a user turn: <｜Assistant｜> + (<think> if thinking else </think>)

``V3.2-Exp`` (also the V3.1-Terminus template) adds: a tool-call turn or the generation prompt
right after the system messages opens ``<｜Assistant｜></think>`` / ``…<think>``, and the generation
prompt is added after any turn except a tool result, unless a ``prefix`` assistant turn occurred.

The template ignores ``tools``; the model card describes a ``## Tools`` block for the system prompt
(:func:`tools_system_text`), rendered here as one more system message (so ``\\n\\n`` after the
system prompt), tools separated by a blank line, ``Parameters:`` as Python ``json.dumps`` with its
defaults (ASCII-escaped), no trailing newline; its ``<｜tool▁…｜>`` spellings are template text and
therefore special tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from recipe.encodings.deepseek_v3.template import _header, _think_cut
from recipe.encodings.v3_shared import constants
from recipe.encodings.v3_shared.jinja import MISSING, calls_turn, check_messages, function_of, get
from recipe.encodings.v3_shared.jinja import s, tool_result, turns, user_turn
from recipe.encodings.v3_shared.segments import ChatTemplateError, Out
from recipe.prompt import Prompt, Segment, Special, Text

__all__ = ["REVISIONS", "render_messages", "tools_system_text", "tools_segments"]

#: The template revisions this module renders.
REVISIONS = ("V3.1", "V3.2-Exp")

_TOOLS_HEAD = "## Tools\nYou have access to the following tools:\n\n"
_FORMAT = (
    "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n",
    constants.TOOL_CALLS_BEGIN, constants.TOOL_CALL_BEGIN, "tool_call_name", constants.TOOL_SEP,
    "tool_call_arguments", constants.TOOL_CALL_END,
    "{{additional_tool_calls}}", constants.TOOL_CALLS_END,
    "\n\nWhere:\n- `tool_call_name` must be an exact match to one of the available tools\n"
    "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
    "- For multiple tool calls, chain them directly without separators or spaces",
)
_SPECIALS = frozenset((constants.TOOL_CALLS_BEGIN, constants.TOOL_CALL_BEGIN, constants.TOOL_SEP,
                       constants.TOOL_CALL_END, constants.TOOL_CALLS_END))


def _tool_section(function: Mapping[str, Any]) -> str:
    description = function.get("description")
    return (f"### {function.get('name', '')}\nDescription: {'' if description is None else description}\n\n"
            f"Parameters: {json.dumps(function.get('parameters', {}))}")


def tools_segments(tools: Sequence[Any]) -> tuple[Segment, ...]:
    """The model card's ``## Tools`` block for OpenAI-shaped ``tools`` (``{"type": "function",
    "function": {...}}``), as segments: tool names, descriptions and schemas are ordinary text.

    Raises:
        ChatTemplateError: a tool without a ``function`` object, or a schema ``json.dumps`` refuses.
    """
    sections = []
    for tool in tools:
        fn = get(tool, "function")
        if not isinstance(fn, Mapping):
            raise ChatTemplateError("a tool has no 'function' object")
        try:
            sections.append(_tool_section(fn))
        except (TypeError, ValueError) as exc:
            raise ChatTemplateError(f"a tool's parameters are not JSON-serialisable: {exc}") from exc
    head: list[Segment] = [Text(_TOOLS_HEAD), Text("\n\n".join(sections)), Text("\n\n")]
    return (*head, *(Special(p) if p in _SPECIALS else Text(p) for p in _FORMAT))


def tools_system_text(tools: Sequence[Any]) -> str:
    """The model card's ``## Tools`` block as text (see :func:`tools_segments`)."""
    return "".join(seg.text for seg in tools_segments(tools))


def _call(out: Out, call: Any, template: str) -> None:
    name, arguments = function_of(call, template)
    out.special(constants.TOOL_CALL_BEGIN)
    out.text(name)
    out.special(constants.TOOL_SEP)
    out.text(arguments)
    out.special(constants.TOOL_CALL_END)


def _system(out: Out, messages: Sequence[Mapping[str, Any]], template: str, tools: tuple[Segment, ...]) -> None:
    """BOS + the system prompt; the tools block (template text) joins it as one more system message."""
    _header(out, messages, template)
    if tools:
        if any(m.get("role") == "system" for m in messages):
            out.lit("\n\n")
        out.segs.extend(tools)


def _render(out: Out, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool, thinking: bool, exp: bool,
            has_tools: bool) -> None:
    t = "V3.2-Exp" if exp else "V3.1"
    is_tool = is_last_user = is_prefix = False
    is_only_sys = exp and (has_tools or any(m.get("role") == "system" for m in messages))
    for i, role, content, m in turns(out, messages):
        if role == "user":
            is_tool = False
            is_last_user = True
            user_turn(out, i, content, t)
        calls = get(m, "tool_calls")
        if role == "assistant" and calls is not MISSING and calls is not None:
            if is_last_user or is_only_sys:
                out.special(constants.ASSISTANT)
                out.special(constants.THINK_END)
            is_last_user = is_tool = False
            calls_turn(out, i, content, calls, t, _call, "")
        if role == "assistant" and (calls is MISSING or calls is None):
            prefix = get(m, "prefix")
            prefix = prefix is not MISSING and bool(prefix)
            if is_last_user:
                out.special(constants.ASSISTANT)
                out.special(constants.THINK_START if prefix and thinking else constants.THINK_END)
            if exp and prefix:
                is_prefix = True
            is_last_user = False
            if is_tool:
                out.content(i, s(content, "an assistant message's content", t))
                is_tool = False
            else:
                out.content(i, s(_think_cut(content, t, "first"), "an assistant message's content", t))
            out.special(constants.EOS)
        if role == "tool":
            is_last_user = False
            is_tool = True
            tool_result(out, i, content, t)
        if role != "system":
            is_only_sys = False
    if not add_generation_prompt or is_tool:
        return
    if is_last_user if not exp else (is_last_user or is_only_sys or not is_prefix):
        out.special(constants.ASSISTANT)
        out.special(constants.THINK_START if thinking else constants.THINK_END)


def render_messages(
    messages: Sequence[Mapping[str, Any]],
    revision: str = "V3.1",
    *,
    tools: Sequence[Any] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    thinking: bool = False,
) -> Prompt:
    """The prompt DeepSeek-V3.1's template ``revision`` renders for ``messages``, as segments.

    Args:
        messages: OpenAI-shaped message dicts (``reasoning_content`` is ignored by the template;
            ``prefix: true`` on a last assistant turn opens ``<think>`` in thinking mode).
        revision: ``"V3.1"`` (default) or ``"V3.2-Exp"``.
        tools: OpenAI-shaped tools, rendered as the model card's ``## Tools`` system block.
        add_generation_prompt / continue_final_message: as transformers' arguments.
        thinking: the template's ``thinking`` variable.

    Raises:
        ChatTemplateError: where the template raises (non-string text, ``content: None`` on a turn
            without calls, a dict ``arguments``), or nothing to continue.
    """
    check_messages(messages)
    if revision not in REVISIONS:
        raise ChatTemplateError(f"unknown DeepSeek-V3.1 template revision {revision!r}; known: {', '.join(REVISIONS)}")
    block = tools_segments(tools) if tools else ()
    out = Out()
    _system(out, messages, revision, block)
    _render(out, messages, add_generation_prompt, bool(thinking), revision == "V3.2-Exp", bool(block))
    return out.finish(messages, continue_final_message)
