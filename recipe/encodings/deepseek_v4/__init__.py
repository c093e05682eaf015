"""DeepSeek-V4 encoding (V4-Pro and V4-Flash share it): the :data:`ENCODING` record.

- ``render.render(conversation) -> Prompt``: the API path, deepseek-recipe 0.2.0 rules.
- ``reference.encode_messages(...)`` / ``encode_messages_to_ids(...)``: DeepSeek's public reference
  encoder semantics (``encoding_dsv4.py``) for training and evaluation pipelines.
- ``output.OutputParser``: completion token ids -> output events.
- ``grammar.build_grammar(spec, tokenizer)``: the grammar of an assistant turn (constrained decoding).

The parser and the reference encoder are imported on first use, so looking the record up costs
only the renderer.
"""

from __future__ import annotations

from recipe.encodings.base import family_record, lazy
from recipe.encodings.deepseek_v4.constants import SPECIAL_IDS
from recipe.encodings.deepseek_v4.render import RESUMABLE, render
from recipe.tokenizer import load_tokenizer

__all__ = ["ENCODING", "new_parser", "grammar"]

new_parser = lazy("recipe.encodings.deepseek_v4.output", "OutputParser", "A V4 output parser (arguments as OutputParser's).")
grammar = lazy("recipe.encodings.deepseek_v4.grammar", "build_grammar")

#: The model names of V4-Pro and V4-Flash, both spellings (its row in the encoding table).
MODELS = ("DeepSeek-V4-Pro", "DeepSeek-V4-Flash", "deepseek-v4-pro", "deepseek-v4-flash")

#: The DeepSeek-V4 family record.
ENCODING = family_record(__name__, render, new_parser, SPECIAL_IDS, load_tokenizer, MODELS, grammar=grammar,
                         resumable=RESUMABLE)
