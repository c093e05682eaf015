"""DeepSeek-V3.2 encoding (V3.2, V3.2-Speciale): the :data:`ENCODING` record.

- ``reference.encode_messages(...)`` / ``encode_messages_to_ids(...)``: DeepSeek's
  ``encoding_dsv32.py`` semantics.
- ``render.render(conversation)``: the API path (the reference on the equivalent messages).
- Output: the DeepSeek-V4 parser (:mod:`recipe.encodings.deepseek_v4.output`) in its
  ``function_calls`` dialect: the same DSML, read as text (``｜DSML｜`` is no token of this vocabulary).

Thinking on or off per request; the V3 vocabulary.
"""

from __future__ import annotations

from recipe.encodings.base import family_record, lazy
from recipe.encodings.deepseek_v3_2.render import parsing, render
from recipe.encodings.specials import ASSISTANT, BOS, EOS, THINK_END, THINK_START, USER
from recipe.encodings.v3_shared.constants import SPECIAL_IDS
from recipe.tokenizer import load_v3_tokenizer

__all__ = ["ENCODING", "new_parser"]

new_parser = lazy("recipe.encodings.deepseek_v3_2.output", "new_parser")

#: The V3 vocabulary's ids of the special tokens V3.2's encoder writes.
_SPECIALS = {k: SPECIAL_IDS[k] for k in (BOS, EOS, USER, ASSISTANT, THINK_START, THINK_END)}

#: The model names of V3.2 and V3.2-Speciale (its row in the encoding table).
MODELS = ("deepseek-v3.2", "deepseek-v3.2-speciale", "DeepSeek-V3.2", "DeepSeek-V3.2-Speciale", "deepseek-ai/DeepSeek-V3.2",
          "deepseek-ai/DeepSeek-V3.2-Speciale")

#: The DeepSeek-V3.2 family record.
ENCODING = family_record(__name__, render, new_parser, _SPECIALS, load_v3_tokenizer, MODELS, parsing=parsing)
