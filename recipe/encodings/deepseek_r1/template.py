"""DeepSeek-R1's chat templates (``R1-2501``, ``R1-2502``, ``R1-0528``), emulated exactly, as segments.

The published jinja templates are the reference (reference/deepseek-v3x-formats.md §3; checked
against jinja2 rendering of the template strings in ``tests/test_v3x_templates.py``).

``R1-2501`` / ``R1-2502`` (the first R1 template; 2502 only pre-fills the generation prompt)::

    BOS + SYS
    user        <｜User｜> + content                                  (no <｜Assistant｜>)
    assistant   <｜Assistant｜> + content.split('</think>')[-1] + <EOS>
                after tool results: </TOS> + content + <EOS>            (not cut)
    with calls  (chosen by the *key* tool_calls being present; a None value raises)
                <｜Assistant｜> + [content] + <TCS><TC>…</TC>\\n<TC>…</TC></TCS><EOS>
    tool        first ever <TOS><TO>content</TO>; later ones <TO>content</TO> (no "\\n")
    end         </TOS> after results; generation prompt (unless the last message is a tool result):
                R1-2501 <｜Assistant｜>, R1-2502 <｜Assistant｜><think>\\n

Like V3-2412 the first-call and first-output flags are never reset: a second tool-calling turn
renders as ``\\n<TC>…`` without ``<｜Assistant｜><TCS>``, later results lose ``<TOS>``.

``R1-0528`` is V3-0324's layout with every assistant content cut after its last ``</think>``
(:func:`recipe.encodings.deepseek_v3.template.render_0324`); ``content: None`` raises there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recipe.encodings.deepseek_v3.template import _header, _think_cut, glued_calls, render_0324
from recipe.encodings.v3_shared import constants
from recipe.encodings.v3_shared.jinja import check_messages, s, tool_result, turns, user_turn
from recipe.encodings.v3_shared.segments import ChatTemplateError, Out
from recipe.prompt import Prompt

__all__ = ["REVISIONS", "render_messages"]

#: The template revisions this module renders.
REVISIONS = ("R1-2501", "R1-2502", "R1-0528")


def _render_2501(out: Out, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool, prefill: bool) -> None:
    t = "R1-2502" if prefill else "R1-2501"
    is_first = is_tool = False
    is_output_first = True
    for i, role, content, m in turns(out, messages):
        if role == "user":
            is_tool = False
            user_turn(out, i, content, t)
        if role == "assistant" and "tool_calls" in m:
            is_tool = False
            calls = m["tool_calls"]
            if calls is None:
                raise ChatTemplateError(f"{t} template: tool_calls is None (the template iterates it; leave the key out)")
            is_first = glued_calls(out, i, content, calls, t, is_first, close_each=False)
            out.special(constants.TOOL_CALLS_END)
            out.special(constants.EOS)
        if role == "assistant" and "tool_calls" not in m:
            if is_tool:
                out.special(constants.TOOL_OUTPUTS_END)
                out.content(i, s(content, "an assistant message's content", t))
                is_tool = False
            else:
                out.special(constants.ASSISTANT)
                out.content(i, s(_think_cut(content, t, "last"), "an assistant message's content", t))
            out.special(constants.EOS)
        if role == "tool":
            is_tool = True
            if is_output_first:
                out.special(constants.TOOL_OUTPUTS_BEGIN)
                is_output_first = False
            tool_result(out, i, content, t)
    if is_tool:
        out.special(constants.TOOL_OUTPUTS_END)
    if add_generation_prompt and not is_tool:
        out.special(constants.ASSISTANT)
        if prefill:
            out.special(constants.THINK_START)
            out.lit("\n")


def render_messages(
    messages: Sequence[Mapping[str, Any]],
    revision: str = "R1-0528",
    *,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
) -> Prompt:
    """The prompt DeepSeek-R1's template ``revision`` renders for ``messages``, as segments.

    Args:
        messages: OpenAI-shaped message dicts (``reasoning_content`` is ignored by every R1 template).
        revision: ``"R1-0528"`` (default), ``"R1-2502"`` or ``"R1-2501"``.
        add_generation_prompt / continue_final_message: as transformers' arguments.

    Raises:
        ChatTemplateError: where the template raises (R1-0528: an assistant ``content`` that is
            ``None``; R1-2501/2502: ``tool_calls: None``; any non-string text), or nothing to continue.
    """
    check_messages(messages)
    out = Out()
    _header(out, messages, revision)
    if revision == "R1-0528":
        render_0324(out, messages, add_generation_prompt, template=revision, think_split="last")
    elif revision in ("R1-2501", "R1-2502"):
        _render_2501(out, messages, add_generation_prompt, revision == "R1-2502")
    else:
        raise ChatTemplateError(f"unknown DeepSeek-R1 template revision {revision!r}; known: {', '.join(REVISIONS)}")
    return out.finish(messages, continue_final_message)
