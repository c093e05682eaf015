"""Conversation -> DeepSeek-V3.1 prompt segments (the API path): the V3.2-Exp revision of the V3.1
template (also V3.1-Terminus') rendering the equivalent messages, tools as the model card's
``## Tools`` system block.

The V3.2-Exp revision is used because it opens a new assistant turn after every turn but a tool
result (the first V3.1 template adds none after an assistant turn or a system-only conversation);
for conversations ending with a user or tool message both revisions give the same prompt. History
reasoning is never rendered (the template drops it). No response format is rendered.
"""

from __future__ import annotations

from dataclasses import replace

from recipe.conversation import AssistantMessage, Conversation, ParsingOptions, ToolMessage
from recipe.encodings.deepseek_v3_1.template import render_messages
from recipe.encodings.v3_shared.api import messages_of, openai_tools, remap_starts, request_error
from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.prompt import Prompt

__all__ = ["render", "parsing", "REVISION"]

#: The template revision the API path renders.
REVISION = "V3.2-Exp"


def render(conv: Conversation) -> Prompt:
    """The V3.1-format prompt of ``conv`` (template variable ``thinking`` = ``conv.thinking``).
    Raises RequestError for a ``latest_reminder`` message."""
    msgs, index = messages_of(conv, "DeepSeek-V3.1")
    last = conv.messages[-1] if conv.messages else None
    cont = type(last) is AssistantMessage and last.prefix
    try:
        prompt = render_messages(msgs, REVISION, tools=openai_tools(conv.tools) or None, add_generation_prompt=not cont,
                                 continue_final_message=cont, thinking=conv.thinking)
    except ChatTemplateError as err:
        raise request_error(err, "DeepSeek-V3.1") from None
    return remap_starts(prompt, index)


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """Where V3.1's output starts: reasoning only when the prompt ends ``<｜Assistant｜><think>``
    (thinking on, not after a tool result: the template adds no generation prompt there and the
    model answers without thinking); a prefix turn continues its reasoning in thinking mode (the
    template writes its content after ``<think>``) and its answer otherwise."""
    last = conv.messages[-1] if conv.messages else None
    stage = None
    if type(last) is AssistantMessage and last.prefix:
        after_user = len(conv.messages) < 2 or type(conv.messages[-2]) is not ToolMessage
        stage = "reasoning_continuation" if conv.thinking and after_user else None
    elif conv.thinking and type(last) is not ToolMessage:
        stage = "reasoning"
    return replace(default, thinking_stage=stage, starts_in_tool_calls=False)
