"""DeepSeek-V3.2 encoding (V3.2, V3.2-Speciale): the :data:`ENCODING` record.

- ``reference.encode_messages(...)`` / ``encode_messages_to_ids(...)``: DeepSeek's
  ``encoding_dsv32.py`` semantics.
- ``render.render(conversation)``: the API path (the reference on the equivalent messages).
- Output: the DeepSeek-V4 parser (:mod:`recipe.encodings.deepseek_v4.output`) in its
  ``function_calls`` dialect: the same DSML, read as text (``｜DSML｜`` is no token of this vocabulary).

Thinking on or off per request; the V3 vocabulary.
"""

from __future__ import annotations

from recipe.encodings.base import lazy, with_reference
from recipe.encodings.deepseek_v3_2.render import parsing, render
from recipe.encodings.v3_shared.constants import EOS, SPECIAL_IDS
from recipe.tokenizer import load_v3_tokenizer

__all__ = ["ENCODING", "new_parser"]

new_parser = lazy("recipe.encodings.deepseek_v3_2.output", "new_parser")

#: The DeepSeek-V3.2 family record.
ENCODING = with_reference(
    "recipe.encodings.deepseek_v3_2.reference",
    name="deepseek_v3_2",
    render=render,
    new_parser=new_parser,
    special_tokens={k: SPECIAL_IDS[k] for k in ("<｜begin▁of▁sentence｜>", EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>")},
    stop_tokens=(EOS,),
    models=("deepseek-v3.2", "deepseek-v3.2-speciale", "DeepSeek-V3.2", "DeepSeek-V3.2-Speciale",
            "deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Speciale"),
    tokenizer=load_v3_tokenizer,
    parsing=parsing,
)
