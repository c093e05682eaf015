"""DeepSeek-V3.1 encoding (V3.1, V3.1-Terminus, V3.2-Exp): the :data:`ENCODING` record, made from
the :data:`ROW` data row (:func:`recipe.encodings.v3_shared.family.record`).

- ``template.render_messages(messages, revision, tools=…, thinking=…)``: the published chat
  templates (V3.1, V3.2-Exp) and the model card's tools block, the reference encoder.
- The API path: the V3.2-Exp revision of the V3.1 template (also V3.1-Terminus') on the equivalent
  messages, tools as the model card's ``## Tools`` system block, the template's ``thinking`` the
  request's. The V3.2-Exp revision is used because it opens a new assistant turn after every turn
  but a tool result (the first V3.1 template adds none after an assistant turn or a system-only
  conversation); for conversations ending with a user or tool message both revisions give the same
  prompt. History reasoning is never rendered (the template drops it). No response format is
  rendered.
- Output: :mod:`recipe.encodings.v3_shared.output` with the bare call syntax.

Thinking on or off per request; the V3 vocabulary.
"""

from __future__ import annotations

from dataclasses import replace

from recipe.conversation import AssistantMessage, Conversation, ParsingOptions, ToolMessage
from recipe.encodings.deepseek_v3_1.template import render_messages
from recipe.encodings.v3_shared.family import BARE, TemplateFamily, record

__all__ = ["ENCODING", "ROW", "encode_messages", "encode_messages_to_ids", "parsing"]


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


#: The DeepSeek-V3.1 family's data row (V3.2-Exp shares its format).
ROW = TemplateFamily(
    name="deepseek_v3_1", label="DeepSeek-V3.1", template=render_messages, revision="V3.1", api_revision="V3.2-Exp",
    syntax=BARE, thinking="switch", parsing=parsing,
    models=("deepseek-v3.1", "deepseek-v3.1-terminus", "deepseek-v3.2-exp", "DeepSeek-V3.1", "DeepSeek-V3.1-Terminus",
            "DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.1-Terminus",
            "deepseek-ai/DeepSeek-V3.2-Exp"),
)

#: The DeepSeek-V3.1 family record (V3.2-Exp shares its format).
ENCODING = record(ROW)
encode_messages = ENCODING.encode_messages
encode_messages_to_ids = ENCODING.encode_messages_to_ids
