"""Pieces shared by the DeepSeek families that use the V3 vocabulary (V3, R1, V3.1, V3.2).

Not a model family itself (it exports no :class:`~recipe.encodings.base.Encoding`):

* :mod:`.constants` — the special-token spellings these templates emit and their ids in the V3
  vocabulary (:func:`recipe.tokenizer.load_v3_tokenizer`);
* :mod:`.segments` — the segment accumulator the template emulations write into (template text
  as :class:`~recipe.prompt.Special` / :class:`~recipe.prompt.Text`, message text always ``Text``),
  message starts, the ``continue_final_message`` cut, and :class:`ChatTemplateError`;
* :mod:`.tool_syntax` — the incremental output parser for the ``<｜tool▁calls▁begin｜>`` call
  syntaxes of V3 / R1 (fenced JSON) and V3.1 (bare JSON).
"""

from recipe.encodings.v3_shared.segments import ChatTemplateError

__all__ = ["ChatTemplateError"]
