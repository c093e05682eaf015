"""Output grammars as text (no matcher needed): modes, markers as token ids, number bounds, exports,
the cache, the prepared request's constraint, the CLI. The matcher tests are in
test_grammar_matcher.py (llguidance) and test_grammar_xgrammar.py (xgrammar, opt-in)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recipe
from recipe.cli.main import main
from recipe.encodings.deepseek_v4.constants import DSML, EOS, THINK_END
from recipe.errors import RequestError
from recipe.schema import constrain
from recipe.schema.grammar_ir import (Grammar, Lit, Opt, Ref, Seq, Text, Tok, regex_escape, suffix_outside, text_terminal,
                                      to_lark, to_structural_tag)
from recipe.schema.json_grammar import INT_LEX, NUM_LEX, JsonRules
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
D, TE = TOK.special_tokens[DSML], TOK.special_tokens[THINK_END]
_WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"], "additionalProperties": False}


def _body(api="chat", thinking=False, choice="auto", strict=True, fmt=None, parallel=True, tools=True):
    if api == "chat":
        body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Weather?"}],
                "thinking": {"type": "enabled" if thinking else "disabled"}}
        if tools:
            body["tools"] = [{"type": "function", "function": {"name": "get_weather", "strict": strict, "parameters": _WEATHER}}]
            body["tool_choice"] = choice
        if not parallel:
            body["parallel_tool_calls"] = False
        if fmt:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "F", "strict": True, "schema": fmt}}
        return body
    if api == "responses":
        body = {"model": "deepseek-v4-pro", "input": "Weather?", "reasoning": {"effort": "high" if thinking else "none"},
                "tools": [{"type": "function", "name": "get_weather", "strict": strict, "parameters": _WEATHER}]}
        if not parallel:
            body["parallel_tool_calls"] = False
        return body
    tc = {"type": "auto"}
    if not parallel:
        tc["disable_parallel_tool_use"] = True
    return {"model": "deepseek-v4-pro", "max_tokens": 100, "messages": [{"role": "user", "content": "Weather?"}],
            "thinking": {"type": "enabled", "budget_tokens": 1024} if thinking else {"type": "disabled"},
            "tools": [{"name": "get_weather", "input_schema": _WEATHER}], "tool_choice": tc}


_TEMP = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"], "additionalProperties": False}


@pytest.mark.parametrize("body,mode,starts_in", [
    (_body(tools=False), "content", "answer"),
    (_body(tools=False, thinking=True), "content", "reasoning"),
    (_body(tools=False, fmt=_TEMP), "json", "answer"),
    (_body(), "tools_auto", "answer"),
    (_body(thinking=True), "tools_auto", "reasoning"),
    (_body(choice="required"), "tools_required", "tool_block"),
    (_body(choice={"type": "function", "function": {"name": "get_weather"}}), "tools_named", "tool_block"),
    (_body(choice="none"), "content", "answer"),
    (_body(fmt=_TEMP), "tools_or_json", "answer"),
])
def test_modes_and_where_the_prompt_left_off(body, mode, starts_in):
    g = recipe.output_grammar(recipe.prepare(body))
    assert (g.mode, g.starts_in, g.encoding) == (mode, starts_in, "deepseek_v4")
    assert g.stop_token_ids == (TOK.special_tokens[EOS],)
    assert g.lark.startswith("start: ")
    st = json.loads(g.structural_tag)
    assert st["type"] == "structural_tag" and st == g.structural_tag_dict()


def test_required_choice_in_thinking_mode_forces_the_block_after_reasoning():
    prep = recipe.prepare(_body(thinking=True, choice="required"), options=recipe.Options(forced_tool_choice_thinking="constrain"))
    g = recipe.output_grammar(prep)
    assert (g.mode, g.starts_in) == ("tools_required", "reasoning")
    start = g.lark.splitlines()[0]
    assert start.startswith(f"start: T0 <[{TE}]>") and f"<[{D}]>" in start and "|" not in start


def test_markers_are_special_token_ids_never_spelled():
    for body in (_body(), _body(thinking=True), _body(choice="required"), _body(fmt=_TEMP)):
        g = recipe.output_grammar(recipe.prepare(body))
        literals = re.findall(r'"(?:[^"\\]|\\.)*"', g.lark)
        assert not any(s in json.loads(lit) for lit in literals for s in (DSML, THINK_END, EOS, "DSML"))
        assert f"<[{D}]>" in g.lark
        text = g.structural_tag
        assert f'"token":{D}' in text
        consts = [f["value"] for f in _formats(g.structural_tag_dict()) if f["type"] == "const_string"]
        assert not any(DSML in c or THINK_END in c for c in consts)


def _formats(node):
    if isinstance(node, dict):
        if "type" in node:
            yield node
        for v in node.values():
            yield from _formats(v)
    elif isinstance(node, list):
        for v in node:
            yield from _formats(v)


def test_free_text_excludes_special_spellings_and_content_excludes_dsml():
    g = recipe.output_grammar(recipe.prepare(_body(thinking=True)))
    texts = [f for f in _formats(g.structural_tag_dict()) if f["type"] == "any_text"]
    assert texts
    for f in texts:
        assert {"</think>", "｜User｜>", "｜end▁of▁sentence｜>", "<think>"} <= set(f["excludes"])
        assert not any(w.startswith("<｜") for w in f["excludes"])  # cheap for xgrammar, same tokens out
    assert any("DSML" in f["excludes"] for f in texts)  # content
    assert "<\\/think>" in g.lark and "DSML" in g.lark


def test_strict_tool_parameters_in_schema_order_with_types():
    g = recipe.output_grammar(recipe.prepare(_body()))
    inv = next(line for line in g.lark.splitlines() if line.startswith("invoke0:"))
    assert inv.index('parameter name=\\"city\\" string=\\"true\\">') < inv.index('parameter name=\\"days\\" string=\\"false\\">')
    assert "(" not in inv.split("invoke name")[1].split("</")[0] or "?" not in inv  # both required
    assert INT_LEX.lark[1:-1] in g.lark  # days: a bounded integer
    syntax = recipe.output_grammar(recipe.prepare(_body()), "syntax")
    assert "p_any" in syntax.lark and "city" not in syntax.lark and syntax.key != g.key


def test_args_auto_uses_the_schema_only_for_strict_tools():
    assert "p_any" in recipe.output_grammar(recipe.prepare(_body(strict=False))).lark
    assert "p_any" not in recipe.output_grammar(recipe.prepare(_body(strict=False)), "schema").lark
    with pytest.raises(ValueError, match="args"):
        recipe.output_grammar(recipe.prepare(_body()), "loose")  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_parallel_calls_follow_the_request(api):
    on = recipe.output_grammar(recipe.prepare(_body(api)))
    off = recipe.output_grammar(recipe.prepare(_body(api, parallel=False)))
    assert "(invoke0)+" in on.lark.splitlines()[0] and "(invoke0)+" not in off.lark and "invoke0" in off.lark
    assert on.key != off.key


def test_numbers_are_bounded_like_the_parser():
    int_rx = re.compile(INT_LEX.lark.strip("/"))
    num_rx = re.compile(NUM_LEX.lark.strip("/"))
    assert int_rx.fullmatch("9" * 19) and not int_rx.fullmatch("1" * 20) and not int_rx.fullmatch("01")
    for ok in ("0", "-1.5", "3e10", "1.25E-07", "123456789012345678.5"):
        assert num_rx.fullmatch(ok), ok
        assert recipe.jsonfmt.parse_json_value(ok) is not None
    for bad in ("1e999", "1" * 300, "1.", ".5", "1e", "NaN", "Infinity", "+1"):
        assert not num_rx.fullmatch(bad), bad
    # the largest value the grammar lets through is far inside f64
    assert float("9" * 19 + "." + "9" * 32 + "e99") < 1e300
    # nested numbers use the same lexemes (no %json anywhere)
    g = recipe.output_grammar(recipe.prepare(_body(tools=False, fmt={
        "type": "object", "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {
            "n": {"type": "number"}}, "required": ["n"], "additionalProperties": False}}},
        "required": ["a"], "additionalProperties": False})))
    assert "%json" not in g.lark and NUM_LEX.lark in g.lark


def test_json_rules_report_what_they_do_not_enforce():
    rules = {}
    jr = JsonRules(rules, ("<｜",))
    jr.value({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$", "format": "email"},
                                                "n": {"type": "integer", "minimum": 3}, "o": {"oneOf": [{"type": "string"}]}},
              "required": ["s"]})
    assert set(jr.unenforced) == {"$/properties/s: pattern", "$/properties/s: format",
                                  "$/properties/o: oneOf (enforced as anyOf)"}
    tool = {"type": "function", "function": {"name": "f", "strict": False, "parameters": {"type": "object", "properties": {
        "when": {"type": "string", "format": "email"}}, "required": ["when"], "additionalProperties": False}}}
    g = recipe.output_grammar(recipe.prepare({**_body(), "tools": [tool]}), "schema")
    assert g.unenforced == ("f/when: format (raw string value)",)
    # a strict tool promises its schema: what the grammar cannot enforce is refused, naming the path
    tool["function"]["strict"] = True
    with pytest.raises(RequestError) as err:
        recipe.prepare({**_body(), "tools": [tool]})
    assert err.value.param == "tools[0].function.parameters.properties.when" and "format" in err.value.message


def test_local_refs_and_recursion():
    rules = {}
    jr = JsonRules(rules, ())
    node = jr.value({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}},
                                     "additionalProperties": False}}, "$ref": "#/$defs/n"})
    assert isinstance(node, Ref) and node.name in rules
    lark = to_lark(Grammar(node, rules))
    assert lark.count(node.name) >= 3  # defined once, used by itself


def test_printers_on_a_small_grammar():
    g = Grammar(Seq((Text(("</think>",)), Tok(TE), Opt(Lit("a\n\"b")), Ref("r"))), {"r": Lit("x")})
    lark = to_lark(g)
    assert lark.splitlines()[0] == f'start: T0 <[{TE}]> ("a\\n\\"b")? r'
    assert "T0: /(?s:.*)/ & ~/(?s:.*)(?:<\\/think>)(?s:.*)/" in lark
    st = to_structural_tag(g)["format"]
    assert st["elements"][:2] == [{"type": "any_text", "excludes": ["</think>"]}, {"type": "token", "token": TE}]
    assert st["elements"][2] == {"type": "optional", "content": {"type": "const_string", "value": 'a\n"b'}}
    assert st["elements"][3] == {"type": "grammar", "grammar": 'root ::= r_r\nr_r ::= "x"'}


def test_text_suffix_follows_the_exclusion_only_where_that_is_the_same_language():
    # no DeepSeek special spelling ends with "<" or holds "</": free text then "</" compiles as
    # (text without the words) "</" (llguidance checks it for emptiness at once)
    t = Text(("</think>", "｜User｜>", "｜DSML｜"), "</")
    assert suffix_outside(t)
    assert text_terminal(t) == '(/(?s:.*)/ & ~/(?s:.*)(?:<\\/think>|｜DSML｜|｜User｜>)(?s:.*)/) "</"'
    # a word ending with a prefix of the suffix, or inside it, could straddle: the suffix stays inside
    for words, sfx in ((("a<",), "</"), (("/",), "</"), (("x<",), "<"), (("</",), "</")):
        n = Text(words, sfx)
        assert not suffix_outside(n)
        assert text_terminal(n).startswith(f"/(?s:.*){regex_escape(sfx)}/ & ~/")
    g = recipe.output_grammar(recipe.prepare(_body(thinking=True)))
    assert re.search(r'^T\d+: \(/\(\?s:\.\*\)/ & ~/.*\) "</"$', g.lark, re.M)  # raw parameter values
    assert re.search(r'^T\d+: \(/\(\?s:\.\*\)/ & ~/.*\) "<"$', g.lark, re.M)  # content before the block


def test_a_parameter_shared_by_tools_is_one_rule_and_keeps_each_tools_notes():
    path = {"type": "string", "pattern": "^/"}
    tools = [{"type": "function", "function": {"name": n, "parameters": {
        "type": "object", "properties": {"path": path, **extra}, "required": ["path", *extra],
        "additionalProperties": False}}} for n, extra in (("read", {}), ("write", {"text": {"type": "string"}}))]
    g = recipe.output_grammar(recipe.prepare({**_body(), "tools": tools}), "schema")
    lines = g.lark.splitlines()
    rule = next(line.split(":")[0] for line in lines if 'parameter name=\\"path\\"' in line)
    assert rule.startswith("param") and sum(f" {rule}" in line for line in lines) == 2  # invoke0, invoke1
    assert g.unenforced == ("read/path: pattern (raw string value)", "write/path: pattern (raw string value)")
    # a $ref resolves against its own tool: never shared
    ref_tools = [{"type": "function", "function": {"name": n, "strict": True, "parameters": {
        "type": "object", "$defs": {"p": {"type": t}}, "properties": {"v": {"$ref": "#/$defs/p"}}, "required": ["v"],
        "additionalProperties": False}}} for n, t in (("a", "integer"), ("b", "boolean"))]
    g = recipe.output_grammar(recipe.prepare({**_body(), "tools": ref_tools}))
    assert "param0" not in g.lark and '"true" | "false"' in g.lark


def test_grammars_are_cached_by_key_and_frozen():
    prep = recipe.prepare(_body())
    a = recipe.output_grammar(prep)
    b = recipe.output_grammar(recipe.prepare(_body()))
    assert a is b and len(a.key) == 64
    with pytest.raises(AttributeError):
        a.lark = ""  # type: ignore[misc]
    other = recipe.output_grammar(recipe.prepare({**_body(), "tools": [{"type": "function", "function": {
        "name": "get_weather", "strict": True, "parameters": {**_WEATHER, "properties": dict(reversed(_WEATHER["properties"].items()))}}}]}))
    assert other.key != a.key  # property order is part of the grammar


def test_prepared_constraint_carries_the_grammar_and_keeps_parity_strings():
    prep = recipe.prepare(_body())
    oc = prep.output_constraint
    assert oc.kind == "tool_call" and oc.grammar is recipe.output_grammar(prep)
    assert prep.conversion()["output_constraint"] == {"kind": oc.kind, "schema": oc.schema}
    assert recipe.prepare(_body(tools=False)).output_constraint is None


def test_engine_fields():
    g = recipe.output_grammar(recipe.prepare(_body()))
    assert g.engine_fields("vllm") == {"structured_outputs": {"structural_tag": g.structural_tag}, "stop_token_ids": [1]}
    assert g.engine_fields("vllm-guidance")["structured_outputs"] == {"grammar": g.lark}
    assert g.engine_fields("sglang") == {"structural_tag": g.structural_tag, "stop_token_ids": [1]}
    with pytest.raises(ValueError):
        g.engine_fields("tgi")  # type: ignore[arg-type]


def test_without_llguidance_grammars_build_and_the_matcher_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)
    monkeypatch.setattr(constrain, "_compiled", type(constrain._compiled)())
    prep = recipe.prepare({**_body(), "tools": [{"type": "function", "function": {"name": "fresh_tool", "parameters": {"type": "object"}}}]})
    assert recipe.output_grammar(prep).lark
    with pytest.raises(ImportError, match=r"recipe\[constrain\]"):
        recipe.OutputMatcher(prep)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def _write(tmp_path, body):
    p = tmp_path / "req.json"
    p.write_text(json.dumps(body))
    return str(p)


def test_cli_grammar_formats(tmp_path, capsys):
    path = _write(tmp_path, _body())
    assert main(["grammar", path]) == 0
    lark = capsys.readouterr().out
    assert lark == recipe.output_grammar(recipe.prepare(_body())).lark
    assert main(["grammar", path, "--format", "structural-tag"]) == 0
    assert json.loads(capsys.readouterr().out)["type"] == "structural_tag"
    assert main(["grammar", path, "--format", "json", "--args", "syntax"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "tools_auto" and out["args"] == "syntax" and out["tool_names"] == ["get_weather"]


def test_cli_grammar_errors(tmp_path, capsys):
    assert main(["grammar", _write(tmp_path, {"model": "gpt-4o", "messages": []})]) == 1
    err = capsys.readouterr()
    assert json.loads(err.out)["error"] and "recipe: request rejected" in err.err
    assert main(["grammar", path := _write(tmp_path, _body()), "--format", "ebnf"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert path


def test_cli_complete_check(tmp_path, capsys):
    pytest.importorskip("llguidance")
    req = _write(tmp_path, _body())
    good = tmp_path / "good.txt"
    good.write_text('\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
                    'string="true">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">3'
                    '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>')
    assert main(["complete", "--request", req, "--text", str(good), "--check"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["choices"][0]["finish_reason"] == "tool_calls" and "ok" in out.err
    bad = tmp_path / "bad.txt"
    bad.write_text(good.read_text().replace('"false">3', '"false">"3"'))
    assert main(["complete", "--request", req, "--text", str(bad), "--check"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["object"] == "chat.completion"
    assert re.search(r"output check failed at token \d+: token \d+ \('\"", out.err)


def test_a_grammar_that_does_not_compile_is_a_named_error(tmp_path, capsys):
    """An invalid response_format regex (accepted by prepare, as deepseek-recipe accepts it) makes no
    grammar: check_output raises GrammarCompileError (a ValueError) and ``complete --check`` exits 3
    (could not check: not 1, which means outside the grammar) with the reason, not an internal error."""
    pytest.importorskip("llguidance")
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "regex", "regex": "(["}}
    prep = recipe.prepare(body)
    with pytest.raises(constrain.GrammarCompileError, match="invalid regex"):
        recipe.check_output(prep, [1])
    text = tmp_path / "abc.txt"
    text.write_text("abc<｜end▁of▁sentence｜>")
    assert main(["complete", "--request", _write(tmp_path, body), "--text", str(text), "--check"]) == 3
    err = capsys.readouterr().err
    assert "--check: grammar does not compile" in err and "(not checked)" in err and "internal error" not in err


def test_check_without_llguidance_exits_3_not_1(tmp_path, capsys, monkeypatch):
    """llguidance missing is not "outside the grammar": a distinct exit status (3), the hint on stderr."""
    import builtins

    real_import = builtins.__import__

    def no_llguidance(name, *args, **kwargs):
        if name == "llguidance" or name.startswith("llguidance."):
            raise ImportError("No module named 'llguidance'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_llguidance)
    for mod in [m for m in sys.modules if m == "llguidance" or m.startswith("llguidance.")]:
        monkeypatch.delitem(sys.modules, mod)
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}]}
    text = tmp_path / "abc.txt"
    text.write_text("abc<｜end▁of▁sentence｜>")
    assert main(["complete", "--request", _write(tmp_path, body), "--text", str(text), "--check"]) == 3
    err = capsys.readouterr().err
    assert "needs llguidance: pip install 'dsrecipe[constrain]'" in err and "(not checked)" in err


def test_cli_grammar_runs_as_a_command():
    out = subprocess.run([sys.executable, "-m", "recipe", "grammar", "--example", "weather", "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["encoding"] == "deepseek_v4"


_KEYS = st.sampled_from(["type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
                         "oneOf", "allOf", "$ref", "minItems", "maxItems", "minLength", "maxLength", "pattern", "$defs"])
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array", "bogus"])
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**70), st.floats(allow_nan=False), st.text(max_size=5),
                  _TYPES, st.lists(_TYPES, max_size=3), st.sampled_from(["#/$defs/a", "#", "#/x/y", "http://x"]))
_SCHEMA = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(_KEYS, st.text(max_size=4)), inner, max_size=5)), max_leaves=25)


@settings(max_examples=300)
@given(_SCHEMA, _SCHEMA)
def test_any_json_value_as_a_schema_builds_a_grammar(params, answer):
    """Schemas reach the builder validated, but the builder does not rely on it: any JSON value
    gives a grammar (what it cannot follow is listed as unenforced), never an exception."""
    from recipe.encodings.deepseek_v4.grammar import build_grammar
    from recipe.schema.turn import ToolSpec, TurnSpec

    spec = TurnSpec("reasoning", False, (ToolSpec("t", params, True), ToolSpec("u", params, False)), "auto", False,
                    True, "json", answer)
    parts = build_grammar(spec, TOK)
    assert to_lark(parts.grammar).startswith("start: ")
    json.dumps(to_structural_tag(parts.grammar))


def test_integers_beyond_64_bits_in_a_schema():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "enum": [2**70, 1]}}, "required": ["n"],
              "additionalProperties": False}
    prep = recipe.prepare({**_body(), "tools": [{"type": "function", "function": {
        "name": "big", "strict": False, "parameters": schema}}]})
    g = prep.output_constraint.grammar
    assert g is recipe.output_grammar(prep) and str(2**70) in recipe.output_grammar(prep, "schema").lark
