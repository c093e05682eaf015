"""Soundness of the output grammar for strict schemas: what the grammar lets through is valid.

Property (hypothesis, bounded): over generated strict schemas — ``enum`` / ``const`` on integers,
numbers, booleans, null and strings, bounds, string lengths, nested objects and arrays (``minItems``
/ ``maxItems``), ``anyOf``, ``$ref`` into ``$defs`` — every turn sampled by a random walk through
the token matcher (``recipe.OutputMatcher``, llguidance) that ends parses into arguments (a forced
strict tool) or an answer (a strict ``json_schema`` format) that validate against the client's schema
(``jsonschema``). Plus the regression that started it: an integer ``enum`` was the generic integer
rule in both grammar forms, so ``-557087200606988362`` passed for ``enum [1, 2, 3]``.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recipe
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS

llguidance = pytest.importorskip("llguidance")

from grammar_support import out_ids, parse, walk  # noqa: E402  (after the skip: needs the matcher)

MODEL = "deepseek-v4-pro"
DAYS = {"type": "object", "properties": {"days": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["days"],
        "additionalProperties": False}


def _chat(params: Any = None, fmt: Any = None, strict: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "Go."}], "thinking": {"type": "disabled"}}
    if params is not None:
        body["tools"] = [{"type": "function", "function": {"name": "f", "strict": strict, "parameters": params}}]
        body["tool_choice"] = "required"
    if fmt is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "a", "strict": strict, "schema": fmt}}
    return body


def _invoke(**params: Any) -> str:
    ps = "".join(f'<｜DSML｜parameter name="{k}" string="false">{json.dumps(v)}</｜DSML｜parameter>\n' for k, v in params.items())
    return f'<｜DSML｜invoke name="f">\n{ps}</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>'


def test_an_integer_enum_is_enforced_in_both_grammar_forms():
    prep = recipe.prepare(_chat(DAYS))
    g = recipe.output_grammar(prep)
    assert g.unenforced == ()
    assert '("1" | "2" | "3")' in g.lark and "19}" not in g.lark.split("days", 1)[1].split("\n", 1)[0]
    days = g.structural_tag.split('days', 1)[1]
    assert days.split('{"type":"const_string","value":"</"}', 1)[0].endswith(
        '{"type":"or","elements":[{"type":"const_string","value":"1"},{"type":"const_string","value":"2"},'
        '{"type":"const_string","value":"3"}]},')
    assert not recipe.check_output(prep, out_ids(_invoke(days=-557087200606988362))).ok
    assert not recipe.check_output(prep, out_ids(_invoke(days=4))).ok
    assert recipe.check_output(prep, out_ids(_invoke(days=2))).ok


@pytest.mark.parametrize("schema, bad, good", [
    ({"type": "number", "enum": [1.5, 2]}, 3, 2),
    ({"type": "boolean", "const": True}, False, True),
    ({"type": ["integer", "null"], "enum": [7, None]}, 8, None),
    ({"type": "integer", "minimum": 10, "maximum": 20}, 21, 15),
    ({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, 0, 0.25),
    ({"type": "array", "items": {"type": "integer", "enum": [0, 1]}, "minItems": 2, "maxItems": 3}, [1], [0, 1, 1]),
    ({"type": "object", "properties": {"k": {"type": "string", "enum": ["a"]}, "n": {"type": "null"}}}, {"k": "b", "n": None},
     {"k": "a", "n": None}),
    ({"anyOf": [{"type": "integer", "enum": [1]}, {"type": "string", "enum": ["x"]}]}, 2, 1),
])
def test_strict_keywords_are_enforced_for_every_type(schema, bad, good):
    params = {"type": "object", "properties": {"v": schema}, "required": ["v"], "additionalProperties": False}
    prep = recipe.prepare(_chat(params))
    assert recipe.output_grammar(prep).unenforced == ()
    assert not recipe.check_output(prep, out_ids(_invoke(v=bad))).ok
    assert recipe.check_output(prep, out_ids(_invoke(v=good))).ok
    answer = recipe.prepare(_chat(fmt=params))
    assert not recipe.check_output(answer, out_ids(json.dumps({"v": bad}) + "<｜end▁of▁sentence｜>")).ok
    assert recipe.check_output(answer, out_ids(json.dumps({"v": good}) + "<｜end▁of▁sentence｜>")).ok


@pytest.mark.parametrize("schema, keyword", [
    ({"type": "string", "pattern": "^a+$"}, "pattern"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf"),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 300}, "minItems"),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 300}, "maxItems"),
])
def test_what_the_grammar_cannot_enforce_is_refused_for_strict_and_listed_otherwise(schema, keyword):
    params = {"type": "object", "properties": {"v": schema}, "required": ["v"], "additionalProperties": False}
    for body in (_chat(params), _chat(fmt=params)):
        with pytest.raises(RequestError) as err:
            recipe.prepare(body)
        assert err.value.status == 400 and err.value.param.endswith(".properties.v") and keyword in err.value.message
    loose = recipe.prepare(_chat(fmt=params, strict=False))
    assert any(keyword in note for note in recipe.output_grammar(loose).unenforced)


@pytest.mark.parametrize("schema, field", [
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed[a-"}}}, "pattern"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "$ref"),
])
@pytest.mark.parametrize("where", ["tool", "format", "responses-tool", "responses-format"])
def test_strict_schemas_are_validated_too(schema, field, where):
    """An invalid regex or an unresolvable $ref was a 400 without strict and a 200 with it."""
    if where == "tool":
        body, api, param = _chat(schema), "chat", "tools[0].function.parameters"
    elif where == "format":
        body, api, param = _chat(fmt=schema), "chat", "response_format"
    elif where == "responses-tool":
        body, api, param = ({"model": MODEL, "input": "Go.", "tools": [{"type": "function", "name": "f", "strict": True,
                                                                       "parameters": schema}]}, "responses", "tools[0].parameters")
    else:
        body, api, param = ({"model": MODEL, "input": "Go.", "text": {"format": {"type": "json_schema", "name": "a",
                                                                                 "strict": True, "schema": schema}}},
                            "responses", "text.format")
    for strict in (False, True):
        b = json.loads(json.dumps(body).replace('"strict": true', f'"strict": {json.dumps(strict)}'))
        with pytest.raises(RequestError) as err:
            recipe.prepare(b, api)
        assert err.value.status == 400 and err.value.param == param, (strict, err.value)
    # deepseek-recipe (parity options) only normalises a strict schema
    recipe.prepare(body, api, options=PARITY_OPTIONS)


# ---------------------------------------------------------------------------------------------
# the property
# ---------------------------------------------------------------------------------------------

_ints = st.integers(-1000, 1000)


@st.composite
def _leaf(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["int_enum", "int_bounds", "num_enum", "num_bounds", "bool", "null", "str_enum",
                                 "str_len", "nullable_enum", "const"]))
    if kind == "int_enum":
        return {"type": "integer", "enum": draw(st.lists(_ints, min_size=1, max_size=4, unique=True))}
    if kind == "int_bounds":
        lo = draw(_ints)
        out: dict[str, Any] = {"type": "integer", "minimum": lo}
        if draw(st.booleans()):
            out["maximum"] = lo + draw(st.integers(0, 5000))
        return out
    if kind == "num_enum":
        return {"type": "number", "enum": draw(st.lists(st.one_of(_ints, st.floats(-100, 100).map(lambda f: round(f, 3))),
                                                        min_size=1, max_size=3, unique=True))}
    if kind == "num_bounds":
        lo = draw(st.integers(-50, 50))
        return {"type": "number", "minimum": lo, "exclusiveMaximum": lo + draw(st.integers(1, 40)) + 0.5}
    if kind == "bool":
        return {"type": "boolean", **({"const": draw(st.booleans())} if draw(st.booleans()) else {})}
    if kind == "null":
        return {"type": "null"}
    if kind == "str_enum":
        return {"type": "string", "enum": draw(st.lists(st.sampled_from(["a", "b", "low", "high", "x y"]), min_size=1,
                                                        max_size=3, unique=True))}
    if kind == "str_len":
        lo = draw(st.integers(0, 3))
        return {"type": "string", "minLength": lo, "maxLength": lo + draw(st.integers(0, 4))}
    if kind == "nullable_enum":
        return {"type": ["integer", "null"], "enum": [draw(_ints), None]}
    return {"type": "integer", "const": draw(_ints)}


def _schema(depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    if depth >= 2:
        return _leaf()
    inner = _schema(depth + 1)
    return st.one_of(
        _leaf(),
        _leaf(),
        st.builds(lambda items, lo, extra: {"type": "array", "items": items, "minItems": lo, "maxItems": lo + extra},
                  inner, st.integers(0, 2), st.integers(0, 2)),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, min_size=1, max_size=2).map(
            lambda props: {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}),
        st.lists(_leaf().filter(lambda b: isinstance(b["type"], str)), min_size=2, max_size=3).map(lambda bs: {"anyOf": bs}),
    )


@st.composite
def strict_params(draw: Any) -> dict[str, Any]:
    props = draw(st.dictionaries(st.sampled_from(["p", "q", "r"]), _schema(), min_size=1, max_size=3))
    out: dict[str, Any] = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    if draw(st.booleans()):  # one property through a $ref into $defs
        name = next(iter(props))
        out["$defs"] = {"shared": props[name]}
        out["properties"] = {**props, name: {"$ref": "#/$defs/shared"}}
    return out


@settings(max_examples=30, deadline=None, report_multiple_bugs=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(params=strict_params(), as_format=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_sampled_outputs_validate_against_the_strict_schema(params, as_format, seed):
    prep = recipe.prepare(_chat(fmt=params) if as_format else _chat(params))
    assert recipe.output_grammar(prep).unenforced == ()
    rng = random.Random(seed)
    for _ in range(3):
        m = recipe.OutputMatcher(prep)
        ids = walk(m, rng, budget=400)
        if ids is None:
            continue
        calls, content, _ = parse(prep, ids)
        if as_format:
            jsonschema.validate(json.loads(content), params)
        else:
            assert [name for name, _ in calls] and all(name == "f" for name, _ in calls)
            for _, args in calls:
                jsonschema.validate(args, params)
