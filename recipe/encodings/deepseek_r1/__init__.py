"""DeepSeek-R1 encoding (R1 Jan 2025, R1-0528): the :data:`ENCODING` record.

- ``template.render_messages(messages, revision)``: the published chat templates (R1-2501, R1-2502, R1-0528).
- ``render.render(conversation)``: the API path (the R1-0528 template on the equivalent messages).
- Output: :mod:`recipe.encodings.v3_shared.output` with the fenced call syntax, reasoning first.

Always thinking; the V3 vocabulary.
"""

from __future__ import annotations

from typing import Any

from recipe.encodings.base import Encoding
from recipe.encodings.deepseek_r1.render import parsing, render
from recipe.encodings.v3_shared.constants import EOS, SPECIAL_IDS
from recipe.encodings.v3_shared.family import FENCED, markup_parser, to_ids
from recipe.tokenizer import load_v3_tokenizer

__all__ = ["ENCODING", "encode_messages", "encode_messages_to_ids"]


def _render(messages: Any, revision: str = "R1-0528", **kwargs: Any) -> Any:
    from recipe.encodings.deepseek_r1.template import render_messages

    return render_messages(messages, revision, **kwargs)


def encode_messages(messages: Any, revision: str = "R1-0528", **kwargs: Any) -> str:
    """The prompt text of DeepSeek-R1's chat template ``revision``; see :mod:`.template`."""
    return _render(messages, revision, **kwargs).text


encode_messages_to_ids = to_ids(_render)

#: The DeepSeek-R1 family record.
ENCODING = Encoding(
    name="deepseek_r1",
    render=render,
    new_parser=markup_parser(FENCED),
    encode_messages=encode_messages,
    encode_messages_to_ids=encode_messages_to_ids,
    special_tokens=SPECIAL_IDS,
    stop_tokens=(EOS,),
    models=("deepseek-r1", "deepseek-r1-0528", "DeepSeek-R1", "DeepSeek-R1-0528",
            "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528"),
    tokenizer=load_v3_tokenizer,
    thinking="always",
    parsing=parsing,
)
