"""Conversation -> DeepSeek-R1 prompt segments (the API path): the R1-0528 template's rendering of
the equivalent messages (:func:`recipe.encodings.v3_shared.api.messages_of`).

R1 always reasons: the template has no switch, the model opens ``<think>`` itself and history
reasoning is cut from the content (``split('</think>')[-1]``; ``reasoning_content`` is not
rendered). Tool definitions and response formats are not rendered (the template has no place for
them). A prefix assistant turn is continued right after its (cut) content.
"""

from __future__ import annotations

from dataclasses import replace

from recipe.conversation import AssistantMessage, Conversation, ParsingOptions
from recipe.encodings.deepseek_r1.template import render_messages
from recipe.encodings.v3_shared.api import messages_of, remap_starts, request_error
from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.prompt import Prompt

__all__ = ["render", "parsing", "REVISION"]

#: The template revision the API path renders.
REVISION = "R1-0528"


def _prefix(conv: Conversation) -> AssistantMessage | None:
    last = conv.messages[-1] if conv.messages else None
    return last if type(last) is AssistantMessage and last.prefix else None


def render(conv: Conversation) -> Prompt:
    """The R1-0528 prompt of ``conv``. Raises RequestError for a ``latest_reminder`` message."""
    msgs, index = messages_of(conv, "DeepSeek-R1")
    cont = _prefix(conv) is not None
    try:
        prompt = render_messages(msgs, REVISION, add_generation_prompt=not cont, continue_final_message=cont)
    except ChatTemplateError as err:
        raise request_error(err, "DeepSeek-R1") from None
    return remap_starts(prompt, index)


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """R1's output starts in its reasoning (the model writes ``<think>`` itself), whatever the request
    said; a prefix turn continues the reasoning when its rendered text has an open ``<think>``, else
    the answer. The prompt never opens a tool-call block."""
    stage = "reasoning"
    prefix = _prefix(conv)
    if prefix is not None:
        shown = (prefix.content or "").split("</think>")[-1]
        stage = "reasoning_continuation" if "<think>" in shown else "content_continuation"
    return replace(default, thinking_stage=stage, starts_in_tool_calls=False)
