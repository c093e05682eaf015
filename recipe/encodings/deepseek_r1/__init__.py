"""DeepSeek-R1 encoding (R1 Jan 2025, R1-0528): the :data:`ENCODING` record, made from the
family's data row (``ROWS["deepseek_r1"]``) by :func:`recipe.encodings.v3_shared.family.record`.

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

from recipe.encodings.v3_shared.family import ROWS, record

__all__ = ["ENCODING"]

#: The family record.
ENCODING = record(ROWS["deepseek_r1"])
