"""DeepSeek-V3.1 encoding (V3.1, V3.1-Terminus, V3.2-Exp): the :data:`ENCODING` record, made from
the family's data row
(``ROWS[...]`` in :mod:`recipe.encodings.v3_shared.family`, made into a record by its :func:`record`).

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

from recipe.encodings.v3_shared.family import ROWS, record

__all__ = ["ENCODING"]

#: The family record.
ENCODING = record(ROWS["deepseek_v3_1"])
