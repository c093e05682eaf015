"""Conversation -> DeepSeek-V3 prompt segments (the API path): the V3-0324 template's rendering of
the equivalent messages (:func:`recipe.encodings.v3_shared.api.messages_of`).

V3 has no thinking and its template renders no tool definitions and no response format (they
still reach a constrained decoder through the output constraint); a prefix assistant turn is
continued (the prompt ends right after its content, transformers' ``continue_final_message``).
"""

from __future__ import annotations

from recipe.conversation import AssistantMessage, Conversation, ParsingOptions
from recipe.encodings.deepseek_v3.template import render_messages
from recipe.encodings.v3_shared.api import messages_of, remap_starts, request_error
from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.prompt import Prompt

__all__ = ["render", "parsing", "REVISION"]

#: The template revision the API path renders.
REVISION = "V3-0324"


def _ends_with_prefix(conv: Conversation) -> bool:
    last = conv.messages[-1] if conv.messages else None
    return type(last) is AssistantMessage and last.prefix


def render(conv: Conversation) -> Prompt:
    """The V3-0324 prompt of ``conv``. Raises RequestError for what the format cannot express
    (a ``latest_reminder`` message)."""
    msgs, index = messages_of(conv, "DeepSeek-V3")
    cont = _ends_with_prefix(conv)
    try:
        prompt = render_messages(msgs, REVISION, add_generation_prompt=not cont, continue_final_message=cont)
    except ChatTemplateError as err:
        raise request_error(err, "DeepSeek-V3") from None
    return remap_starts(prompt, index)


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """V3 output is never reasoning, and the prompt never opens a tool-call block."""
    from dataclasses import replace

    return replace(default, thinking_stage=None, starts_in_tool_calls=False)
