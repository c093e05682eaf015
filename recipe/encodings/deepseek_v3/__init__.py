"""DeepSeek-V3 encoding (V3 Dec 2024, V3-0324): the :data:`ENCODING` record.

- ``template.render_messages(messages, revision)``: the published chat templates (V3-2412, V3-0324).
- ``render.render(conversation)``: the API path (the V3-0324 template on the equivalent messages).
- Output: :mod:`recipe.encodings.v3_shared.output` with the fenced call syntax.

No thinking; the V3 vocabulary (:func:`recipe.tokenizer.load_v3_tokenizer`).
"""

from __future__ import annotations

from typing import Any

from recipe.encodings.base import Encoding
from recipe.encodings.deepseek_v3.render import parsing, render
from recipe.encodings.v3_shared.constants import EOS, SPECIAL_IDS
from recipe.encodings.v3_shared.family import FENCED, markup_parser, to_ids
from recipe.tokenizer import load_v3_tokenizer

__all__ = ["ENCODING", "encode_messages", "encode_messages_to_ids"]


def _render(messages: Any, revision: str = "V3-0324", **kwargs: Any) -> Any:
    from recipe.encodings.deepseek_v3.template import render_messages

    return render_messages(messages, revision, **kwargs)


def encode_messages(messages: Any, revision: str = "V3-0324", **kwargs: Any) -> str:
    """The prompt text of DeepSeek-V3's chat template ``revision``; see :mod:`.template`."""
    return _render(messages, revision, **kwargs).text


encode_messages_to_ids = to_ids(_render)

#: The DeepSeek-V3 family record.
ENCODING = Encoding(
    name="deepseek_v3",
    render=render,
    new_parser=markup_parser(FENCED),
    encode_messages=encode_messages,
    encode_messages_to_ids=encode_messages_to_ids,
    special_tokens=SPECIAL_IDS,
    stop_tokens=(EOS,),
    models=("deepseek-v3", "deepseek-v3-0324", "DeepSeek-V3", "DeepSeek-V3-0324",
            "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-0324"),
    tokenizer=load_v3_tokenizer,
    thinking="never",
    parsing=parsing,
)
