"""DeepSeek-V3 encoding (V3 Dec 2024, V3-0324): the :data:`ENCODING` record, made from the
:data:`ROW` data row (:func:`recipe.encodings.v3_shared.family.record`).

- ``template.render_messages(messages, revision)``: the published chat templates (V3-2412, V3-0324),
  the reference encoder.
- The API path: the V3-0324 template on the equivalent messages
  (:func:`recipe.encodings.v3_shared.api.messages_of`). The template renders no tool definitions
  and no response format (they still reach a constrained decoder through the output constraint); a
  prefix assistant turn is continued (the prompt ends right after its content, transformers'
  ``continue_final_message``).
- Output: :mod:`recipe.encodings.v3_shared.output` with the fenced call syntax.

No thinking; the V3 vocabulary (:func:`recipe.tokenizer.load_v3_tokenizer`).
"""

from __future__ import annotations

from dataclasses import replace

from recipe.conversation import Conversation, ParsingOptions
from recipe.encodings.deepseek_v3.template import render_messages
from recipe.encodings.v3_shared.family import FENCED, TemplateFamily, record

__all__ = ["ENCODING", "ROW", "encode_messages", "encode_messages_to_ids", "parsing"]


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """V3 output is never reasoning, and the prompt never opens a tool-call block."""
    return replace(default, thinking_stage=None, starts_in_tool_calls=False)


#: The DeepSeek-V3 family's data row.
ROW = TemplateFamily(
    name="deepseek_v3", label="DeepSeek-V3", template=render_messages, revision="V3-0324", api_revision="V3-0324",
    syntax=FENCED, thinking="never", parsing=parsing,
    models=("deepseek-v3", "deepseek-v3-0324", "DeepSeek-V3", "DeepSeek-V3-0324",
            "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-0324"),
)

#: The DeepSeek-V3 family record.
ENCODING = record(ROW)
encode_messages = ENCODING.encode_messages
encode_messages_to_ids = ENCODING.encode_messages_to_ids
