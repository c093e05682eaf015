"""The server hands each request's output grammar to its engine (``recipe serve --constrain``).

- Body builders, for both connectors and both grammar forms: requests with tools (``auto``,
  ``required``, named), ``response_format`` (``json_schema``, ``json_object``), thinking on and off
  carry exactly the grammar ``recipe.output_grammar`` gives for them, in the field the engine's
  grammar backend takes; ``format`` sends only plain JSON fields in non-thinking mode; ``off`` nothing.
- Over real HTTP, against fakes that check grammars the way each engine's backend does
  (tests/fake_engines.py): the grammar reaches vLLM (auto / xgrammar / guidance backends) and SGLang
  (xgrammar / llguidance), and an engine that refuses it (no grammar backend, or one that does not
  take that form) still serves the request, sent once more without it.
- In-process engines get the same constraint in the neutral request; one that masks random tokens
  with ``recipe.OutputMatcher`` yields a valid tool call through the official openai SDK.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
from contextlib import contextmanager
from typing import Any

from dataclasses import replace

import jsonschema
import pytest
from fake_engines import HAVE_LLGUIDANCE, Script, Seen, check_structural_tag, check_vllm_grammar, sglang_app, vllm_app
from grammar_support import DSML_ID, EOS_ID, PREFER, THINK_END_ID
from serve_support import MODEL, TOOL_TURN, running

import recipe
import recipe.serve
from recipe.options import DEFAULT_OPTIONS
from recipe.serve.config import ServeConfig
from recipe.serve.engines import EngineDelta, engine_from_spec
from recipe.serve.engines.base import EngineRequest, constraint_at
from recipe.serve.engines.http import turn_grammar
from recipe.serve.engines.sglang import sglang_body
from recipe.serve.engines.vllm import vllm_body
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")

TOK = load_tokenizer()
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                  "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": True}}
TIME = {"type": "function", "function": {"name": "get_time", "strict": True, "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}, "offset": {"type": "integer"}},
    "required": ["zone", "offset"], "additionalProperties": False}}}
ANSWER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}

#: name -> (request fields, grammar mode)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "tools-auto": ({"tools": [WEATHER, TIME]}, "tools_auto"),
    "tools-required": ({"tools": [WEATHER, TIME], "tool_choice": "required"}, "tools_required"),
    "tools-named": ({"tools": [WEATHER, TIME], "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
                    "tools_named"),
    "json-schema": ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER,
                                                                                "strict": True}}}, "json"),
    "json-object": ({"messages": QUESTION + [{"role": "user", "content": "Answer in JSON."}],
                     "response_format": {"type": "json_object"}}, "json"),
    "tools+json": ({"tools": [WEATHER], "response_format": {"type": "json_schema", "json_schema": {
        "name": "a", "schema": ANSWER, "strict": True}}}, "tools_or_json"),
    "tools-required-keep-thinking": ({"tools": [WEATHER, TIME], "tool_choice": "required"}, "tools_required"),
}
#: a forced tool choice in thinking mode: by default rendered without thinking (the prompt opens the
#: call block); with this option thinking stays on and the grammar requires a call after the reasoning
KEEP_THINKING = replace(DEFAULT_OPTIONS, forced_tool_choice_thinking="constrain")


def _prep(case: str, thinking: bool) -> Any:
    fields, _ = CASES[case]
    body = {"model": MODEL, "messages": QUESTION, **fields}
    if not thinking:
        body["reasoning_effort"] = "none"
    return recipe.prepare(body, options=KEEP_THINKING if case.endswith("keep-thinking") else DEFAULT_OPTIONS)


def _starts_in(case: str, thinking: bool) -> str:
    if case in ("tools-required", "tools-named") or (case.endswith("keep-thinking") and not thinking):
        return "tool_block"
    return "reasoning" if thinking else "answer"


def _request(prep: Any, level: str) -> EngineRequest:
    return EngineRequest.from_prepared(prep, "req-1", None, level)


# ----------------------------------------------------------------------------- body builders


@pytest.mark.parametrize("thinking", [False, True], ids=["chat", "thinking"])
@pytest.mark.parametrize("case", list(CASES))
def test_full_level_sends_the_turn_grammar_in_each_engines_field(case, thinking):
    prep = _prep(case, thinking)
    want = recipe.output_grammar(prep)  # the public API, independently of the connector path
    assert want.mode == CASES[case][1]
    assert want.starts_in == _starts_in(case, thinking)
    req = _request(prep, "full")
    g = asyncio.run(turn_grammar(req))
    assert g is not None and g.key == want.key and req.grammar is g

    v = vllm_body(req, None, g, "structural_tag")
    assert v["structured_outputs"] == {"structural_tag": want.structural_tag} and v["stop_token_ids"] == [1]
    check_vllm_grammar(v["structured_outputs"], "xgrammar")
    v = vllm_body(req, None, g, "lark")
    assert v["structured_outputs"] == {"grammar": want.lark}
    check_vllm_grammar(v["structured_outputs"], "guidance")
    with pytest.raises(ValueError, match="Lark to EBNF"):
        check_vllm_grammar(v["structured_outputs"], "xgrammar")  # why guidance: xgrammar cannot take this Lark

    sp = sglang_body(req, g, "structural_tag")["sampling_params"]
    assert sp["structural_tag"] == want.structural_tag and sp["stop_token_ids"] == [1]
    assert not {"json_schema", "regex", "ebnf"} & set(sp)
    check_structural_tag(sp["structural_tag"])
    sp = sglang_body(req, g, "lark")["sampling_params"]
    assert sp["ebnf"] == want.lark and "structural_tag" not in sp


@pytest.mark.parametrize("thinking", [False, True], ids=["chat", "thinking"])
@pytest.mark.parametrize("case", list(CASES))
def test_format_level_sends_plain_json_fields_in_non_thinking_mode_only(case, thinking):
    prep = _prep(case, thinking)
    req = _request(prep, "format")
    assert asyncio.run(turn_grammar(req)) is None
    v, sp = vllm_body(req), sglang_body(req)["sampling_params"]
    plain = case in ("json-schema", "json-object") and not thinking
    if not plain:
        assert "structured_outputs" not in v and not {"json_schema", "regex", "ebnf", "structural_tag"} & set(sp)
        assert (req.constraint is None) == case.startswith("tools")
        return
    if case == "json-schema":
        assert json.loads(v["structured_outputs"]["json"]) == json.loads(prep.output_constraint.schema)
        assert json.loads(sp["json_schema"]) == json.loads(prep.output_constraint.schema)
    else:
        assert v["structured_outputs"] == {"json_object": True}
        assert json.loads(sp["json_schema"]) == {"type": "object"}


@pytest.mark.parametrize("case", list(CASES))
def test_off_level_sends_nothing(case):
    req = _request(_prep(case, False), "off")
    assert req.constraint is None and req.grammar is None and asyncio.run(turn_grammar(req)) is None
    assert "structured_outputs" not in vllm_body(req)
    assert not {"json_schema", "regex", "ebnf", "structural_tag"} & set(sglang_body(req)["sampling_params"])


def test_plain_requests_carry_no_constraint():
    req = _request(recipe.prepare({"model": MODEL, "messages": QUESTION}), "full")
    assert req.constraint is None and req.grammar is None
    assert "structured_outputs" not in vllm_body(req, None, None)


def test_levels_and_specs_are_checked():
    prep = _prep("tools-auto", False)
    c = prep.output_constraint
    assert (constraint_at(c, "full"), constraint_at(c, "format"), constraint_at(c, "off")) == (c, None, None)
    j = _prep("json-schema", False).output_constraint
    assert constraint_at(j, "format") is j
    for bad in (lambda: constraint_at(c, "strict"), lambda: ServeConfig(constrain="all")):
        with pytest.raises(ValueError):
            bad()
    assert engine_from_spec("vllm+http://127.0.0.1:9?grammar=lark").grammar_form == "lark"
    assert engine_from_spec("sglang+http://127.0.0.1:9").grammar_form == "structural_tag"
    for spec in ("vllm+http://127.0.0.1:9?grammar=ebnf", "sglang+http://127.0.0.1:9?grammr=lark"):
        with pytest.raises(ValueError, match="grammar"):
            engine_from_spec(spec)


def test_cli_flag_sets_the_level():
    from recipe.cli.main import build_parser
    from recipe.cli.serve import build

    parser = build_parser()
    for args, want in ([[], "full"], [["--constrain", "format"], "format"], [["--constrain", "off"], "off"]):
        ns = parser.parse_args(["serve", "--store", "memory", *args])
        assert build(ns).state.recipe.config.constrain == want


# ----------------------------------------------------------------------------- over real HTTP

APPS = {"vllm": vllm_app, "sglang": sglang_app}
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@contextmanager
def served(kind: str, backend: str, spec_query: str = "", script: Script | None = None, options: Any = None,
           **config: Any):
    seen = Seen()
    script = script or Script(TOK.encode_with_special_tokens(TOOL_TURN), chunk=4)
    with running(APPS[kind](script, seen, backend)) as fake:
        app = recipe.serve.app(f"{kind}+{fake.url}{spec_query}", options=options or DEFAULT_OPTIONS,
                               config=ServeConfig(**config))
        with running(app) as s:
            yield s, seen, s.state.pool.replicas[0].engine


def _client(url: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=30)


def _grammar_field(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    if kind == "vllm":
        return body.get("structured_outputs") or {}
    return {k: v for k, v in body["sampling_params"].items() if k in ("json_schema", "regex", "ebnf", "structural_tag")}


@pytest.mark.parametrize("kind, backend, query, field", [
    ("vllm", "auto", "", "structural_tag"),      # the defaults: vLLM's default backend, recipe's default form
    ("vllm", "xgrammar", "", "structural_tag"),
    ("vllm", "guidance", "?grammar=lark", "grammar"),
    ("sglang", "xgrammar", "", "structural_tag"),
    ("sglang", "llguidance", "?grammar=lark", "ebnf"),
])
def test_the_grammar_reaches_each_engine_backend(kind, backend, query, field):
    """Whole and streamed, auto and named: the engine gets exactly ``recipe.output_grammar``'s grammar
    in the field its backend takes; where that is Lark the fake holds its output to it (llguidance)."""
    script = Script(TOK.encode_with_special_tokens(TOOL_TURN), chunk=4)
    with served(kind, backend, query, script=script) as (s, seen, engine):
        client = _client(s.url)
        c = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER, TIME])
        script.ids = _named_turn_script().ids
        with client.chat.completions.stream(model=MODEL, messages=QUESTION, tools=[WEATHER], tool_choice=NAMED) as st:
            for _ in st:
                pass
            streamed = st.get_final_completion()
    whole_call = c.choices[0].message.tool_calls[0]
    assert whole_call.function.name == "get_weather" and json.loads(whole_call.function.arguments) == {"city": "Paris"}
    # named: the prompt opened the call block (no thinking), so the engine wrote only the invoke
    named_call = streamed.choices[0].message.tool_calls[0]
    assert streamed.choices[0].finish_reason == "tool_calls" and named_call.function.name == "get_weather"
    assert json.loads(named_call.function.arguments) == {"city": "Paris"}
    assert len(seen.bodies) == 2 and engine.grammar_refusals == 0 and seen.violations == []
    bodies = [{"model": MODEL, "messages": QUESTION, "tools": [WEATHER, TIME]},
              {"model": MODEL, "messages": QUESTION, "tools": [WEATHER], "tool_choice": NAMED}]
    for sent, asked in zip(seen.bodies, bodies):
        g = recipe.output_grammar(recipe.prepare(asked))
        assert _grammar_field(kind, sent) == {field: g.lark if field in ("grammar", "ebnf") else g.structural_tag}
    if field != "structural_tag" and HAVE_LLGUIDANCE:
        assert seen.checked == 2  # both scripted outputs are inside the Lark the engine received


def _named_turn_script() -> Script:
    """What a model writes for the named call after the prompt opened the block (invoke, close, EOS)."""
    body = TOOL_TURN.split("<｜DSML｜tool_calls>\n", 1)[1]
    return Script(TOK.encode_with_special_tokens(body), chunk=4)


REFUSING = [
    ("vllm", "outlines", "", "error_frame"),            # no grammar backend that takes either form
    ("vllm", "xgrammar", "?grammar=lark", "error_frame"),  # a backend that does not take this form
    ("vllm", "guidance", "", "error_frame"),
    ("sglang", "none", "", "error_frame"),              # --grammar-backend none / --skip-tokenizer-init
    ("sglang", "llguidance", "", "error_frame"),        # older SGLang: ValueError -> an error frame
    ("sglang", "llguidance", "", "abort"),              # newer SGLang: an abort finish with status 400
]


@pytest.mark.parametrize("kind, backend, query, refusal", REFUSING)
def test_an_engine_refusing_the_grammar_is_the_apis_own_400(kind, backend, query, refusal):
    """Whole and streamed, through both SDKs: a 400 ``invalid_request_error`` that names the form sent
    and the way out — never a 500, never an unconstrained answer; a request without a constraint is
    still served."""
    anthropic = pytest.importorskip("anthropic")
    seen = Seen()
    app = (vllm_app(Script(TOK.encode_with_special_tokens(TOOL_TURN)), seen, backend) if kind == "vllm" else
           sglang_app(Script(TOK.encode_with_special_tokens(TOOL_TURN)), seen, backend, refusal))
    with running(app) as fake, running(recipe.serve.app(f"{kind}+{fake.url}{query}")) as s:
        client = _client(s.url)
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as err:
                r = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER], stream=stream)
                for _ in r if stream else ():
                    pass
            body = err.value.body
            assert err.value.status_code == 400 and body["type"] == "invalid_request_error"
            assert body["code"] == "engine_rejected" and "--constrain" in body["message"] and "&grammar=" in body["message"]
        ant = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as aerr:
            ant.messages.create(model=MODEL, max_tokens=256, messages=QUESTION,
                                tools=[{"name": "get_weather", "input_schema": WEATHER_SCHEMA}])
        assert aerr.value.status_code == 400 and aerr.value.body["error"]["type"] == "invalid_request_error"
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[{
                "type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": True}])
        assert len(seen.bodies) == 4 and all(_grammar_field(kind, b) for b in seen.bodies)
        assert s.state.pool.replicas[0].engine.grammar_refusals == 4
        plain = client.chat.completions.create(model=MODEL, messages=QUESTION)  # nothing to constrain
        assert plain.choices[0].message.content is not None and not _grammar_field(kind, seen.bodies[-1])


def test_a_script_outside_the_grammar_is_caught_by_the_fake():
    """The fakes' llguidance check can fail: a call to an undeclared tool is refused as a real
    constrained engine could never have sampled it."""
    if not HAVE_LLGUIDANCE:
        pytest.skip("needs llguidance")
    wrong = Script(TOK.encode_with_special_tokens(TOOL_TURN.replace("get_weather", "get_wether")))
    with served("vllm", "guidance", "?grammar=lark", script=wrong) as (s, seen, _):
        with pytest.raises(openai.APIError):
            _client(s.url).chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER])
    assert len(seen.violations) == 1 and "outside the grammar" in seen.violations[0] and seen.checked == 0


SAMPLED = [
    ("vllm", "guidance", "?grammar=lark"),
    ("sglang", "llguidance", "?grammar=lark"),
]


@pytest.mark.skipif(not HAVE_LLGUIDANCE, reason="sampling under the grammar needs llguidance (test extra)")
@pytest.mark.parametrize("kind, backend, query", SAMPLED)
def test_engines_sampling_under_the_grammar_give_valid_answers_through_both_sdks(kind, backend, query):
    """The fake samples each output at random under the Lark it received (a constrained decoder with
    a random model): a required call after reasoning, a named call, a JSON answer — each comes back
    through the official SDKs as a declared tool with schema-valid arguments, or schema-valid JSON."""
    anthropic = pytest.importorskip("anthropic")
    schemas = {"get_weather": WEATHER_SCHEMA, "get_time": TIME["function"]["parameters"]}
    with served(kind, backend, query, script=Script([], sample=True, seed=11, chunk=3), options=KEEP_THINKING) as (s, seen, _):
        client = _client(s.url)
        required = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER, TIME], tool_choice="required")
        named = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER, TIME], tool_choice=NAMED,
                                               reasoning_effort="none", stream=True)
        named_calls: dict[int, list[str]] = {}
        for ch in named:
            for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
                entry = named_calls.setdefault(tc.index, ["", ""])
                entry[0] += tc.function.name or ""
                entry[1] += tc.function.arguments or ""
        fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER, "strict": True}}
        answer = client.chat.completions.create(model=MODEL, messages=QUESTION, response_format=fmt)
        ant = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0).messages.create(
            model=MODEL, max_tokens=400, messages=QUESTION, tool_choice={"type": "tool", "name": "get_time"},
            tools=[{"name": n, "input_schema": sch} for n, sch in schemas.items()])
    assert seen.violations == [] and len(seen.sampled) == 4 and all(ids[-1] == EOS_ID for ids in seen.sampled)
    msg = required.choices[0].message
    assert required.choices[0].finish_reason == "tool_calls" and msg.reasoning_content is not None
    for call in msg.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
    assert named_calls and all(n == "get_weather" for n, _ in named_calls.values())
    for _, args in named_calls.values():
        jsonschema.validate(json.loads(args), WEATHER_SCHEMA)
    jsonschema.validate(json.loads(answer.choices[0].message.content), ANSWER)
    uses = [b for b in ant.content if b.type == "tool_use"]  # ("any" is auto for DeepSeek: a named tool forces)
    assert ant.stop_reason == "tool_use" and uses and {b.name for b in uses} == {"get_time"}
    for b in uses:  # Messages tools are not strict: declared names, typed as declared, none required
        jsonschema.validate(b.input, {**schemas[b.name], "required": []})


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
@pytest.mark.parametrize("level", ["off", "format"])
def test_lower_levels_over_http(kind, level):
    backend = "auto" if kind == "vllm" else "xgrammar"
    answer = Script(TOK.encode_with_special_tokens('{"city": "Paris"}<｜end▁of▁sentence｜>'))
    with served(kind, backend, script=answer, constrain=level) as (s, seen, engine):
        client = _client(s.url)
        fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER, "strict": True}}
        c = client.chat.completions.create(model=MODEL, messages=QUESTION, reasoning_effort="none", response_format=fmt)
        assert json.loads(c.choices[0].message.content) == {"city": "Paris"}
        client.chat.completions.create(model=MODEL, messages=QUESTION, reasoning_effort="none", tools=[WEATHER])
    fmt_sent, tools_sent = (_grammar_field(kind, b) for b in seen.bodies)
    assert tools_sent == {}
    if level == "off":
        assert fmt_sent == {}
    else:
        assert set(fmt_sent) == {"json" if kind == "vllm" else "json_schema"}


# ----------------------------------------------------------------------------- in-process engines


@pytest.mark.parametrize("level", ["off", "format", "full"])
def test_in_process_engines_get_the_constraint_at_the_servers_level(level):
    got: list[EngineRequest] = []

    async def engine(request: EngineRequest):
        got.append(request)
        yield EngineDelta(TOK.encode_with_special_tokens('Sure.</think>{"city": "Paris"}<｜end▁of▁sentence｜>'), finish="stop")

    with running(recipe.serve.app(engine, config=ServeConfig(constrain=level))) as s:
        client = _client(s.url)
        fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER, "strict": True}}
        client.chat.completions.create(model=MODEL, messages=QUESTION, response_format=fmt)  # thinking
        client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER])
    json_req, tools_req = got
    assert json_req.constrain == tools_req.constrain == level
    prep_json = recipe.prepare({"model": MODEL, "messages": QUESTION, "response_format": fmt})
    if level == "off":
        assert json_req.constraint is None and tools_req.constraint is None
    else:
        assert json_req.constraint == prep_json.output_constraint
        assert json_req.grammar.key == recipe.output_grammar(prep_json).key  # reasoning, then the JSON
        assert json_req.grammar.starts_in == "reasoning" and json_req.grammar.mode == "json"
    if level == "full":
        assert tools_req.grammar.mode == "tools_auto" and tools_req.grammar.tool_names == ("get_weather",)
    else:
        assert tools_req.constraint is None


def _masked_random_engine(seed: int, chunk: int = 3):
    """An in-process engine that samples each id at random from ``recipe.OutputMatcher``'s mask (the
    request's grammar), preferring the grammar's markers and short structural tokens so a turn ends."""
    import numpy as np

    prefer = np.array(PREFER)
    marks = np.array([EOS_ID, DSML_ID, THINK_END_ID])
    seen: list[list[int]] = []

    async def engine(request: EngineRequest):
        m = recipe.OutputMatcher(request.prepared, grammar=request.grammar)
        rng = random.Random(seed)
        ids: list[int] = []
        seen.append(ids)
        out: list[int] = []
        mask = m.mask()
        for step in range(request.max_tokens):
            forced = m.forced()
            if forced:
                picks = forced
            else:
                m.mask(mask)
                on = lambda a: a[((mask[a // 32].astype(np.int64) >> (a % 32)) & 1) == 1]  # noqa: E731
                urge, r = min(step / 400, 1.0), rng.random()
                marks_on, prefer_on = on(marks), on(prefer)
                if len(marks_on) and r < 0.3 + urge:
                    picks = [int(marks_on[rng.randrange(len(marks_on))])]
                elif len(prefer_on) and r < 0.85 + urge:
                    picks = [int(prefer_on[rng.randrange(len(prefer_on))])]
                else:
                    allowed = m.allowed(mask)
                    picks = [int(allowed[rng.randrange(len(allowed))])]
            for t in picks:
                assert m.accept(t), (t, TOK.decode(ids))
            ids += picks
            out += picks
            if m.finished or len(out) >= chunk:
                yield EngineDelta(out, finish="stop" if m.finished else None)
                out = []
            if m.finished:
                return
        yield EngineDelta(out, finish="length")

    return engine, seen


@pytest.mark.skipif(importlib.util.find_spec("llguidance") is None, reason="the matcher needs llguidance (test extra)")
@pytest.mark.parametrize("thinking, choice", [(False, NAMED), (True, "required"), (False, "required")],
                         ids=["named", "thinking-required", "required"])
def test_masked_random_tokens_give_a_valid_tool_call_through_the_openai_sdk(thinking, choice):
    """Named and required calls (the prompt opens the call block), and a required call after the
    reasoning (thinking kept: ``forced_tool_choice_thinking="constrain"``)."""
    engine, seen = _masked_random_engine(seed=7)
    extra = {} if thinking else {"reasoning_effort": "none"}
    options = KEEP_THINKING if thinking else DEFAULT_OPTIONS
    with running(recipe.serve.app(engine, options=options)) as s:
        client = _client(s.url)
        whole = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER, TIME],
                                               tool_choice=choice, **extra)
        with client.chat.completions.stream(model=MODEL, messages=QUESTION, tools=[WEATHER, TIME],
                                            tool_choice=choice, **extra) as st:
            for _ in st:
                pass
            streamed = st.get_final_completion()
    schemas = {"get_weather": WEATHER_SCHEMA, "get_time": TIME["function"]["parameters"]}
    for c, ids in zip((whole, streamed), seen):
        assert ids[-1] == EOS_ID  # the walk ended its turn (not cut by max_tokens)
        choice0 = c.choices[0]
        assert choice0.finish_reason == "tool_calls" and choice0.message.tool_calls
        if thinking:
            assert choice0.message.reasoning_content is not None
        for call in choice0.message.tool_calls:
            assert call.function.name in ({"get_weather"} if choice is NAMED else set(schemas))
            jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
        prep = recipe.prepare({"model": MODEL, "messages": QUESTION, "tools": [WEATHER, TIME], "tool_choice": choice,
                               **extra}, options=options)
        assert prep.conversation.thinking is thinking and recipe.check_output(prep, ids).ok


def test_the_fakes_refuse_grammars_the_engines_would():
    """The grammar checks the connector tests rely on: each wrong shape or field is refused."""
    import httpx

    g = recipe.output_grammar(_prep("tools-auto", False))
    base_v = {"prompt": [0, 5], "max_tokens": 3, "stream": True}
    bad_v = {  # backend -> structured_outputs it refuses (a 400)
        "xgrammar": [{"structural_tag": g.structural_tag_dict()}, {"structural_tag": '{"type": "tag"}'},
                     {"grammar": g.lark}, {"structural_tag": g.structural_tag.replace('"token"', '"tokens"')},
                     {"structural_tag": g.structural_tag, "json_object": True}],
        "guidance": [{"structural_tag": g.structural_tag}, {"grammar": "start: x &&"}],
        "outlines": [{"grammar": g.lark}, {"structural_tag": g.structural_tag}],
    }
    for backend, cases in bad_v.items():
        with running(vllm_app(Script([5, 1]), Seen(), backend)) as fake, httpx.Client(base_url=fake.url, timeout=10) as c:
            assert c.post("/v1/completions", json=base_v).status_code == 200
            for so in cases:
                assert c.post("/v1/completions", json={**base_v, "structured_outputs": so}).status_code == 400, (backend, so)
    base_s = {"input_ids": [0, 5], "sampling_params": {"max_new_tokens": 3}, "stream": True}
    bad_s = {"xgrammar": [{"ebnf": g.lark}, {"structural_tag": '{"format": {}}'}],
             "llguidance": [{"structural_tag": g.structural_tag}, {"ebnf": "start: x &&"}],
             "none": [{"structural_tag": g.structural_tag}, {"json_schema": "{}"}]}
    for backend, cases in bad_s.items():
        with running(sglang_app(Script([5, 1]), Seen(), backend)) as fake, httpx.Client(base_url=fake.url, timeout=10) as c:
            for sp in cases:
                r = c.post("/generate", json={**base_s, "sampling_params": {"max_new_tokens": 3, **sp}})
                assert r.status_code == 200 and r.text.startswith('data: {"error"'), (backend, sp, r.text[:200])
            both = {"max_new_tokens": 3, "structural_tag": g.structural_tag, "json_schema": "{}"}
            assert c.post("/generate", json={**base_s, "sampling_params": both}).status_code == 400
