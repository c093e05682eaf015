"""Helpers the four pre-V4 family records share: their parser factories and reference wrappers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from recipe.encodings.v3_shared.constants import BARE, EOS, FENCED, SPECIAL_IDS
from recipe.prompt import encode_prompt
from recipe.tokenizer import load_v3_tokenizer

if TYPE_CHECKING:
    from recipe.conversation import ParsingOptions
    from recipe.encodings.base import OutputParser, ParserFactory
    from recipe.prompt import Prompt
    from recipe.tokenizer import Tokenizer

__all__ = ["markup_parser", "to_ids", "FENCED", "BARE"]


def markup_parser(syntax: str) -> ParserFactory:
    """A parser factory for the ``<｜tool▁calls▁begin｜>`` formats (:mod:`.output`) with ``syntax``."""

    def new_parser(
        options: ParsingOptions,
        tokenizer: Tokenizer,
        *,
        tool_call_id: Callable[[int], str] | int | str | None = None,
        eos_token_ids: Sequence[int] = (SPECIAL_IDS[EOS],),
    ) -> OutputParser:
        from recipe.encodings.v3_shared.output import OutputParser

        return OutputParser(options, tokenizer, syntax=syntax, tool_call_id=tool_call_id, eos_token_ids=eos_token_ids)

    new_parser.__doc__ = f"An output parser for the {syntax} ``<｜tool▁calls▁begin｜>`` call syntax."
    return new_parser


def to_ids(render: Callable[..., Prompt]) -> Callable[..., list[int]]:
    """``render``'s prompt as token ids under the V3 vocabulary (``tokenizer=`` to use another)."""

    def encode(*args: Any, tokenizer: Tokenizer | None = None, **kwargs: Any) -> list[int]:
        return encode_prompt(tokenizer if tokenizer is not None else load_v3_tokenizer(), render(*args, **kwargs))

    encode.__doc__ = f"Token ids of :func:`{render.__module__}.{render.__name__}` (template specials only)."
    return encode
