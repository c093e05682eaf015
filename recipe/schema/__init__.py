"""JSON Schema work: strict-schema normalisation and constraint strings (:mod:`recipe.schema.strict`),
meta-schema checks and answer validation (:mod:`recipe.schema.validation`).

Used by the API adapters (strict tools, ``json_schema`` formats) and by the output driver (checking
a final answer). May import only :mod:`recipe.conversation`, :mod:`recipe.errors` and
:mod:`recipe.jsonfmt`; jsonschema itself is imported on first use.
"""
