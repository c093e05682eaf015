"""DeepSeek-V4.1's output grammar (constrained decoding) and ``recipe serve`` handing it to engines.

- The recorded V4.1 outputs (fixtures/deepseek_v41/outputs_v41.jsonl, deepseek-recipe 0.2.0's
  scenarios, all three APIs) are inside the grammar of their own request when well formed — reasoning,
  content, a call in V4.1's spaced spelling, a named choice's prefilled block — and rejected where the
  output is not what a constrained decoder lets through (an undeclared tool, a bad JSON value, a cut
  inside the block, doubled bars), each at the token the grammar refuses. Ids use the synthetic V4.1
  vocabulary (tests/v41_support.py).
- The spelling is the family's: V4's spelling is refused under V4.1's grammar, V4.1's under V4's.
- With the embedded (V4) vocabulary the grammar text is still built, the same as with a V4.1
  vocabulary; a token matcher needs V4.1's vocabulary and says so (``MissingSpecialTokenError``).
- ``recipe serve`` with a V4.1 vocabulary sends the grammar to fake vLLM / SGLang engines (Lark and
  structural tag), whose llguidance check holds the scripted V4.1 output to it; without one, a V4.1
  request is a 400 on ``model`` naming the missing token, never a 500.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

import pytest
from fake_engines import HAVE_LLGUIDANCE, Script, Seen, check_structural_tag, sglang_app, vllm_app
from fixtures import jsonl
from serve_support import running
from v41_support import MODEL, synthetic_v41_path, synthetic_v41_tokenizer

import recipe
import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.tokenizer import MissingSpecialTokenError

pytest.importorskip("llguidance")

ROWS = jsonl("deepseek_v41/outputs_v41.jsonl")
TOK = synthetic_v41_tokenizer()
EOS_ID = TOK.special_tokens["<｜end▁of▁sentence｜>"]
DSML_ID = TOK.special_tokens["｜DSML｜"]
#: scenario -> (accepted?, for a rejected one: what the grammar refuses, as text before / at the refused token)
EXPECT: dict[str, tuple[bool, str]] = {
    "plain_nothink": (True, ""),
    "think_tool_v41": (True, ""),
    "named_v41": (True, ""),
    "stop_sequence": (True, ""),  # a stop string is the backend's business: the text is plain content
    "unknown_tool_v41": (False, 'invoke name="n'),  # only declared tool names
    "bad_json_param_v41": (False, 'string="false">'),  # `three` is no JSON value
    "length_inside_block_v41": (False, "incomplete"),
    "doubled_bars_v41_malformed": (False, "Let me check.\n\n<｜"),  # markup-like text is not content
}
V4_TAGS = {" calls>": "tool_calls>", " invoke": "invoke", " parameter": "parameter"}


def _ids(row: dict[str, Any]) -> list[int]:
    """The completion as an engine reports it: the recorded ids, then EOS for a ``stop`` finish."""
    return row["completion_token_ids"] + ([EOS_ID] if row["backend_finish"] == "stop" else [])


def _prep(row: dict[str, Any], model: str | None = None) -> Any:
    body = row["request"] if model is None else {**row["request"], "model": model}
    return recipe.prepare(body, row["api"], tokenizer=TOK)


def test_every_recorded_scenario_is_covered():
    assert {r["scenario"] for r in ROWS} == set(EXPECT) and len(ROWS) == 3 * len(EXPECT)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['scenario']}-{r['api']}")
def test_recorded_v41_outputs_against_their_requests_grammar(row):
    prep = _prep(row)
    assert prep.encoding == "deepseek_v41" and prep.prompt.text == row["prompt"]
    g = recipe.output_grammar(prep, tokenizer=TOK)
    assert g.encoding == "deepseek_v41" and g.stop_token_ids == (EOS_ID,)
    ok, where = EXPECT[row["scenario"]]
    got = recipe.check_output(prep, _ids(row), tokenizer=TOK)
    if ok:
        assert got.ok and got.complete, got.reason
        return
    assert not got.ok
    if where == "incomplete":
        assert got.index is None and "ends before the turn is complete" in got.reason
    else:
        before = TOK.decode(_ids(row)[:got.index])
        assert before.endswith(where), (before, got.reason)


def test_the_named_choice_starts_inside_the_v41_block_the_prompt_opened():
    row = next(r for r in ROWS if r["scenario"] == "named_v41" and r["api"] == "chat")
    prep = _prep(row)
    assert prep.prompt.text.endswith("</think>\n\n<｜DSML｜ calls>\n")
    g = recipe.output_grammar(prep, tokenizer=TOK)
    assert (g.mode, g.starts_in, g.tool_names) == ("tools_named", "tool_block", ("get_w",))
    m = recipe.OutputMatcher(prep, tokenizer=TOK)
    assert m.forced()[:3] == TOK.encode_with_special_tokens("<｜DSML｜ invoke")[:3]  # only the V4.1 invoke


def test_v41_grammar_text_spells_v41_markup_and_keeps_v41_template_tokens_out():
    row = next(r for r in ROWS if r["scenario"] == "think_tool_v41" and r["api"] == "chat")
    g = recipe.output_grammar(_prep(row), tokenizer=TOK)
    assert f"<[{DSML_ID}]>" in g.lark and '" calls>' in g.lark and " invoke name=" in g.lark
    assert "tool_calls" not in g.lark and "tool_calls" not in g.structural_tag
    assert "｜System｜>" in g.lark and "｜image｜>" in g.lark  # excluded from free text
    assert '" calls>' in g.structural_tag or " calls>" in json.dumps(g.structural_tag_dict(), ensure_ascii=False)
    check_structural_tag(g.structural_tag)  # xgrammar's own schema and compiler, where installed


def test_the_zero_parameter_invoke_v41_writes_is_accepted():
    """deepseek-recipe writes a parameterless V4.1 invoke with a blank line (its history rendering,
    docs/prompt-format.md); the grammar lets the model write it."""
    row = next(r for r in ROWS if r["scenario"] == "think_tool_v41" and r["api"] == "chat")
    prep = _prep(row)
    turn = ('R.</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="now">\n\n</｜DSML｜ invoke>\n'
            '</｜DSML｜ calls><｜end▁of▁sentence｜>')
    assert recipe.check_output(prep, TOK.encode_with_special_tokens(turn), tokenizer=TOK).ok


@pytest.mark.parametrize("scenario", ["think_tool_v41", "named_v41"])
def test_each_family_holds_the_model_to_its_own_spelling(scenario):
    """The parser reads both spellings on every model; the grammar enforces the one the prompt
    teaches: V4's tags under a V4.1 request are refused at the first tag name, and V4.1's under V4."""
    row = next(r for r in ROWS if r["scenario"] == scenario and r["api"] == "chat")
    v41_text = TOK.decode(_ids(row))
    v4_text = v41_text
    for new, old in V4_TAGS.items():
        v4_text = v4_text.replace(f"｜DSML｜{new}", f"｜DSML｜{old}")
    assert v4_text != v41_text
    v4_ids = TOK.encode_with_special_tokens(v4_text)
    refused = recipe.check_output(_prep(row), v4_ids, tokenizer=TOK)
    assert not refused.ok and TOK.decode(v4_ids[:refused.index]).endswith("｜DSML｜")
    v4_prep = _prep(row, "deepseek-v4-pro")
    assert recipe.check_output(v4_prep, v4_ids).ok  # the same turn in V4's spelling, under V4's grammar
    refused = recipe.check_output(v4_prep, _ids(row))
    assert not refused.ok


def test_embedded_vocabulary_gives_the_grammar_text_but_no_matcher():
    row = next(r for r in ROWS if r["scenario"] == "think_tool_v41" and r["api"] == "chat")
    prep = recipe.prepare(row["request"], "chat")  # the embedded DeepSeek-V4 vocabulary
    assert prep.ids is None and prep.missing_special == "<｜System｜>"
    g = recipe.output_grammar(prep)
    assert g.lark == recipe.output_grammar(_prep(row), tokenizer=TOK).lark  # the markers V4.1 shares with V4
    assert prep.output_constraint.grammar.lark == g.lark
    for make in (lambda: recipe.OutputMatcher(prep), lambda: recipe.check_output(prep, _ids(row))):
        with pytest.raises(MissingSpecialTokenError, match="<｜System｜>") as err:
            make()
        assert "deepseek_v41" in str(err.value) and "tokenizer" in str(err.value)


# ----------------------------------------------------------------------------- recipe serve

WEATHER = {"type": "function", "function": {"name": "get_w", "strict": True, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]
TURN = ('Need weather.</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_w">\n'
        '<｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n'
        '</｜DSML｜ calls><｜end▁of▁sentence｜>')
APPS = {"vllm": vllm_app, "sglang": sglang_app}


@contextmanager
def served(kind: str, backend: str, query: str, script: Script, **app_kwargs: Any):
    seen = Seen()
    with running(APPS[kind](script, seen, backend)) as fake:
        with running(recipe.serve.app(f"{kind}+{fake.url}{query}", config=ServeConfig(constrain="full"),
                                      **app_kwargs)) as s:
            yield s, seen


def _field(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    if kind == "vllm":
        return body.get("structured_outputs") or {}
    return {k: v for k, v in body["sampling_params"].items() if k in ("json_schema", "regex", "ebnf", "structural_tag")}


@pytest.mark.parametrize("kind, backend, query, field", [
    ("vllm", "xgrammar", "", "structural_tag"),
    ("vllm", "guidance", "?grammar=lark", "grammar"),
    ("sglang", "xgrammar", "", "structural_tag"),
    ("sglang", "llguidance", "?grammar=lark", "ebnf"),
])
def test_serve_sends_the_v41_grammar_to_the_engine(kind, backend, query, field):
    openai = pytest.importorskip("openai")
    script = Script(TOK.encode_with_special_tokens(TURN), chunk=3)
    with served(kind, backend, query, script, tokenizer=synthetic_v41_path()) as (s, seen):
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=30)
        c = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER], reasoning_effort="low")
    call = c.choices[0].message.tool_calls[0]
    assert c.choices[0].finish_reason == "tool_calls" and call.function.name == "get_w"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    body = {"model": MODEL, "messages": QUESTION, "tools": [WEATHER], "reasoning_effort": "low"}
    prep = recipe.prepare(body, tokenizer=TOK)
    g = recipe.output_grammar(prep, tokenizer=TOK)
    (sent,) = seen.bodies
    assert _field(kind, sent) == {field: g.lark if field in ("grammar", "ebnf") else g.structural_tag}
    assert " calls>" in (g.lark if field != "structural_tag" else g.structural_tag)
    ids = sent["prompt"] if kind == "vllm" else sent["input_ids"]
    assert ids == prep.token_ids and 128799 in ids  # the V4.1 vocabulary's <｜System｜>
    assert seen.violations == []
    if field != "structural_tag" and HAVE_LLGUIDANCE:
        assert seen.checked == 1  # the scripted V4.1 turn is inside the Lark the engine received


def test_serve_without_a_v41_vocabulary_answers_400_on_model():
    openai = pytest.importorskip("openai")
    script = Script(TOK.encode_with_special_tokens(TURN))
    with served("vllm", "xgrammar", "", script) as (s, seen):
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=30)
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER])
        import httpx

        counted = httpx.post(f"{s.url}/v1/messages/count_tokens",
                             json={"model": MODEL, "messages": QUESTION, "system": "S"})
    body = err.value.body
    assert body["param"] == "model" and "<｜System｜>" in body["message"] and "--tokenizer" in body["message"]
    assert counted.status_code == 400 and "<｜System｜>" in counted.json()["error"]["message"]
    assert seen.bodies == []


# ----------------------------------------------------------------------------- command line


def test_cli_grammar_and_serve_take_the_v41_vocabulary(tmp_path, capsys):
    from recipe.cli.main import build_parser, main
    from recipe.cli.serve import build

    row = next(r for r in ROWS if r["scenario"] == "think_tool_v41" and r["api"] == "chat")
    f = tmp_path / "req.json"
    f.write_text(json.dumps(row["request"]), encoding="utf-8")
    assert main(["--tokenizer", str(synthetic_v41_path()), "grammar", str(f), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["encoding"] == "deepseek_v41" and doc["mode"] == "tools_auto" and doc["tool_names"] == ["get_w", "now"]
    assert doc["lark"] == recipe.output_grammar(_prep(row), tokenizer=TOK).lark
    parser = build_parser()
    for argv in (["--tokenizer", str(synthetic_v41_path()), "serve"], ["serve", "--tokenizer", str(synthetic_v41_path())]):
        app = build(parser.parse_args([*argv, "--store", "memory"]))
        assert app.state.recipe.tokenizer.special_tokens["<｜System｜>"] == 128799
    # without --tokenizer each request gets its model family's own vocabulary (the embedded V4 one for V4 / V4.1)
    assert build(parser.parse_args(["serve", "--store", "memory"])).state.recipe.tokenizer is None
    assert recipe.get_encoding("deepseek_v41").tokenizer().fingerprint == recipe.load_tokenizer().fingerprint
    assert main(["serve", "--store", "memory", "--tokenizer", str(tmp_path / "missing.json"), "--port", "0"]) == 1  # unreadable input
    assert "missing.json" in capsys.readouterr().err
