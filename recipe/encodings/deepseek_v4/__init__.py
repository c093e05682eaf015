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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from recipe.encodings.base import Encoding
from recipe.encodings.deepseek_v4.constants import EOS, SPECIAL_IDS
from recipe.encodings.deepseek_v4.render import RESUMABLE, render
from recipe.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from recipe.conversation import ParsingOptions
    from recipe.encodings.deepseek_v4.output import OutputParser
    from recipe.schema.turn import GrammarParts, TurnSpec
    from recipe.tokenizer import Tokenizer

__all__ = ["ENCODING", "new_parser", "encode_messages", "encode_messages_to_ids", "grammar"]


def new_parser(
    options: ParsingOptions,
    tokenizer: Tokenizer,
    *,
    tool_call_id: Callable[[int], str] | int | str | None = None,
    eos_token_ids: Sequence[int] = (SPECIAL_IDS[EOS],),
) -> OutputParser:
    """A V4 :class:`~recipe.encodings.deepseek_v4.output.OutputParser` (arguments as its constructor)."""
    from recipe.encodings.deepseek_v4.output import OutputParser

    return OutputParser(options, tokenizer, tool_call_id=tool_call_id, eos_token_ids=eos_token_ids)


def encode_messages(*args: Any, **kwargs: Any) -> str:
    """DeepSeek's reference ``encode_messages`` (V4); see :func:`.reference.encode_messages`."""
    from recipe.encodings.deepseek_v4.reference import encode_messages as run

    return run(*args, **kwargs)


def encode_messages_to_ids(*args: Any, **kwargs: Any) -> list[int]:
    """Token ids of the V4 reference prompt; see :func:`.reference.encode_messages_to_ids`."""
    from recipe.encodings.deepseek_v4.reference import encode_messages_to_ids as run

    return run(*args, **kwargs)


def grammar(spec: TurnSpec, tokenizer: Tokenizer) -> GrammarParts:
    """The DSML grammar of a V4 assistant turn; see :func:`.grammar.build_grammar`."""
    from recipe.encodings.deepseek_v4.grammar import build_grammar

    return build_grammar(spec, tokenizer)


#: The DeepSeek-V4 family record (model table rows: V4-Pro and V4-Flash, both spellings).
ENCODING = Encoding(
    name="deepseek_v4",
    render=render,
    new_parser=new_parser,
    encode_messages=encode_messages,
    encode_messages_to_ids=encode_messages_to_ids,
    special_tokens=SPECIAL_IDS,
    stop_tokens=(EOS,),
    models=("DeepSeek-V4-Pro", "DeepSeek-V4-Flash", "deepseek-v4-pro", "deepseek-v4-flash"),
    tokenizer=load_tokenizer,
    grammar=grammar,
    resumable=RESUMABLE,
)
