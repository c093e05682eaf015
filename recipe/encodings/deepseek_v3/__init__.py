"""DeepSeek-V3 encoding (V3 Dec 2024, V3-0324): the :data:`ENCODING` record, made from the
family's data row (``ROWS["deepseek_v3"]``) by :func:`recipe.encodings.v3_shared.family.record`.

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

from recipe.encodings.v3_shared.family import ROWS, record

__all__ = ["ENCODING"]

#: The family record.
ENCODING = record(ROWS["deepseek_v3"])
