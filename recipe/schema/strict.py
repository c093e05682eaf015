"""Strict JSON Schemas and constraint strings for tools and response formats, matching deepseek-recipe 0.2.0.

Source: the parity target as observed (behaviour map §1.5, §1.7, §4) plus probes recorded in
``tests/test_structured.py``.

* **Strict normalisation** (``strict: true`` tools and json_schema response formats): the schema
  is read into a typed model and printed back; unknown keywords vanish, objects get
  ``additionalProperties: false`` and a ``required`` list equal to all properties in property
  order. Reading errors (serde's wording) come first, in document order; then semantic checks
  run depth-first. See :func:`normalize_strict_schema`.
* **Constraint strings** for a constrained decoder (``OutputConstraint.schema``): compact JSON.

Non-strict schemas are validated against their meta-schema instead, and answers against a
schema: :mod:`recipe.schema.validation`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recipe.conversation import ToolDefinition
from recipe.errors import RequestError, rust_debug
from recipe.jsonfmt import dumps_compact, format_float

__all__ = [
    "json_schema_constraint",
    "normalize_strict_response_schema",
    "normalize_strict_schema",
    "tools_constraint_json",
]

# ---------------------------------------------------------------------------------------------
# serde-style error wording
# ---------------------------------------------------------------------------------------------

_TYPES = ("object", "string", "number", "integer", "boolean", "array", "null")
_SIMPLE_TYPES = ("string", "number", "integer", "boolean", "null")
_FORMATS = ("email", "hostname", "ipv4", "ipv6", "uuid")
_ONE_OF_REQUIRED = "one of `type`, `anyOf`, `$ref` field is required"
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class _DeError(Exception):
    """A reading (serde) error; the caller adds the context prefix."""


class _SemError(Exception):
    """A semantic error; its message is shown as is."""


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
        return "string " + rust_debug(v)
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
# Constraint strings
# ---------------------------------------------------------------------------------------------


def tools_constraint_json(tools: Sequence[ToolDefinition]) -> str:
    """``OutputConstraint.schema`` for ``tool_call`` / ``tool_call_required`` (§4), compact JSON.

    Each tool prints as ``{"type":"function","function":{"name","description","parameters",
    "strict"}}``: description ``null`` when missing, parameters ``{}`` when missing, ``strict``
    always present (``null``/``true``/``false``). Parameters are printed as stored (already
    normalised for strict tools). A deferred tool (V4.1 Messages ``defer_loading``) also carries
    ``"defer_loading":true`` after ``function``.
    """
    return dumps_compact([_tool_entry(t) for t in tools])


def _tool_entry(t: ToolDefinition) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": {} if t.parameters is None else t.parameters,
            "strict": t.strict,
        },
    }
    if t.defer_loading:
        entry["defer_loading"] = True
    return entry


def json_schema_constraint(schema: Any, strict: bool | None) -> str:
    """``OutputConstraint.schema`` for a json_schema response format (§1.7, §4).

    Strict schemas are normalised (:func:`normalize_strict_response_schema`, which may raise
    RequestError); others are printed as given. Compact JSON.
    """
    return dumps_compact(normalize_strict_response_schema(schema) if strict else schema)
