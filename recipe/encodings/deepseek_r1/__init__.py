"""DeepSeek-R1 encoding (R1 Jan 2025, R1-0528): the :data:`ENCODING` record, made from the
:data:`ROW` data row (:func:`recipe.encodings.v3_shared.family.record`).

- ``template.render_messages(messages, revision)``: the published chat templates (R1-2501, R1-2502,
  R1-0528), the reference encoder.
- The API path: the R1-0528 template on the equivalent messages
  (:func:`recipe.encodings.v3_shared.api.messages_of`). R1 always reasons: the template has no
  switch, the model opens ``<think>`` itself and history reasoning is cut from the content
  (``split('</think>')[-1]``; ``reasoning_content`` is not rendered). Tool definitions and response
  formats are not rendered (the template has no place for them). A prefix assistant turn is
  continued right after its (cut) content.
- Output: :mod:`recipe.encodings.v3_shared.output` with the fenced call syntax, reasoning first.

Always thinking; the V3 vocabulary.
"""

from __future__ import annotations

from dataclasses import replace

from recipe.conversation import AssistantMessage, Conversation, ParsingOptions
from recipe.encodings.deepseek_r1.template import render_messages
from recipe.encodings.v3_shared.family import FENCED, TemplateFamily, record

__all__ = ["ENCODING", "ROW", "encode_messages", "encode_messages_to_ids", "parsing"]


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """R1's output starts in its reasoning (the model writes ``<think>`` itself), whatever the request
    said; a prefix turn continues the reasoning when its rendered text has an open ``<think>``, else
    the answer. The prompt never opens a tool-call block."""
    stage = "reasoning"
    last = conv.messages[-1] if conv.messages else None
    if type(last) is AssistantMessage and last.prefix:
        shown = (last.content or "").split("</think>")[-1]
        stage = "reasoning_continuation" if "<think>" in shown else "content_continuation"
    return replace(default, thinking_stage=stage, starts_in_tool_calls=False)


#: The DeepSeek-R1 family's data row.
ROW = TemplateFamily(
    name="deepseek_r1", label="DeepSeek-R1", template=render_messages, revision="R1-0528", api_revision="R1-0528",
    syntax=FENCED, thinking="always", parsing=parsing,
    models=("deepseek-r1", "deepseek-r1-0528", "DeepSeek-R1", "DeepSeek-R1-0528",
            "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528"),
)

#: The DeepSeek-R1 family record.
ENCODING = record(ROW)
encode_messages = ENCODING.encode_messages
encode_messages_to_ids = ENCODING.encode_messages_to_ids
