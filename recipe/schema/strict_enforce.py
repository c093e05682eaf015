"""What the output grammar holds a strict schema to, and the check that it can hold it there.

A ``strict: true`` tool or json_schema response format promises output that satisfies the client's
schema. Its prompt shows the schema as deepseek-recipe normalises it (:mod:`recipe.schema.strict`,
which drops keywords outside its model: ``enum`` on numbers, ``const``, ``minItems``, ``$defs`` …);
the grammar is built from :func:`enforced_schema` instead — the client's schema with the strict
structure (every property required, no other property) and every keyword kept. :func:`check_strict`
refuses, as a 400 naming the field path, a strict schema that holds a keyword the grammar cannot enforce
(``pattern``, ``format``, ``multipleOf``, ``uniqueItems``, ``not``, a ``minItems`` above
:data:`~recipe.schema.json_grammar.MAX_ITEMS` …): the grammar is never looser than the schema it
claims to enforce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recipe.errors import RequestError

__all__ = ["RESTRICTING", "check_strict", "enforced_schema"]

#: JSON Schema keywords that restrict values (a note about any other keyword is about an annotation
#: or a keyword JSON Schema does not define, which validators ignore)
RESTRICTING = frozenset(
    "type enum const properties required additionalProperties items prefixItems additionalItems "
    "unevaluatedItems unevaluatedProperties contains minContains maxContains minItems maxItems "
    "uniqueItems minProperties maxProperties patternProperties propertyNames dependentRequired "
    "dependentSchemas dependencies allOf anyOf oneOf not if then else minLength maxLength pattern format "
    "minimum maximum exclusiveMinimum exclusiveMaximum multipleOf $ref $dynamicRef false object array "
    "parameter".split()
)
_NESTED_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_NESTED_ONE = ("items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames",
               "unevaluatedItems", "unevaluatedProperties")
_NESTED_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def enforced_schema(schema: Any) -> Any:
    """The client's ``schema`` with the strict structure: each object schema (``type`` ``object`` or
    ``properties``) gets ``required`` = all its properties and ``additionalProperties: false``; every
    other keyword kept, nested schemas likewise. A new value; ``schema`` is not changed."""
    if isinstance(schema, list):
        return [enforced_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NESTED_MAPS and isinstance(value, Mapping):
            out[key] = {k: enforced_schema(v) for k, v in value.items()}
        elif key in _NESTED_ONE or key in _NESTED_LISTS:
            out[key] = enforced_schema(value)
        else:
            out[key] = value
    t = schema.get("type")
    if t == "object" or (isinstance(t, list) and "object" in t) or isinstance(schema.get("properties"), Mapping):
        props = schema.get("properties")
        out["required"] = list(props) if isinstance(props, Mapping) else []
        if out.get("additionalProperties") is not False:
            out["additionalProperties"] = False
    return out


def check_strict(schema: Any, field: str, *, tool: bool, structure: bool = True) -> None:
    """Refuse a strict schema the output grammar would enforce more loosely than it reads.

    Args:
        schema: the client's schema (before strict normalisation).
        field: the schema's field path for errors (``tools[0].function.parameters``,
            ``response_format.json_schema.schema``, ``tools.0.input_schema``).
        tool: the schema of a tool's arguments (its properties are written as DSML parameters: a
            string property may be written raw) rather than of a JSON answer.
        structure: check :func:`enforced_schema` of ``schema`` (Chat / Responses strict); False
            checks ``schema`` as given (a Messages strict tool: optional properties stay optional).

    The schema is assumed valid (checked against its meta-schema first).

    Raises:
        RequestError: status 400, ``param`` the field path of the offending keyword.
    """
    from recipe.schema.json_grammar import JsonRules

    target = enforced_schema(schema) if structure else schema
    rules = JsonRules({}, ())
    rules.root = target
    props = target.get("properties") if isinstance(target, Mapping) else None
    if tool and isinstance(props, Mapping):
        for key, sub in props.items():
            rules.param_value(sub, f"$/properties/{key}", "</", ())
    else:
        rules.value(target, "$", target)
    for note in rules.unenforced:
        where, _, what = note.partition(": ")
        keyword = what.split(" ", 1)[0].strip("'")
        if keyword not in RESTRICTING:
            continue
        path = field + "".join(f".{p}" for p in where.split("/")[1:] if p)
        raise RequestError(
            f"{path}: `{what}` cannot be enforced by the output grammar of a strict schema; "
            "remove it, or send the schema with strict false (validated after the fact)",
            param=path,
        )
