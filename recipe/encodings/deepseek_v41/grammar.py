"""The grammar of a DeepSeek-V4.1 assistant turn, for constrained decoding.

V4.1 writes V4's output format (:mod:`recipe.encodings.deepseek_v4.grammar`) with the spaced DSML tag
names (``<｜DSML｜ calls>``, `` invoke``, `` parameter``; ``｜DSML｜`` is the same marker token), as
its prompt's tools block teaches and its required / named prefill opens (``<｜DSML｜ calls>\\n``).
Only that spelling is in the grammar: the output parser reads V4's too (every model reads every spelling, mixed
blocks), but a constrained decoder holds the model to the format its prompt asks for, as the V4
grammar accepts only V4's spelling. Free text also excludes V4.1's own template tokens
(``<｜System｜>``, ``<｜image｜>``) besides V4's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recipe.encodings.deepseek_v4.grammar import DsmlSpelling, build_grammar
from recipe.encodings.deepseek_v41.constants import TEMPLATE_SPECIALS

if TYPE_CHECKING:
    from recipe.schema.turn import GrammarParts, TurnSpec
    from recipe.tokenizer import Tokenizer

__all__ = ["V41_SPELLING", "grammar"]

#: DeepSeek-V4.1 (Flash): a leading space in each tag name (deepseek-recipe 0.2.0, ``encoding_dsv41.py``).
V41_SPELLING = DsmlSpelling(block=" calls", invoke=" invoke", parameter=" parameter", template_specials=TEMPLATE_SPECIALS)


def grammar(spec: TurnSpec, tokenizer: Tokenizer) -> GrammarParts:
    """The DSML grammar of a V4.1 assistant turn (:func:`~recipe.encodings.deepseek_v4.grammar.
    build_grammar` in :data:`V41_SPELLING`); markers are ``tokenizer``'s special-token ids."""
    return build_grammar(spec, tokenizer, V41_SPELLING)
