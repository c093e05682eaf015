"""DeepSeek-V3's chat templates (revisions ``V3-2412`` and ``V3-0324``), emulated exactly, as segments.

The published jinja templates (HF ``tokenizer_config.json``; reference/deepseek-v3x-formats.md §2)
are the reference: :func:`render_messages` gives the prompt they render (transformers'
``apply_chat_template`` arguments), with template text split into special tokens and message text
kept as ordinary text. ``tests/test_v3x_templates.py`` checks it against jinja2 rendering of the
template strings themselves.

``V3-0324`` (current)::

    BOS + SYS (all system contents joined "\\n\\n")
    user        <｜User｜> + content + <｜Assistant｜>
    assistant   [</TOS> after tool results] + content + <EOS>
    with calls  [</TOS> after results] + [content] + <TCS><TC>{type}<SEP>{name}\\n```json\\n{arguments}\\n```</TC>
                (\\n<TC>… for every further call) + </TCS><EOS>
    tool        first of a run <TOS><TO>content</TO>, then \\n<TO>content</TO>
    end         </TOS> after tool results; generation prompt <｜Assistant｜> only after an assistant turn

``V3-2412`` (the original template; its bugs are reproduced, each a real behaviour of the shipped
template): the user turn has no ``<｜Assistant｜>`` (assistant turns and the generation prompt write
it); calls are rendered only when ``content`` is ``None`` (``content: ""`` with calls renders
``<｜Assistant｜><EOS>`` and drops them); a single call is never closed (``</TCS><EOS>`` follows only
the second and later calls, after each of them); the first-call and first-output flags are never
reset, so a second tool-calling turn is glued to the previous output.

``think_split="last"`` gives R1-0528, which is V3-0324 with every assistant content cut to the text
after its last ``</think>`` (and raising on ``content: None``, as ``'</think>' in None`` does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from recipe.encodings.v3_shared import constants
from recipe.encodings.v3_shared.jinja import MISSING, calls_of, calls_turn, check_messages, function_of, get
from recipe.encodings.v3_shared.jinja import open_results, s, system_prompt, tool_result, turns, user_turn
from recipe.encodings.v3_shared.segments import ChatTemplateError, Out
from recipe.prompt import Prompt

__all__ = ["REVISIONS", "render_messages", "fenced_call", "glued_calls"]

#: The template revisions this module renders.
REVISIONS = ("V3-2412", "V3-0324")


def fenced_call(out: Out, call: Any, template: str) -> None:
    """``<TC>{type}<SEP>{name}\\n```json\\n{arguments}\\n```</TC>`` (V3 / R1 call spelling)."""
    name, arguments = function_of(call, template)
    kind = s(get(call, "type"), "a tool call's type", template)
    out.special(constants.TOOL_CALL_BEGIN)
    out.text(kind)
    out.special(constants.TOOL_SEP)
    out.text(name)
    out.lit("\n```json\n")
    out.text(arguments)
    out.lit("\n```")
    out.special(constants.TOOL_CALL_END)


def glued_calls(out: Out, i: int, content: Any, calls: Any, template: str, is_first: bool, close_each: bool) -> bool:
    """The first templates' call loop (V3-2412, R1-2501/2502), whose first-call flag is never reset:
    the first call ever opens ``<｜Assistant｜>`` [content] ``<｜tool▁calls▁begin｜>``; every later call,
    in any turn, is ``\n`` + the call (V3-2412 writes ``</TCS><EOS>`` after each of those:
    ``close_each``). Returns the flag."""
    for call in calls_of(calls, template):
        if not is_first:
            out.special(constants.ASSISTANT)
            if content is not None:
                out.content(i, s(content, "an assistant message's content", template))
            out.special(constants.TOOL_CALLS_BEGIN)
            fenced_call(out, call, template)
            is_first = True
        else:
            out.lit("\n")
            fenced_call(out, call, template)
            if close_each:
                out.special(constants.TOOL_CALLS_END)
                out.special(constants.EOS)
    return is_first


def _header(out: Out, messages: Sequence[Mapping[str, Any]], template: str) -> None:
    sys_text, first = system_prompt(messages, template)
    out.special(constants.BOS)
    if first is not None:
        out.starts.append((first, len(out.segs)))
    out.text(sys_text)
    last_sys = max((i for i, m in enumerate(messages) if m.get("role") == "system"), default=None)
    if last_sys is not None:
        out.content_ends[last_sys] = len(out.segs)


def _render_2412(out: Out, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool) -> None:
    t = "V3-2412"
    is_first = is_tool = False
    is_output_first = True
    for i, role, content, m in turns(out, messages):
        if role == "user":
            is_tool = False
            user_turn(out, i, content, t)
        if role == "assistant" and content is None:
            is_tool = False
            is_first = glued_calls(out, i, content, get(m, "tool_calls"), t, is_first, close_each=True)
        if role == "assistant" and content is not None:
            text = s(content, "an assistant message's content", t)
            if is_tool:
                out.special(constants.TOOL_OUTPUTS_END)
                is_tool = False
            else:
                out.special(constants.ASSISTANT)
            out.content(i, text)
            out.special(constants.EOS)
        if role == "tool":
            is_tool = True
            is_output_first = open_results(out, is_output_first)
            tool_result(out, i, content, t)
    if is_tool:
        out.special(constants.TOOL_OUTPUTS_END)
    if add_generation_prompt and not is_tool:
        out.special(constants.ASSISTANT)


def _think_cut(content: Any, template: str, how: Literal["last", "first"] | None) -> Any:
    """The R1 / V3.1 history cut: ``content.split('</think>')[-1]`` (last) or ``[1]`` after the first."""
    if how is None:
        return content
    if not isinstance(content, str):
        raise ChatTemplateError(
            f"{template} template: an assistant message's content is {'missing' if content is MISSING else type(content).__name__}"
            " ('</think>' in content raises; send \"\" for a tool-call turn without text)")
    if "</think>" not in content:
        return content
    return content.split("</think>")[-1] if how == "last" else content.split("</think>", 1)[1]


def render_0324(
    out: Out,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool,
    *,
    template: str = "V3-0324",
    think_split: Literal["last"] | None = None,
) -> None:
    """The V3-0324 layout (module docstring); ``think_split="last"`` is R1-0528's variant."""
    t = template
    is_tool = is_last_user = False
    is_output_first = True
    for i, role, content, m in turns(out, messages):
        if role == "assistant":
            content = _think_cut(content, t, think_split)
        if role == "user":
            is_tool = False
            is_last_user = True
            user_turn(out, i, content, t, assistant=True)
        calls = get(m, "tool_calls")
        if role == "assistant" and calls is not MISSING and calls is not None:
            is_last_user = False
            if is_tool:
                out.special(constants.TOOL_OUTPUTS_END)
            is_tool = False
            is_output_first = True
            calls_turn(out, i, content, calls, t, fenced_call, "\n")
        if role == "assistant" and (calls is MISSING or calls is None):
            is_last_user = False
            text = s(content, "an assistant message's content", t)
            if is_tool:
                out.special(constants.TOOL_OUTPUTS_END)
                is_tool = False
            out.content(i, text)
            out.special(constants.EOS)
        if role == "tool":
            is_last_user = False
            is_tool = True
            is_output_first = open_results(out, is_output_first)
            tool_result(out, i, content, t)
    if is_tool:
        out.special(constants.TOOL_OUTPUTS_END)
    if add_generation_prompt and not is_last_user and not is_tool:
        out.special(constants.ASSISTANT)


def render_messages(
    messages: Sequence[Mapping[str, Any]],
    revision: str = "V3-0324",
    *,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
) -> Prompt:
    """The prompt DeepSeek-V3's template ``revision`` renders for ``messages`` (as transformers
    renders it, ``None`` values kept), as segments.

    Args:
        messages: OpenAI-shaped message dicts (``tool_calls[].function.arguments`` a JSON string).
        revision: ``"V3-0324"`` (default) or ``"V3-2412"``.
        add_generation_prompt / continue_final_message: as transformers' arguments.

    Raises:
        ChatTemplateError: where the template raises (a non-string content or argument, a missing
            key it concatenates), or nothing to continue.
    """
    check_messages(messages)
    out = Out()
    _header(out, messages, revision)
    if revision == "V3-2412":
        _render_2412(out, messages, add_generation_prompt)
    elif revision == "V3-0324":
        render_0324(out, messages, add_generation_prompt)
    else:
        raise ChatTemplateError(f"unknown DeepSeek-V3 template revision {revision!r}; known: {', '.join(REVISIONS)}")
    return out.finish(messages, continue_final_message)
