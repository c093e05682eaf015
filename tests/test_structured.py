"""recipe.schema.strict: goldens observed from deepseek-recipe 0.2.0 and differential tests against it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.conversation import ToolDefinition
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_compact, dumps_prompt
from recipe.schema.validation import (
    validate_instance,
    validate_response_schema,
    validate_tool_parameters,
)
from recipe.schema.strict import (
    json_schema_constraint,
    normalize_strict_response_schema,
    normalize_strict_schema,
    tools_constraint_json,
)


def P(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def O(**kw: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"type": "string"}}, **kw}


TP = "Invalid tool parameters schema : "

# (schema, expected compact normalised schema or error message); expected values observed from
# deepseek-recipe 0.2.0 (ChatCompletionRequest(...).convert(...) with a strict tool).
STRICT_GOLDEN: list[tuple[Any, str]] = [
    (P(a={"type": "string", "format": "email", "enum": ["x"], "pattern": "p", "description": "d", "title": "t", "default": "x", "minLength": 1}),
     '{"type":"object","properties":{"a":{"type":"string","description":"d","pattern":"p","format":"email","enum":["x"]}},"additionalProperties":false,"required":["a"]}'),
    (P(a={"type": "integer", "enum": [1], "default": 3, "minimum": 1, "maximum": 2, "exclusiveMinimum": 0, "exclusiveMaximum": 5, "multipleOf": 1, "description": "d", "title": "x"}),
     '{"type":"object","properties":{"a":{"type":"integer","description":"d","default":3,"minimum":1,"maximum":2,"exclusiveMinimum":0,"exclusiveMaximum":5,"multipleOf":1}},"additionalProperties":false,"required":["a"]}'),
    (P(a={"type": "array", "minItems": 1, "description": "d", "items": {"type": "string"}}),
     '{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"description":"d"}},"additionalProperties":false,"required":["a"]}'),
    (P(a={"description": "d", "anyOf": [{"type": "string"}, {"type": "null"}]}),
     '{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}],"description":"d"}},"additionalProperties":false,"required":["a"]}'),
    (P(a={"$ref": "#/$defs/x", "description": "d"}),
     '{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"additionalProperties":false,"required":["a"]}'),
    (P(a={"type": ["string", "null"], "description": "d", "minimum": 3}),
     '{"type":"object","properties":{"a":{"type":["string","null"],"description":"d"}},"additionalProperties":false,"required":["a"]}'),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["b", "a"], "$defs": {"x": {}}},
     '{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false,"required":["a","b"]}'),
    ({"type": "object"}, '{"type":"object","properties":{},"additionalProperties":false,"required":[]}'),
    (None, '{"type":"object","properties":{},"additionalProperties":false,"required":[]}'),
    (P(a={"type": "string", "anyOf": [{"type": "integer"}]}), '{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false,"required":["a"]}'),
    (P(a={"$ref": "#x", "anyOf": [{"type": "integer"}]}), '{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"}]}},"additionalProperties":false,"required":["a"]}'),
    (O(description="top"), '{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false,"required":["a"],"description":"top"}'),
    (P(a={"type": "array"}), TP + "missing field `items`"),
    (P(a={"type": "object"}), "An object with no properties is not allowed."),
    (P(a={"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": True}), "additionalProperties should not be true"),
    (P(a={"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": {}}), TP + "invalid type: map, expected a boolean"),
    (P(a={"description": "x"}), TP + "one of `type`, `anyOf`, `$ref` field is required"),
    ({"type": "string"}, "The top level of the function parameters schema must be an object."),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["b"]}, "Required properties must match all properties in the object"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}, "Required property 'b' not found in object"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "a"]}, "Duplicate required property 'a'"),
    (P(a={"type": "string", "format": "date-time"}), TP + "unknown variant `date-time`, expected one of `email`, `hostname`, `ipv4`, `ipv6`, `uuid`"),
    (P(a={"type": "foo"}), TP + "unknown variant `foo`, expected one of `object`, `string`, `number`, `integer`, `boolean`, `array`, `null`"),
    (P(a={"type": ["string", "foo"]}), TP + "field `type`: unknown variant `foo`, expected one of `string`, `number`, `integer`, `boolean`, `null`"),
    (P(a={"type": "integer", "minimum": 1.5}), TP + "invalid type: floating point `1.5`, expected i64"),
    (P(a={"type": "integer", "minimum": 1e20}), TP + "invalid type: floating point `1e+20`, expected i64"),
    (P(a={"type": "integer", "default": 18446744073709551615}), TP + "invalid value: integer `18446744073709551615`, expected i64"),
    (P(a={"type": "number", "default": "3"}), TP + 'invalid type: string "3", expected a JSON number'),
    (P(a={"type": "integer", "minimum": 'a"\\\n\x01é\u200b'}), TP + 'invalid type: string "a\\"\\\\\\n\\u{1}é\\u{200b}", expected i64'),
    (P(a={"anyOf": [{"$ref": 2}]}), TP + "field `anyOf`: missing field `type`"),
    (P(a={"anyOf": [{"type": "object", "properties": {"b": {"type": ["foo"]}}}]}),
     TP + "field `anyOf`: field `type`: unknown variant `foo`, expected one of `string`, `number`, `integer`, `boolean`, `null`"),
    (P(a={"anyOf": ["x"]}), TP + 'field `anyOf`: invalid type: string "x", expected internally tagged enum JsonSchemaType'),
    (P(a={"type": ["string", 1]}), TP + "field `type`: invalid type: integer `1`, expected string or map"),
    (P(a={"type": "object"}, b={"type": "foo"}), TP + "unknown variant `foo`, expected one of `object`, `string`, `number`, `integer`, `boolean`, `array`, `null`"),
    ({"type": "object", "properties": {"a": {"type": "object"}}, "required": ["x"]}, "An object with no properties is not allowed."),
    (O(properties={"a": {"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": True}}, required=["x"]),
     "additionalProperties should not be true"),
    (O(required=["x"], additionalProperties=True), "Required property 'x' not found in object"),
    ({"anyOf": [{"type": "object"}]}, "The top level of the function parameters schema must be an object."),
    ({}, TP + "one of `type`, `anyOf`, `$ref` field is required"),
    ("x", TP + "one of `type`, `anyOf`, `$ref` field is required"),
]


@pytest.mark.parametrize("schema, expected", STRICT_GOLDEN)
def test_strict_golden(schema: Any, expected: str) -> None:
    if expected.startswith("{"):
        assert dumps_compact(normalize_strict_schema(schema, tool_name="f")) == expected
    else:
        with pytest.raises(RequestError) as info:
            normalize_strict_schema(schema, tool_name="f")
        assert info.value.message == expected
        assert info.value.stage == "convert" and info.value.status == 400


RESPONSE_GOLDEN: list[tuple[Any, str]] = [
    (P(a={"type": "string", "minLength": 1}), '{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false,"required":["a"]}'),
    ({"type": "string"}, "The top level of the json schema must be an object."),
    ({"type": "object"}, "An object with no properties is not allowed."),
    (None, "Invalid json schema: one of `type`, `anyOf`, `$ref` field is required"),
    (P(a={"type": "string", "format": "x"}), "Invalid json schema: unknown variant `x`, expected one of `email`, `hostname`, `ipv4`, `ipv6`, `uuid`"),
]


@pytest.mark.parametrize("schema, expected", RESPONSE_GOLDEN)
def test_strict_response_golden(schema: Any, expected: str) -> None:
    if expected.startswith("{"):
        assert json_schema_constraint(schema, True) == expected
        assert dumps_compact(normalize_strict_response_schema(schema)) == expected
    else:
        with pytest.raises(RequestError, match="^" + __import__("re").escape(expected) + "$"):
            json_schema_constraint(schema, True)


F = "Invalid schema for function 'f': "
LOOSE_GOLDEN: list[tuple[Any, str | None]] = [
    ({"type": "object"}, None),
    (None, None),
    ({"type": "string"}, F + "schema must be a JSON Schema of 'type: \"object\"', got 'type: \"string\"'."),
    ({}, F + "schema must be a JSON Schema of 'type: \"object\"', got 'type: null'."),
    (True, F + "schema must be a JSON Schema of 'type: \"object\"', got 'type: null'."),
    ({"type": ["object"]}, F + "schema must be a JSON Schema of 'type: \"object\"', got 'type: [\"object\"]'."),
    ({"type": 1.5}, F + "1.5 is not valid under any of the schemas listed in the 'anyOf' keyword"),
    ({"type": {"a": "é\n"}}, F + '{"a":"é\\n"} is not valid under any of the schemas listed in the \'anyOf\' keyword'),
    ("x", F + '"x" is not of types "boolean", "object"'),
    ({"type": "object", "properties": 5}, F + '5 is not of type "object"'),
    (O(minLength=-1e20), F + "-1e+20 is less than the minimum of 0"),
    (O(minLength=-1.5e-7), F + '-1.5e-7 is not of type "integer"'),
    (O(maxItems=[1e16, "a\x01\x7f\u2028é"]), F + '[1e+16,"a\\u0001\x7f\u2028é"] is not of type "integer"'),
    (O(required=["a", "a"]), F + '["a","a"] has non-unique elements'),
    (O(anyOf=[]), F + "[] has less than 1 item"),
    (O(multipleOf=0), F + "0 is less than or equal to the minimum of 0"),
    (O(pattern="("), F + '"(" is not a "regex"'),
    (O(pattern="(?<n>a)\\p{L}"), None),
    (O(patternProperties={"(": {"type": "string"}}), F + '{"type":"string"} is not a "regex"'),
    (O(**{"$anchor": "1a"}), F + '"1a" does not match "^[A-Za-z_][-A-Za-z0-9._]*$"'),
    (O(**{"$schema": "foo"}), F + "Unknown meta-schema: 'foo'. Custom meta-schemas must be registered in the registry before use"),
    (O(**{"$schema": "http://json-schema.org/draft-07/schema#", "$defs": 5}), None),
    (O(**{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": True}), F + '"minimum" is a required property'),
    (O(**{"$ref": "#/nowhere"}), F + "Pointer '/nowhere' does not exist"),
    (O(title=5, description=6), F + '5 is not of type "string"'),
    (O(description=6, title=5), F + '6 is not of type "string"'),
    (O(title=5, definitions=5), F + '5 is not of type "object"'),
    (O(title=5, required=6), F + '6 is not of type "array"'),
    (O(properties={"b": {"maxItems": -2}, "a": {"minItems": "x"}}), F + "-2 is less than the minimum of 0"),
]


@pytest.mark.parametrize("schema, expected", LOOSE_GOLDEN)
def test_non_strict_golden(schema: Any, expected: str | None) -> None:
    if expected is None:
        validate_tool_parameters(schema, "f")
    else:
        with pytest.raises(RequestError) as info:
            validate_tool_parameters(schema, "f")
        assert info.value.message == expected


def test_response_schema_non_strict() -> None:
    assert json_schema_constraint({"type": "object", "properties": {"a": {"type": "object"}}}, False) == \
        '{"type":"object","properties":{"a":{"type":"object"}}}'
    with pytest.raises(RequestError, match=r'^Invalid json schema: null is not of types "boolean", "object"$'):
        validate_response_schema(None)


def test_tools_constraint_golden() -> None:
    tools = [
        ToolDefinition("get_weather", "Get weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ToolDefinition("lookup", None, normalize_strict_schema({"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}}, tool_name="lookup"), True),
        ToolDefinition("g", None, None, False),
    ]
    assert tools_constraint_json(tools) == (
        '[{"type":"function","function":{"name":"get_weather","description":"Get weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":null}},'
        '{"type":"function","function":{"name":"lookup","description":null,"parameters":{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false,"required":["q"]},"strict":true}},'
        '{"type":"function","function":{"name":"g","description":null,"parameters":{},"strict":false}}]'
    )


def test_validate_instance() -> None:
    schema = {"type": "object", "properties": {"t": {"type": "number"}, "c": {"type": "string"}}, "required": ["t"]}
    assert validate_instance({"t": 1.5, "c": "x"}, schema) == []
    errors = validate_instance({"c": 3}, schema)
    assert len(errors) == 2 and any("'t' is a required property" in e for e in errors) and any(e.startswith("$.c:") for e in errors)
    assert validate_instance(1, {"type": 5})[0].startswith("schema: ")


# ----------------------------------------------------------------------------- differential

oracle = pytest.importorskip("structured_oracle")


def _ours(schema: Any, mode: str) -> tuple:
    try:
        if mode == "strict":
            norm = normalize_strict_schema(schema, tool_name="f")
            return ("ok", dumps_prompt({"name": "f", "description": "", "parameters": norm}),
                    tools_constraint_json([ToolDefinition("f", None, norm, True)]))
        if mode == "loose":
            validate_tool_parameters(schema, "f")
            params = {} if schema is None else schema
            return ("ok", dumps_prompt({"name": "f", "description": "", "parameters": params}),
                    tools_constraint_json([ToolDefinition("f", None, params, None)]))
        strict = mode == "rf_strict"
        if not strict:
            validate_response_schema(schema)
        return ("ok", dumps_prompt(schema), json_schema_constraint(schema, strict))
    except RequestError as exc:
        return ("convert", exc.message)


def _theirs(schema: Any, mode: str) -> tuple:
    if mode in ("strict", "loose"):
        return oracle.tool_schema(schema, True if mode == "strict" else None)
    return oracle.response_schema(schema, mode == "rf_strict")


ALL_CASES = [c for c, _ in STRICT_GOLDEN + RESPONSE_GOLDEN + LOOSE_GOLDEN]


@pytest.mark.parametrize("mode", ["strict", "loose", "rf_strict", "rf"])
def test_golden_cases_in_every_mode_match_oracle(mode: str) -> None:
    mismatches = [(c, _ours(c, mode), _theirs(c, mode)) for c in ALL_CASES if _ours(c, mode) != _theirs(c, mode)]
    assert mismatches == []


# A generator of schema-like values: mostly well-formed strict schemas with occasional defects.
_name = st.sampled_from(["a", "b", "c", "q x", "é"])
_desc = st.one_of(st.none(), st.text(max_size=4), st.sampled_from([5, None, "d"]))
_num = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**64 - 1), st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["3", True, None]))
_junk = st.sampled_from([{"title": "t"}, {"minLength": 1}, {"default": "x"}, {"x-y": [1]}, {"$comment": "c"}, {"examples": [1]}, {}, {}, {}])


def _with(base: dict, extra: dict, desc: Any) -> dict:
    out = {**base, **extra}
    if desc is not None:
        out["description"] = desc
    return out


def _schemas(depth: int) -> st.SearchStrategy:
    leaf = st.one_of(
        st.builds(lambda f, e, p, j, d: _with({"type": "string"}, {k: v for k, v in (("format", f), ("enum", e), ("pattern", p)) if v is not None}, d) | j,
                  st.one_of(st.none(), st.sampled_from(["email", "uuid", "date-time", 5])), st.one_of(st.none(), st.lists(st.sampled_from(["x", "y", 1]), max_size=2)),
                  st.one_of(st.none(), st.sampled_from(["^a$", "("])), _junk, _desc),
        st.builds(lambda t, kw, j, d: _with({"type": t}, kw, d) | j, st.sampled_from(["integer", "number"]),
                  st.dictionaries(st.sampled_from(["default", "minimum", "maximum", "exclusiveMinimum", "multipleOf", "enum"]), _num, max_size=2), _junk, _desc),
        st.builds(lambda t, d: _with({"type": t}, {}, d), st.sampled_from(["boolean", "null", "foo", None, 1]), _desc),
        st.builds(lambda ts, d: _with({"type": ts}, {"minimum": 1}, d), st.lists(st.sampled_from(["string", "null", "integer", "object", 1]), max_size=3), _desc),
        st.builds(lambda r: {"$ref": r, "description": "x"}, st.sampled_from(["#/$defs/x", 1, None])),
        st.sampled_from([{}, {"description": "only"}, "x", None, True]),
    )
    if depth == 0:
        return leaf
    inner = _schemas(depth - 1)
    return st.one_of(
        leaf,
        st.builds(_object, st.lists(st.tuples(_name, inner), max_size=3), st.sampled_from(["fill", "all", "rev", "missing", "dup", "extra", "none", "bad"]),
                  st.sampled_from([None, False, True, {}, "x"]), _desc, _junk),
        st.builds(lambda i, d, has: _with({"type": "array", **({"items": i} if has else {})}, {"minItems": 1}, d), inner, _desc, st.booleans().map(lambda b: b or False) | st.just(True)),
        st.builds(lambda bs, d: _with({"anyOf": bs}, {}, d), st.one_of(st.lists(inner, max_size=3), st.sampled_from([{}, None, 3])), _desc),
    )


def _object(props: list, req_mode: str, additional: Any, desc: Any, junk: dict) -> dict:
    properties = dict(props)
    names = list(properties)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    required = {"fill": None, "all": names, "rev": names[::-1], "missing": names[1:], "dup": names + names[:1],
                "extra": names + ["zz"], "none": [], "bad": [1]}[req_mode]
    if required is not None:
        out["required"] = required
    if additional is not None:
        out["additionalProperties"] = additional
    if desc is not None:
        out["description"] = desc
    return out | junk


_top = st.one_of(
    st.builds(_object, st.lists(st.tuples(_name, _schemas(2)), min_size=1, max_size=3), st.sampled_from(["fill", "fill", "all", "rev", "missing", "extra"]),
              st.sampled_from([None, False, True]), _desc, _junk),
    _schemas(2),
)


@settings(max_examples=300)
@given(_top)
def test_strict_tools_match_deepseek_recipe(schema: Any) -> None:
    assert _ours(schema, "strict") == _theirs(schema, "strict")


@settings(max_examples=150)
@given(_top)
def test_strict_response_formats_match_deepseek_recipe(schema: Any) -> None:
    assert _ours(schema, "rf_strict") == _theirs(schema, "rf_strict")


@settings(max_examples=200)
@given(_top)
def test_non_strict_tools_match_deepseek_recipe(schema: Any) -> None:
    assert _ours(schema, "loose") == _theirs(schema, "loose")


@pytest.mark.parametrize("schema, why", [
    ({"type": "object", "required": [None, None]}, "[null,null] has non-unique elements"),
    ({"type": "object", "required": [1, 1.0]}, "[1,1.0] has non-unique elements"),
    ({"type": "object", "properties": {"a": {"required": [5, 5]}}}, "[5,5] has non-unique elements"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": [1, 1]}, "[1,1] has non-unique elements"),
    ({"type": "object", "required": [1, 2]}, '1 is not of type "string"'),
])
def test_repeated_wrong_items_report_the_repetition_first(schema, why):
    """The Rust crate checks ``uniqueItems`` before the items of a string array (found by a
    differential of generated tool schemas): the Messages 400 words it as deepseek-recipe does."""
    import oracle

    from recipe.errors import RequestError
    from recipe.pipeline import prepare

    body = {"model": "deepseek-v4-pro", "max_tokens": 5, "tools": [{"name": "f", "input_schema": schema}],
            "messages": [{"role": "user", "content": "x"}]}
    message = f"Invalid schema for function 'f': {why}"
    assert oracle.convert("messages", body)["message"] == message
    with pytest.raises(RequestError) as info:
        prepare(body, "messages")
    assert info.value.message == message
