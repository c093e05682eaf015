"""JSON Schema work: strict-schema normalisation and constraint strings (:mod:`recipe.schema.strict`),
meta-schema checks and answer validation (:mod:`recipe.schema.validation`), and output grammars for
constrained decoding: the turn record (:mod:`recipe.schema.turn`), grammar nodes and their Lark /
structural-tag printers (:mod:`recipe.schema.grammar_ir`), JSON Schema rules
(:mod:`recipe.schema.json_grammar`), and :mod:`recipe.schema.constrain` (``output_grammar``,
``OutputMatcher``, ``check_output``).

Used by the API adapters (strict tools, ``json_schema`` formats), the output driver (checking a
final answer) and ``prepare`` (the grammar of a constrained turn). Imports the layers below it
(conversation, tokenizer, jsonfmt, errors); :mod:`recipe.schema.constrain` also looks model families
up in :mod:`recipe.encodings.table` (the families' grammar builders import the other grammar modules,
never ``constrain``). jsonschema and llguidance are imported on first use.
"""
