"""DeepSeek-V4.1 encoding (V4.1-Flash): the :data:`ENCODING` record.

- ``render.render(conversation) -> Prompt``: the API path, deepseek-recipe 0.2.0's V4.1 rules.
- ``reference.encode_messages(...)`` / ``encode_messages_to_ids(...)``: DeepSeek's reference
  encoder semantics (``encoding_dsv41.py``) for training and evaluation pipelines.
- the output parser is V4's (:mod:`recipe.encodings.deepseek_v4.output`): it reads both DSML
  spellings, as deepseek-recipe's does for either model.
- ``grammar.grammar(spec, tokenizer)``: the output grammar (constrained decoding), V4's builder in
  V4.1's spaced DSML spelling.

Token ids: V4.1 emits ``<｜System｜>`` and an image token, which the embedded vocabulary
(DeepSeek-V4's) lacks, and no V4.1 ``tokenizer.json`` ships with recipe. With the embedded
vocabulary ``prepare`` gives the prompt and its segments but no ids (``prep.token_ids`` raises
:class:`~recipe.tokenizer.MissingSpecialTokenError`); with the model's own vocabulary
(``load_tokenizer(path)``, ``--tokenizer PATH``) the ids are exact. The output grammar's text
(Lark, structural tag) is built with either vocabulary (its markers, ``｜DSML｜``, ``</think>`` and
EOS, are tokens V4.1 shares with V4); a token-mask matcher (``OutputMatcher``, ``check_output``)
needs V4.1's vocabulary and raises ``MissingSpecialTokenError`` without it.
"""

from __future__ import annotations

from recipe.encodings.base import RequestRules, family_record, lazy
from recipe.encodings.deepseek_v4 import new_parser
from recipe.encodings.deepseek_v41.constants import IMAGE, SPECIAL_IDS, SYSTEM
from recipe.encodings.deepseek_v41.render import RESUMABLE, parsing, render
from recipe.tokenizer import load_tokenizer

__all__ = ["ENCODING", "VOCABULARY_HINT", "grammar"]

#: How to supply a V4.1 vocabulary (the end of the missing-special-token error).
VOCABULARY_HINT = (
    "the embedded vocabulary is DeepSeek-V4's and no DeepSeek-V4.1 tokenizer.json ships with recipe; "
    "pass the model's own tokenizer.json (recipe.load_tokenizer(path) and prepare(..., tokenizer=...), "
    "or --tokenizer PATH on the command line) to get token ids"
)

grammar = lazy("recipe.encodings.deepseek_v41.grammar", "grammar")

#: V4.1's request conversion (deepseek-recipe's V4.1 rules).
REQUEST_RULES = RequestRules(system_in_place=True, image_token=IMAGE, deferred_tools=True, top_p="v41", apply_patch="v41",
                             namespaces="v41", tool_search=True)

#: The model names of V4.1-Flash, both spellings (its row in the encoding table).
MODELS = ("DeepSeek-V4.1-Flash", "deepseek-v4.1-flash")

#: The DeepSeek-V4.1 family record.
ENCODING = family_record(__name__, render, new_parser, SPECIAL_IDS, load_tokenizer, MODELS, grammar=grammar,
                         parsing=parsing, request=REQUEST_RULES, required_specials=(SYSTEM,),
                         vocabulary_hint=VOCABULARY_HINT, resumable=RESUMABLE)
