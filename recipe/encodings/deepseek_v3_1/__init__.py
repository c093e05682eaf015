"""DeepSeek-V3.1 encoding (V3.1, V3.1-Terminus, V3.2-Exp): the :data:`ENCODING` record.

- ``template.render_messages(messages, revision, tools=…, thinking=…)``: the published chat
  templates (V3.1, V3.2-Exp) and the model card's tools block.
- ``render.render(conversation)``: the API path (the V3.2-Exp revision on the equivalent messages).
- Output: :mod:`recipe.encodings.v3_shared.output` with the bare call syntax.

Thinking on or off per request; the V3 vocabulary.
"""

from __future__ import annotations

from typing import Any

from recipe.encodings.base import Encoding
from recipe.encodings.deepseek_v3_1.render import parsing, render
from recipe.encodings.v3_shared.constants import EOS, SPECIAL_IDS
from recipe.encodings.v3_shared.family import BARE, markup_parser, to_ids
from recipe.tokenizer import load_v3_tokenizer

__all__ = ["ENCODING", "encode_messages", "encode_messages_to_ids"]


def _render(messages: Any, revision: str = "V3.1", **kwargs: Any) -> Any:
    from recipe.encodings.deepseek_v3_1.template import render_messages

    return render_messages(messages, revision, **kwargs)


def encode_messages(messages: Any, revision: str = "V3.1", **kwargs: Any) -> str:
    """The prompt text of DeepSeek-V3.1's chat template ``revision``; see :mod:`.template`."""
    return _render(messages, revision, **kwargs).text


encode_messages_to_ids = to_ids(_render)

#: The DeepSeek-V3.1 family record (V3.2-Exp shares its format).
ENCODING = Encoding(
    name="deepseek_v3_1",
    render=render,
    new_parser=markup_parser(BARE),
    encode_messages=encode_messages,
    encode_messages_to_ids=encode_messages_to_ids,
    special_tokens=SPECIAL_IDS,
    stop_tokens=(EOS,),
    models=("deepseek-v3.1", "deepseek-v3.1-terminus", "deepseek-v3.2-exp", "DeepSeek-V3.1", "DeepSeek-V3.1-Terminus",
            "DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.1-Terminus",
            "deepseek-ai/DeepSeek-V3.2-Exp"),
    tokenizer=load_v3_tokenizer,
    parsing=parsing,
)
