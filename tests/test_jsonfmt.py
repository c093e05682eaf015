"""recipe.jsonfmt: goldens from the behaviour map (§1.2.6, §1.9) and differential tests vs deepseek-recipe."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.errors import RequestError
from recipe.jsonfmt import (
    JSONNumberOutOfRange,
    _py_dumps,
    dumps_compact,
    dumps_prompt,
    format_float,
    loads_request,
    parse_json_value,
)

# ----------------------------------------------------------------------------- goldens


@pytest.mark.parametrize(
    "value, text",
    [
        (1000.0, "1000.0"), (0.00001, "0.00001"), (0.0000125, "0.0000125"), (-0.0000125, "-0.0000125"),
        (1e16, "1e+16"), (1.5e-7, "1.5e-7"), (1e-6, "1e-6"), (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"), (1e15, "1000000000000000.0"), (0.0001, "0.0001"),
        (-0.0, "-0.0"), (18446744073709551616.0, "1.8446744073709552e+19"), (float("inf"), "null"),
    ],
)
def test_format_float_golden(value: float, text: str) -> None:
    assert format_float(value) == text


@pytest.mark.parametrize(
    "text, value",
    [
        ("18446744073709551615", 18446744073709551615),
        ("18446744073709551616", 1.8446744073709552e19),
        ("-9223372036854775808", -9223372036854775808),
        ("-9223372036854775809", -9.223372036854776e18),
        (" \t\n\r[1, -0.5e1] \n", [1, -5.0]),
        ("1e-400", 0.0),
        ('{"a":1,"a":{"x":2},"b":3}', {"a": {"x": 2}, "b": 3}),
        ('"\\uD83D\\uDE00\\u00e9\\/"', "😀é/"),
    ],
)
def test_parse_numbers_and_whitespace(text: str, value: object) -> None:
    got = parse_json_value(text)
    assert got == value and type(got) is type(value)


def test_negative_zero_becomes_float() -> None:
    got = parse_json_value('{"a": -0, "b": [-0], "s": "-0"}')
    assert got == {"a": 0.0, "b": [0.0], "s": "-0"}
    assert str(got["a"]) == "-0.0" and str(got["b"][0]) == "-0.0"


@pytest.mark.parametrize(
    "text",
    ["1e400", "[1, -1e999]", "1" + "0" * 400, "NaN", "[-Infinity]", '{"a":1}x', "[1,]", "01", "1.", ".5", "+1",
     '"\x01"', '"\\ud800"', '"\\udc00"', '"x\\q"', "\ufeff{}", "\x0c{}", "", "tru"],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json_value(text)


def test_out_of_range_position_matches_serde() -> None:
    # messages observed from deepseek_recipe.ChatCompletionRequest(<text>)
    with pytest.raises(JSONNumberOutOfRange, match=r"^number out of range at line 1 column 10$"):
        parse_json_value('{"a":1e400}')
    with pytest.raises(RequestError) as info:
        loads_request('\n {"a":\n  -1e400 }')
    assert info.value.message == "invalid JSON request: number out of range at line 3 column 8"
    assert info.value.stage == "parse" and info.value.status == 400
    with pytest.raises(RequestError) as info:
        loads_request(b'{"a":1' + b"0" * 400 + b"}")
    assert info.value.message == "invalid JSON request: number out of range at line 1 column 406"
    with pytest.raises(RequestError) as info:
        loads_request(b"[1,]")
    assert info.value.message.startswith("invalid JSON request: ")


def test_loads_request_bytes_and_neg_zero() -> None:
    assert loads_request(b'{"x": -0, "y": "\xc3\xa9"}') == {"x": -0.0, "y": "é"}
    with pytest.raises(RequestError):
        loads_request(b'{"y": "\xff"}')


def test_dumps_escapes_and_separators() -> None:
    value = {"k\n": ["\x00\x1f\x7f\u2028\b\f\n\r\t\"\\é😀", 1, 2.5, None, True, False, {}, []], "x,y": {"a:b": -0.0}}
    expected_compact = (
        '{"k\\n":["\\u0000\\u001f\x7f\u2028\\b\\f\\n\\r\\t\\"\\\\é😀",1,2.5,null,true,false,{},[]],"x,y":{"a:b":-0.0}}'
    )
    assert dumps_compact(value) == expected_compact
    assert dumps_prompt(value) == (
        '{"k\\n": ["\\u0000\\u001f\x7f\u2028\\b\\f\\n\\r\\t\\"\\\\é😀", 1, 2.5, null, true, false, {}, []], '
        '"x,y": {"a:b": -0.0}}'
    )
    assert dumps_prompt("a,b") == '"a,b"'
    assert dumps_prompt([1e16, 1e-5]) == "[1e+16, 0.00001]"


def test_fallback_printer_agrees_and_handles_big_ints() -> None:
    value = {"a": [1, 2**70, -(2**70), 1.5e-7, "q\"", (1, 2)], "b": {"c": None}}
    assert dumps_prompt(value) == '{"a": [1, 1180591620717411303424, -1180591620717411303424, 1.5e-7, "q\\"", [1, 2]], "b": {"c": null}}'
    small = {"a": [1, 1.5e-7, "q\"", [1, 2]], "b": {"c": None}}
    assert _py_dumps(small, ", ", ": ") == dumps_prompt(small)
    assert _py_dumps(small, ",", ":") == dumps_compact(small)
    with pytest.raises(TypeError):
        dumps_prompt({1: 2})
    with pytest.raises(TypeError):
        dumps_compact({"a": object()})


# ----------------------------------------------------------------------------- differential

oracle = pytest.importorskip("structured_oracle")

_ws = st.sampled_from(["", "", " ", "\n", " \t\r\n"])
_number_text = st.one_of(
    st.integers(min_value=-(2**66), max_value=2**66).map(str),
    st.integers(min_value=-(2**64) - 3, max_value=2**64 + 3).map(str),
    st.sampled_from(["-0", "0", "-0.0", "0e0", "1E+2", "1e400", "-1e400", "1e-400", "2.5e-5", "1e16", "1e15",
                     "18446744073709551615", "18446744073709551616", "-9223372036854775808",
                     "-9223372036854775809", "1" + "0" * 310, "123456789012345678901234567890"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-999, 999), st.integers(-330, 330)),
)
_string_text = st.builds(
    lambda s, ascii_: json.dumps(s, ensure_ascii=ascii_),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12), st.booleans(),
)
_scalar_text = st.one_of(_number_text, _string_text, st.sampled_from(["true", "false", "null"]))


def _obj(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"


_value_text = st.recursive(
    _scalar_text,
    lambda inner: st.one_of(
        st.lists(st.builds(lambda a, b, c: a + b + c, _ws, inner, _ws), max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(_string_text, inner), max_size=4).map(_obj),
    ),
    max_leaves=12,
)
_arguments_text = st.one_of(
    st.lists(st.tuples(_string_text, _value_text), max_size=5).map(_obj),
    st.builds(lambda a, v, b: a + v + b, _ws, _value_text, _ws),
)


def _our_rendering(arguments: str) -> str:
    try:
        value = parse_json_value(arguments)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return f'<｜DSML｜parameter name="arguments" string="true">{arguments}</｜DSML｜parameter>\n'
    lines = []
    for key, item in value.items():
        if isinstance(item, str):
            lines.append(f'<｜DSML｜parameter name="{key}" string="true">{item}</｜DSML｜parameter>\n')
        else:
            lines.append(f'<｜DSML｜parameter name="{key}" string="false">{dumps_prompt(item)}</｜DSML｜parameter>\n')
    return "".join(lines)


@settings(max_examples=250)
@given(_arguments_text)
def test_tool_call_arguments_match_deepseek_recipe(arguments: str) -> None:
    assert _our_rendering(arguments) == oracle.rendered_arguments(arguments)


@settings(max_examples=150)
@given(_value_text)
def test_schema_values_match_deepseek_recipe(value_text: str) -> None:
    """A value under an unknown keyword of a non-strict tool schema: prompt line and constraint."""
    body_params = '{"type":"object","x-v":' + value_text + "}"
    try:
        params = parse_json_value(body_params)
    except ValueError:
        # then the whole request body is rejected by the target as well
        body = '{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + body_params + "}}]}"
        assert oracle.run(body)[0] == "parse"
        return
    body = '{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + body_params + "}}]}"
    r = oracle.run(body)
    assert r[0] == "ok", r
    line = dumps_prompt({"name": "f", "description": "", "parameters": params})
    assert line in r[1]
    assert r[2][1] == '[{"type":"function","function":{"name":"f","description":null,"parameters":' + dumps_compact(params) + ',"strict":null}}]'


_minus_zero_text = st.lists(
    st.sampled_from(["-0", "-0x", "-0)", "\\", '\\"', "\\\\", " ", "a", "1", "e", ".", "-", "0", "中"]), max_size=8
).map("".join)
_minus_zero_values = st.recursive(
    st.one_of(st.just("INT_NEG_ZERO"), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), _minus_zero_text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_minus_zero_text, inner, max_size=3)),
    max_leaves=8,
)


@given(_minus_zero_values)
def test_integer_minus_zero_found_only_outside_strings(value: object) -> None:
    # the JSON text with every "INT_NEG_ZERO" leaf written as the integer token -0
    text = json.dumps(value, ensure_ascii=False).replace('"INT_NEG_ZERO"', "-0")
    expected = json.loads(text, parse_int=lambda s: -0.0 if s == "-0" else int(s))
    for form in (text, text.encode()):
        got = parse_json_value(form)
        assert json.dumps(got) == json.dumps(expected)  # the sign of zero is printed


def test_nesting_limit_with_few_and_many_brackets() -> None:
    deep = "[" * 128 + "]" * 128
    with pytest.raises(ValueError, match="recursion limit"):
        parse_json_value(deep)
    assert parse_json_value("[" * 127 + "]" * 127) is not None
    # many brackets inside strings do not count as nesting
    assert parse_json_value(json.dumps(["[{" * 200, {"a": [1]}])) == ["[{" * 200, {"a": [1]}]
