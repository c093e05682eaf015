"""DeepSeek-V3.2 encoding (V3.2, V3.2-Speciale): the :data:`ENCODING` record.

- ``reference.encode_messages(...)`` / ``encode_messages_to_ids(...)``: DeepSeek's
  ``encoding_dsv32.py`` semantics.
- ``render.render(conversation)``: the API path (the reference on the equivalent messages).
- Output: the DeepSeek-V4 parser (:mod:`recipe.encodings.deepseek_v4.output`) in its
  ``function_calls`` dialect: the same DSML, read as text (``｜DSML｜`` is no token of this vocabulary).

Thinking on or off per request; the V3 vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from recipe.encodings.base import Encoding
from recipe.encodings.deepseek_v3_2.render import parsing, render
from recipe.encodings.v3_shared.constants import EOS, SPECIAL_IDS
from recipe.tokenizer import load_v3_tokenizer

if TYPE_CHECKING:
    from recipe.conversation import ParsingOptions
    from recipe.encodings.deepseek_v4.output import OutputParser
    from recipe.tokenizer import Tokenizer

__all__ = ["ENCODING", "new_parser", "encode_messages", "encode_messages_to_ids"]


def new_parser(
    options: ParsingOptions,
    tokenizer: Tokenizer,
    *,
    tool_call_id: Callable[[int], str] | int | str | None = None,
    eos_token_ids: Sequence[int] = (SPECIAL_IDS[EOS],),
) -> OutputParser:
    """The V4 output parser reading DeepSeek-V3.2's ``<｜DSML｜function_calls>`` blocks."""
    from recipe.encodings.deepseek_v4.output import OutputParser
    from recipe.encodings.deepseek_v4.output_dsml import OPEN, Spelling

    # V3.2's DSML: V4's tags with the block named ``function_calls`` (dialects are cached by value)
    spellings = (Spelling(OPEN, "function_calls", "invoke", "parameter"),)
    return OutputParser(options, tokenizer, tool_call_id=tool_call_id, eos_token_ids=eos_token_ids,
                        spellings=spellings)


def encode_messages(*args: Any, **kwargs: Any) -> str:
    """DeepSeek's V3.2 ``encode_messages``; see :func:`.reference.encode_messages`."""
    from recipe.encodings.deepseek_v3_2.reference import encode_messages as run

    return run(*args, **kwargs)


def encode_messages_to_ids(*args: Any, **kwargs: Any) -> list[int]:
    """Token ids of the V3.2 reference prompt; see :func:`.reference.encode_messages_to_ids`."""
    from recipe.encodings.deepseek_v3_2.reference import encode_messages_to_ids as run

    return run(*args, **kwargs)


#: The DeepSeek-V3.2 family record.
ENCODING = Encoding(
    name="deepseek_v3_2",
    render=render,
    new_parser=new_parser,
    encode_messages=encode_messages,
    encode_messages_to_ids=encode_messages_to_ids,
    special_tokens={k: SPECIAL_IDS[k] for k in ("<｜begin▁of▁sentence｜>", EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>")},
    stop_tokens=(EOS,),
    models=("deepseek-v3.2", "deepseek-v3.2-speciale", "DeepSeek-V3.2", "DeepSeek-V3.2-Speciale",
            "deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Speciale"),
    tokenizer=load_v3_tokenizer,
    parsing=parsing,
)
