"""JSON Schema validation with the ``jsonschema`` library, matching deepseek-recipe 0.2.0.

Source: the parity target as observed (behaviour map §1.5, §1.7) plus probes recorded in
``tests/test_structured.py``.

* **Non-strict schemas** (tools and json_schema response formats without ``strict: true``): the
  schema must be a valid JSON Schema (checked against the meta-schema its ``$schema`` names,
  2020-12 by default, with the Rust ``jsonschema`` crate's error wording and order), local
  ``$ref`` pointers must resolve, and a tool's schema must have ``"type": "object"``. See
  :func:`validate_tool_parameters` and :func:`validate_response_schema`. (Strict schemas are
  normalised instead: :mod:`recipe.schema.strict`.)
* **Instances** (a schema-checked answer): :func:`validate_instance` lists the errors of a JSON
  value against a schema, with the Python library's wording.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import jsonschema
from jsonschema import validators as _jsv

from recipe.errors import RequestError
from recipe.jsonfmt import dumps_compact, format_float

__all__ = ["validate_instance", "validate_response_schema", "validate_tool_parameters"]


# ---------------------------------------------------------------------------------------------
# Non-strict validation: the meta-schema, as the Rust `jsonschema` crate reports it
# ---------------------------------------------------------------------------------------------

#: Order in which the Rust crate lists type names.
_TYPE_ORDER = ("array", "boolean", "integer", "null", "number", "object", "string")
_GC_NAMES = frozenset(
    "L Lu Ll Lt Lm Lo LC M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn "
    "Letter Mark Number Punctuation Symbol Separator Other Alphabetic White_Space Any ASCII Latin Greek Cyrillic "
    "Han Hiragana Katakana Arabic Hebrew Hangul Thai Devanagari Emoji".split()
)
_ECMA_TOKEN_RE = re.compile(r"\\[pP]\{([^}]*)\}|\\[zZ]|\(\?<([A-Za-z_][A-Za-z0-9_]*)>|\\.|\{,|.", re.S)


def _is_ecma_regex(pattern: str) -> bool:
    """Approximates the Rust crate's ``regex`` format check (ECMA-262 translated for Rust)."""
    parts: list[str] = []
    for m in _ECMA_TOKEN_RE.finditer(pattern):
        tok = m.group(0)
        if tok.startswith(("\\p", "\\P")):
            name = m.group(1).split("=")[-1]
            if name not in _GC_NAMES:
                return False
            parts.append(".")
        elif tok == "\\Z" or tok == "{,":
            return False
        elif tok == "\\z":
            parts.append("\\Z")
        elif m.group(2) is not None:
            parts.append(f"(?P<{m.group(2)}>")
        else:
            parts.append(tok)
    try:
        re.compile("".join(parts))
    except (re.error, OverflowError, RecursionError):
        return False
    return True


def _properties_in_instance_order(validator: Any, properties: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for name, value in instance.items():
        if name in properties:
            yield from validator.descend(value, properties[name], path=name, schema_path=name)


def _additional_properties_in_instance_order(validator: Any, ap: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object") or not validator.is_type(ap, "object"):
        return  # the meta-schemas only use schema-valued additionalProperties
    props = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for name, value in instance.items():
        if name in props or any(re.search(p, name) for p in patterns):
            continue
        yield from validator.descend(value, ap, path=name)


def _items_after_unique(base: Any) -> Any:
    """``items`` that defers to ``uniqueItems`` next to it: for an array with repeated items the
    crate reports ``[1,1] has non-unique elements`` before its items' own errors."""

    def items(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if schema.get("uniqueItems") is True and validator.is_type(instance, "array") and any(
                validator.VALIDATORS["uniqueItems"](validator, True, instance, schema)):
            return  # (uniqueItems, checked after it in the meta-schemas, reports)
        yield from base(validator, value, instance, schema)

    return items


def _meta_validator(cls: Any) -> Any:
    ext = _jsv.extend(
        cls,
        {
            "properties": _properties_in_instance_order,
            "additionalProperties": _additional_properties_in_instance_order,
            "items": _items_after_unique(cls.VALIDATORS["items"]),
        },
    )
    init_fields = [(f.name, f.alias) for f in attrs.fields(ext) if f.init]

    def evolve(self: Any, **changes: Any) -> Any:
        # Stay in this class even where a sub-resource names its own ``$schema`` (the vocabulary
        # meta-schemas do); jsonschema would otherwise switch back to the stock validator.
        changes.setdefault("schema", self.schema)
        for attr_name, init_name in init_fields:
            changes.setdefault(init_name, getattr(self, attr_name))
        return ext(**changes)

    ext.evolve = evolve
    meta = cls.META_SCHEMA
    if "allOf" in meta and "properties" in meta:  # the crate checks the top-level properties first
        order = ["type", "properties"]
        meta = {**{k: meta[k] for k in order if k in meta}, **{k: v for k, v in meta.items() if k not in order}}
    return ext(meta)


_DRAFTS: dict[str, Any] = {
    "json-schema.org/draft/2020-12/schema": jsonschema.Draft202012Validator,
    "json-schema.org/draft/2019-09/schema": jsonschema.Draft201909Validator,
    "json-schema.org/draft-07/schema": jsonschema.Draft7Validator,
    "json-schema.org/draft-06/schema": jsonschema.Draft6Validator,
    "json-schema.org/draft-04/schema": jsonschema.Draft4Validator,
    "json-schema.org/schema": jsonschema.Draft202012Validator,
}
_META_VALIDATORS: dict[Any, Any] = {}


def _draft_for(schema: Any) -> Any:
    """The validator class for ``$schema``; ``str`` = an unknown meta-schema's error message."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return jsonschema.Draft202012Validator
    key = re.sub(r"^https?://", "", uri).rstrip("#")
    cls = _DRAFTS.get(key)
    if cls is None:
        return f"Unknown meta-schema: '{uri}'. Custom meta-schemas must be registered in the registry before use"
    return cls


def _fmt_num(v: Any) -> str:
    return format_float(v) if isinstance(v, float) else str(v)


def _meta_message(error: Any) -> str:
    """The Rust crate's wording for a Python ``jsonschema`` error."""
    kind, value, inst = error.validator, error.validator_value, dumps_compact(error.instance)
    if kind == "type":
        types = [value] if isinstance(value, str) else sorted(value, key=_TYPE_ORDER.index)
        quoted = ", ".join(f'"{t}"' for t in types)
        return f"{inst} is not of type{'s' if len(types) > 1 else ''} {quoted}"
    if kind in ("anyOf", "oneOf"):
        return f"{inst} is not valid under any of the schemas listed in the '{kind}' keyword"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        relation = "less than" if "inimum" in kind else "greater than"
        equal = " or equal to" if kind.startswith("exclusive") else ""
        bound = "minimum" if "inimum" in kind else "maximum"
        return f"{inst} is {relation}{equal} the {bound} of {_fmt_num(value)}"
    if kind in ("minItems", "maxItems"):
        word = "less" if kind == "minItems" else "more"
        return f"{inst} has {word} than {value} item{'' if value == 1 else 's'}"
    if kind == "uniqueItems":
        return f"{inst} has non-unique elements"
    if kind == "pattern":
        return f'{inst} does not match "{value}"'
    if kind == "format":
        return f'{inst} is not a "{value}"'
    if kind == "required":
        missing = next((p for p in value if p not in error.instance), "")
        return f'"{missing}" is a required property'
    if kind in ("dependencies", "dependentRequired"):
        for prop, deps in value.items():
            if prop in error.instance and isinstance(deps, list):
                missing = next((d for d in deps if d not in error.instance), None)
                if missing is not None:
                    return f'"{missing}" is a required property'
    if kind == "enum":
        return f"{inst} is not one of {dumps_compact(value)}"
    if kind == "const":
        return f"{dumps_compact(value)} was expected"
    return error.message


_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def _compile_problem(root: Any) -> str | None:
    """What the Rust crate's schema compilation rejects after the meta-schema passed.

    Walks the schema in document order: a ``pattern`` that is not a valid regex
    (``"(" is not a "regex"``), a ``patternProperties`` key that is not (the crate shows the
    property's *value*), and a local ``$ref`` (``#/pointer`` or ``#anchor``) that does not resolve.
    Remote references and ``$id`` URI syntax are not checked.
    """
    anchors: set[str] | None = None

    def ref_problem(ref: str) -> str | None:
        nonlocal anchors
        if not ref.startswith("#") or ref == "#":
            return None
        if not ref.startswith("#/"):
            if anchors is None:
                anchors = set()
                collect(root)
            return None if ref[1:] in anchors else f"Anchor '{ref[1:]}' does not exist"
        target: Any = root
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return f"Pointer '{ref[1:]}' does not exist"
        return None

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
                    anchors.add(value)  # type: ignore[union-attr]
                elif key not in _DATA_KEYWORDS:
                    collect(value)
        elif isinstance(node, list):
            for item in node:
                collect(item)

    def visit(node: Any) -> str | None:
        if isinstance(node, list):
            for item in node:
                problem = visit(item)
                if problem is not None:
                    return problem
            return None
        if not isinstance(node, dict):
            return None
        for key, value in node.items():
            problem = None
            if key in _DATA_KEYWORDS:
                continue
            if key == "pattern" and isinstance(value, str):
                problem = None if _is_ecma_regex(value) else f'{dumps_compact(value)} is not a "regex"'
            elif key == "$ref" and isinstance(value, str):
                problem = ref_problem(value)
            elif key == "patternProperties" and isinstance(value, dict):
                for name, sub in value.items():
                    problem = (None if _is_ecma_regex(name) else f'{dumps_compact(sub)} is not a "regex"') or visit(sub)
                    if problem is not None:
                        break
            else:
                problem = visit(value)
            if problem is not None:
                return problem
        return None

    return visit(root)


def _schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a usable JSON Schema (parity wording), or None."""
    cls = _draft_for(schema)
    if isinstance(cls, str):
        return cls
    validator = _META_VALIDATORS.get(cls)
    if validator is None:
        validator = _META_VALIDATORS[cls] = _meta_validator(cls)
    error = next(iter(validator.iter_errors(schema)), None)
    if error is not None:
        return _meta_message(error)
    return _compile_problem(schema)


def validate_tool_parameters(parameters: Any, tool_name: str) -> None:
    """Check a non-strict tool's ``parameters`` as deepseek-recipe 0.2.0 does (§1.5).

    ``None`` (not given) is accepted. Otherwise the value must be a valid JSON Schema (meta-schema
    of its ``$schema``, 2020-12 by default; local ``$ref`` pointers must resolve) and its ``type``
    must be ``"object"``.

    Raises:
        RequestError: stage "convert", status 400, ``Invalid schema for function '<name>': <why>``;
            ``<why>`` is the Rust jsonschema crate's message (``5 is not of type "object"``,
            ``"x" is not of types "boolean", "object"``, ``-1 is less than the minimum of 0`` …) or
            ``schema must be a JSON Schema of 'type: "object"', got 'type: "string"'.`` (``null``
            when ``type`` is missing).
    """
    if parameters is None:
        return
    problem = _schema_problem(parameters)
    if problem is None:
        t = parameters.get("type") if isinstance(parameters, dict) else None
        if t == "object":
            return
        got = "null" if t is None else dumps_compact(t)
        problem = f"schema must be a JSON Schema of 'type: \"object\"', got 'type: {got}'."
    raise RequestError(f"Invalid schema for function '{tool_name}': {problem}")


def validate_response_schema(schema: Any) -> None:
    """Check a non-strict json_schema response format's schema (meta-schema and local refs only).

    Raises:
        RequestError: stage "convert", status 400, ``Invalid json schema: <why>``.
    """
    problem = _schema_problem(schema)
    if problem is not None:
        raise RequestError(f"Invalid json schema: {problem}")


# ---------------------------------------------------------------------------------------------
# Instances against a schema
# ---------------------------------------------------------------------------------------------


def validate_instance(instance: Any, schema: Any) -> list[str]:
    """Validation errors of ``instance`` against ``schema`` (draft from ``$schema``, 2020-12 default).

    Returns:
        ``"<json path>: <message>"`` strings (``$`` is the root), in document order; empty when
        valid. An invalid schema gives one entry ``"schema: <message>"``. Never raises.
    """
    try:
        cls = _jsv.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
        return [f"{e.json_path}: {e.message}" for e in errors]
    except jsonschema.SchemaError as exc:
        return [f"schema: {exc.message}"]
    except Exception as exc:  # noqa: BLE001 - unresolvable refs etc.: report, never raise
        return [f"schema: {exc}"]
