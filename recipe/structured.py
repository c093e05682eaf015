"""JSON Schema handling for tools and response formats, matching deepseek-recipe 0.2.0.

Source: the parity target as observed (behaviour map §1.5, §1.7, §4) plus probes recorded in
``tests/test_structured.py``.

* **Strict normalisation** (``strict: true`` tools and json_schema response formats): the schema
  is read into a typed model and printed back; unknown keywords vanish, objects get
  ``additionalProperties: false`` and a ``required`` list equal to all properties in property
  order. Reading errors (serde's wording) come first, in document order; then semantic checks
  run depth-first. See :func:`normalize_strict_schema`.
* **Non-strict validation**: the schema must be a valid JSON Schema (checked against the
  meta-schema its ``$schema`` names, 2020-12 by default, with the Rust ``jsonschema`` crate's
  error wording and order), local ``$ref`` pointers must resolve, and a tool's schema must have
  ``"type": "object"``. See :func:`validate_tool_parameters`.
* **Constraint strings** for a constrained decoder (``OutputConstraint.schema``): compact JSON.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import attrs
import jsonschema
from jsonschema import validators as _jsv

from recipe.conversation import ToolDefinition
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_compact, format_float

__all__ = [
    "normalize_strict_schema",
    "normalize_strict_response_schema",
    "validate_tool_parameters",
    "validate_response_schema",
    "tools_constraint_json",
    "json_schema_constraint",
    "validate_instance",
]

# ---------------------------------------------------------------------------------------------
# serde-style error wording
# ---------------------------------------------------------------------------------------------

_TYPES = ("object", "string", "number", "integer", "boolean", "array", "null")
_SIMPLE_TYPES = ("string", "number", "integer", "boolean", "null")
_FORMATS = ("email", "hostname", "ipv4", "ipv6", "uuid")
_ONE_OF_REQUIRED = "one of `type`, `anyOf`, `$ref` field is required"
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_RUST_ESCAPES = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"', "\0": "\\0"}
_NON_PRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Mn", "Me"})


class _DeError(Exception):
    """A reading (serde) error; the caller adds the context prefix."""


class _SemError(Exception):
    """A semantic error; its message is shown as is."""


def _rust_debug_str(s: str) -> str:
    """Rust's ``{:?}`` of a str (approximation of its printable/grapheme-extend tables)."""
    out = []
    for ch in s:
        esc = _RUST_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch != " " and (unicodedata.category(ch) in _NON_PRINTABLE or unicodedata.category(ch) == "Zs"):
            out.append("\\u{%x}" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _unexpected(v: Any) -> str:
    """serde's ``Unexpected`` description of a JSON value."""
    if v is None:
        return "null"
    if v is True or v is False:
        return f"boolean `{'true' if v else 'false'}`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return f"floating point `{format_float(v)}`"
    if isinstance(v, str):
        return "string " + _rust_debug_str(v)
    if isinstance(v, (list, tuple)):
        return "sequence"
    return "map"


def _invalid_type(v: Any, expected: str) -> _DeError:
    return _DeError(f"invalid type: {_unexpected(v)}, expected {expected}")


def _unknown_variant(name: str, allowed: Sequence[str]) -> _DeError:
    return _DeError(f"unknown variant `{name}`, expected one of " + ", ".join(f"`{a}`" for a in allowed))


# ---------------------------------------------------------------------------------------------
# Strict model: reading (phase 1)
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Obj:
    properties: dict[str, Any] | None = None
    additional: bool | None = None
    required: list[str] | None = None
    description: str | None = None


@dataclass(slots=True)
class _Leaf:
    """string / number / integer / boolean / null: ``fields`` already in output order."""

    type: str
    fields: dict[str, Any]


@dataclass(slots=True)
class _Arr:
    items: Any = None
    description: str | None = None


@dataclass(slots=True)
class _TypeList:
    types: list[str]
    description: str | None


@dataclass(slots=True)
class _AnyOf:
    branches: list[Any]
    description: str | None


@dataclass(slots=True)
class _Ref:
    ref: str


#: Output order of the kept keywords per leaf type (``type`` first, always).
_LEAF_KEYS: dict[str, tuple[str, ...]] = {
    "string": ("description", "pattern", "format", "enum"),
    "integer": ("description", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "number": ("description", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "boolean": ("description",),
    "null": ("description",),
}


def _opt_str(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise _invalid_type(v, "a string")


def _opt_str_list(v: Any) -> list[str] | None:
    if v is None:
        return None
    if not isinstance(v, (list, tuple)):
        raise _invalid_type(v, "a sequence")
    for item in v:
        if not isinstance(item, str):
            raise _invalid_type(item, "a string")
    return list(v)


def _opt_i64(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        if _I64_MIN <= v <= _I64_MAX:
            return v
        raise _DeError(f"invalid value: integer `{v}`, expected i64")
    raise _invalid_type(v, "i64")


def _opt_number(v: Any) -> int | float | None:
    if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return v
    raise _invalid_type(v, "a JSON number")


def _opt_format(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise _invalid_type(v, "string or map")
    if v not in _FORMATS:
        raise _unknown_variant(v, _FORMATS)
    return v


_LEAF_READERS: dict[str, dict[str, Any]] = {
    "string": {"description": _opt_str, "pattern": _opt_str, "format": _opt_format, "enum": _opt_str_list},
    "integer": {"description": _opt_str, **{k: _opt_i64 for k in _LEAF_KEYS["integer"][1:]}},
    "number": {"description": _opt_str, **{k: _opt_number for k in _LEAF_KEYS["number"][1:]}},
    "boolean": {"description": _opt_str},
    "null": {"description": _opt_str},
}


def _prefixed(field: str, fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` and put ``field `name`: `` in front of a reading error."""
    try:
        return fn(*args)
    except _DeError as exc:
        raise _DeError(f"field `{field}`: {exc}") from None


def _read_schema(v: Any) -> Any:
    """A schema position (top level, property value, ``items``): dispatch on type/anyOf/$ref."""
    if not isinstance(v, dict):
        raise _DeError(_ONE_OF_REQUIRED)
    if "type" in v:
        t = v["type"]
        if isinstance(t, (list, tuple)):
            types = _prefixed("type", _read_type_list, t)
            return _TypeList(types, _prefixed("description", _opt_str, v.get("description")))
        return _read_tagged(v)
    if "anyOf" in v:
        branches = _prefixed("anyOf", _read_any_of, v["anyOf"])
        return _AnyOf(branches, _prefixed("description", _opt_str, v.get("description")))
    if "$ref" in v:
        ref = v["$ref"]
        if not isinstance(ref, str):
            raise _DeError(f"field `$ref`: {_invalid_type(ref, 'a string')}")
        return _Ref(ref)
    raise _DeError(_ONE_OF_REQUIRED)


def _read_type_list(t: list[Any]) -> list[str]:
    for item in t:
        if not isinstance(item, str):
            raise _invalid_type(item, "string or map")
        if item not in _SIMPLE_TYPES:
            raise _unknown_variant(item, _SIMPLE_TYPES)
    return list(t)


def _read_any_of(v: Any) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise _invalid_type(v, "a sequence")
    return [_read_tagged(item) for item in v]


def _read_tagged(v: Any) -> Any:
    """The internally tagged typed schema (``{"type": <one of 7>, …}``)."""
    if isinstance(v, (list, tuple)):
        v = dict(enumerate(v))  # serde reads a sequence as a map-less struct: no `type` field
    if not isinstance(v, dict):
        raise _invalid_type(v, "internally tagged enum JsonSchemaType")
    if "type" not in v:
        raise _DeError("missing field `type`")
    t = v["type"]
    if not isinstance(t, str):
        raise _invalid_type(t, "variant identifier")
    if t not in _TYPES:
        raise _unknown_variant(t, _TYPES)
    if t == "object":
        obj = _Obj()
        for key, value in v.items():
            if key == "properties":
                if value is not None and not isinstance(value, dict):
                    raise _invalid_type(value, "a map")
                obj.properties = None if value is None else {k: _read_schema(s) for k, s in value.items()}
            elif key == "additionalProperties":
                if value is not None and not isinstance(value, bool):
                    raise _invalid_type(value, "a boolean")
                obj.additional = value
            elif key == "required":
                obj.required = _opt_str_list(value)
            elif key == "description":
                obj.description = _opt_str(value)
        return obj
    if t == "array":
        arr, has_items = _Arr(), False
        for key, value in v.items():
            if key == "items":
                arr.items, has_items = _read_schema(value), True
            elif key == "description":
                arr.description = _opt_str(value)
        if not has_items:
            raise _DeError("missing field `items`")
        return arr
    readers = _LEAF_READERS[t]
    read: dict[str, Any] = {}
    for key, value in v.items():
        reader = readers.get(key)
        if reader is not None:
            read[key] = reader(value)
    return _Leaf(t, {k: read[k] for k in _LEAF_KEYS[t] if read.get(k) is not None})


# ---------------------------------------------------------------------------------------------
# Strict model: checking and printing (phase 2)
# ---------------------------------------------------------------------------------------------


def _emit(node: Any, top: bool = False) -> dict[str, Any]:
    """Check ``node`` (depth-first, parity order) and return its normalised JSON form.

    ``top`` exempts an object from the no-properties check: the tool parameters root and,
    observed in the target, the branches of a root-level ``anyOf``. Per object the order is:
    no-properties, children, required, additionalProperties.
    """
    if isinstance(node, _Obj):
        props = node.properties or {}
        if not top and not props:
            raise _SemError("An object with no properties is not allowed.")
        out_props = {name: _emit(child) for name, child in props.items()}
        if node.required is None:
            required = list(props)
        else:
            seen: set[str] = set()
            for name in node.required:
                if name not in props:
                    raise _SemError(f"Required property '{name}' not found in object")
                if name in seen:
                    raise _SemError(f"Duplicate required property '{name}'")
                seen.add(name)
            if len(seen) != len(props):
                raise _SemError("Required properties must match all properties in the object")
            required = [name for name in props if name in seen]
        if node.additional is True:
            raise _SemError("additionalProperties should not be true")
        out: dict[str, Any] = {"type": "object", "properties": out_props, "additionalProperties": False, "required": required}
        if node.description is not None:
            out["description"] = node.description
        return out
    if isinstance(node, _Leaf):
        return {"type": node.type, **node.fields}
    if isinstance(node, _Arr):
        out = {"type": "array", "items": _emit(node.items)}
        if node.description is not None:
            out["description"] = node.description
        return out
    if isinstance(node, _TypeList):
        out = {"type": node.types}
        if node.description is not None:
            out["description"] = node.description
        return out
    if isinstance(node, _AnyOf):
        out = {"anyOf": [_emit(b, top) for b in node.branches]}  # branches stay at their parent's depth
        if node.description is not None:
            out["description"] = node.description
        return out
    return {"$ref": node.ref}


@dataclass(frozen=True, slots=True)
class _StrictContext:
    read_prefix: str
    top_level_message: str
    empty_top_object_ok: bool


_TOOL_CTX = _StrictContext(
    "Invalid tool parameters schema : ", "The top level of the function parameters schema must be an object.", True
)
_RESPONSE_CTX = _StrictContext("Invalid json schema: ", "The top level of the json schema must be an object.", False)


def _normalize(schema: Any, ctx: _StrictContext) -> dict[str, Any]:
    try:
        node = _read_schema(schema)
    except _DeError as exc:
        raise RequestError(ctx.read_prefix + str(exc)) from None
    try:
        out = _emit(node, top=ctx.empty_top_object_ok)
    except _SemError as exc:
        raise RequestError(str(exc)) from None
    if not isinstance(node, _Obj):
        raise RequestError(ctx.top_level_message)
    return out


def normalize_strict_schema(schema: Any, *, tool_name: str | None = None) -> dict[str, Any]:
    """Normalise a ``strict: true`` tool's ``parameters`` exactly as deepseek-recipe 0.2.0 (§1.5).

    Args:
        schema: the parameters JSON value (``None`` = not given: gives the empty object schema).
        tool_name: the tool's name (for the caller's context; parity messages do not name it).

    Returns:
        A new dict: objects ``{type, properties, additionalProperties: false, required, description?}``;
        strings ``{type, description, pattern, format, enum}``; integers/numbers ``{type,
        description, default, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf}``;
        arrays ``{type, items, description}``; booleans/null ``{type, description}``; ``anyOf``
        nodes ``{anyOf, description}``; type lists ``{type, description}``; ``$ref`` nodes
        ``{$ref}`` (absent keys omitted). Every other keyword is dropped (``$defs`` included).

    Raises:
        RequestError: stage "convert", status 400, with the parity message: reading errors as
            ``Invalid tool parameters schema : <serde message>`` (e.g. ``missing field `items` ``),
            ``The top level of the function parameters schema must be an object.``,
            ``An object with no properties is not allowed.``, ``Required property 'x' not found
            in object``, ``Duplicate required property 'x'``, ``Required properties must match all
            properties in the object``, ``additionalProperties should not be true``.
    """
    del tool_name
    if schema is None:
        schema = {"type": "object"}
    return _normalize(schema, _TOOL_CTX)


def normalize_strict_response_schema(schema: Any) -> dict[str, Any]:
    """Normalise a strict json_schema response format (§1.7); rules as :func:`normalize_strict_schema`.

    Differences (parity): reading errors are prefixed ``Invalid json schema: ``, the top-level
    message is ``The top level of the json schema must be an object.``, a top-level object
    without properties is rejected, and ``None`` is not accepted.

    Raises:
        RequestError: stage "convert", status 400.
    """
    return _normalize(schema, _RESPONSE_CTX)


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


def _meta_validator(cls: Any) -> Any:
    ext = _jsv.extend(
        cls,
        {
            "properties": _properties_in_instance_order,
            "additionalProperties": _additional_properties_in_instance_order,
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
# Constraint strings
# ---------------------------------------------------------------------------------------------


def tools_constraint_json(tools: Sequence[ToolDefinition]) -> str:
    """``OutputConstraint.schema`` for ``tool_call`` / ``tool_call_required`` (§4), compact JSON.

    Each tool prints as ``{"type":"function","function":{"name","description","parameters",
    "strict"}}``: description ``null`` when missing, parameters ``{}`` when missing, ``strict``
    always present (``null``/``true``/``false``). Parameters are printed as stored (already
    normalised for strict tools).
    """
    return dumps_compact(
        [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": {} if t.parameters is None else t.parameters,
                    "strict": t.strict,
                },
            }
            for t in tools
        ]
    )


def json_schema_constraint(schema: Any, strict: bool | None) -> str:
    """``OutputConstraint.schema`` for a json_schema response format (§1.7, §4).

    Strict schemas are normalised (:func:`normalize_strict_response_schema`, which may raise
    RequestError); others are printed as given. Compact JSON.
    """
    return dumps_compact(normalize_strict_response_schema(schema) if strict else schema)


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
