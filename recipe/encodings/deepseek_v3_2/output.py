"""DeepSeek-V3.2's output parser: DeepSeek-V4's (:mod:`recipe.encodings.deepseek_v4.output`) in its
``function_calls`` dialect, the same DSML read as text (``｜DSML｜`` is no token of the V3 vocabulary)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.encodings.deepseek_v4.output_dsml import OPEN, Spelling

if TYPE_CHECKING:
    from recipe.conversation import ParsingOptions
    from recipe.tokenizer import Tokenizer

__all__ = ["new_parser", "SPELLINGS"]

#: V3.2's DSML: V4's tags with the block named ``function_calls``.
SPELLINGS = (Spelling(OPEN, "function_calls", "invoke", "parameter"),)


def new_parser(
    options: ParsingOptions,
    tokenizer: Tokenizer,
    *,
    tool_call_id: Callable[[int], str] | int | str | None = None,
    eos_token_ids: Sequence[int] = (1,),
) -> OutputParser:
    """The V4 output parser reading DeepSeek-V3.2's ``<｜DSML｜function_calls>`` blocks (arguments as
    :class:`~recipe.encodings.deepseek_v4.output.OutputParser`'s)."""
    return OutputParser(options, tokenizer, tool_call_id=tool_call_id, eos_token_ids=eos_token_ids, spellings=SPELLINGS)
