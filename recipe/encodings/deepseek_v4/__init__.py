"""DeepSeek-V4 encoding (V4-Pro and V4-Flash share it).

- ``render.render(conversation) -> Prompt``: the API path, deepseek-recipe 0.2.0 rules.
- ``reference.encode_messages(...)`` / ``encode_messages_to_ids(...)``: DeepSeek's public reference
  encoder semantics for training and evaluation pipelines.
- ``output.OutputParser``: completion token ids -> output events.
"""

from recipe.encodings.deepseek_v4.reference import (
    encode_messages,
    encode_messages_to_ids,
)
from recipe.encodings.deepseek_v4.render import render as render_conversation

__all__ = ["render_conversation", "encode_messages", "encode_messages_to_ids"]
