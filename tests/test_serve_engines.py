"""The vLLM and SGLang connectors against local HTTP servers speaking those engines' documented wire
formats (tests/fake_engines.py: vLLM v0.12+ ``/v1/completions``, SGLang 0.5 ``/generate``), through
``recipe serve`` and the official SDKs; plus the replay engine's file format and the demo's argument
generator."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

import httpx
import jsonschema
import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, MODEL, TOOL_TURN, running

import recipe
import recipe.serve
from recipe.serve.config import ServeConfig, Timeouts
from recipe.serve.engines import engine_from_spec
from recipe.serve.engines.demo import example_value
from recipe.serve.engines.replay import load_turns
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TOK = load_tokenizer()
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@contextmanager
def engine(kind: str, script: Script):
    seen = Seen()
    with running(APPS[kind](script, seen)) as fake:
        yield fake.url, seen


@contextmanager
def served(kind: str, script: Script, **config: Any):
    with engine(kind, script) as (url, seen):
        app = recipe.serve.app(f"{kind}+{url}", config=ServeConfig(**config))
        with running(app) as s:
            yield s, seen


def _oai(url: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)


KINDS = [("vllm", False), ("sglang", False), ("sglang", True)]


@pytest.mark.parametrize("kind, incremental", KINDS, ids=["vllm", "sglang-cumulative", "sglang-incremental"])
def test_connector_streams_a_tool_call_with_the_engines_cached_tokens(kind, incremental):
    ids = TOK.encode_with_special_tokens(TOOL_TURN)
    with served(kind, Script(ids, chunk=3, cached=128, incremental=incremental)) as (s, seen):
        client = _oai(s.url)
        with client.chat.completions.stream(model=MODEL, messages=QUESTION, tools=[WEATHER]) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
        whole = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=[WEATHER])
    for c in (final, whole):
        msg = c.choices[0].message
        assert msg.reasoning_content == "I need the weather first."
        assert json.loads(msg.tool_calls[0].function.arguments) == {"city": "Paris"}
        assert c.choices[0].finish_reason == "tool_calls"
        assert c.usage.prompt_tokens_details.cached_tokens == 128 and c.usage.completion_tokens == len(ids)
    prep = recipe.prepare({"model": MODEL, "messages": QUESTION, "tools": [WEATHER]})
    body = seen.bodies[0]
    if kind == "vllm":
        assert body["prompt"] == prep.token_ids and body["max_tokens"] == prep.engine.max_tokens
        assert body["stop_token_ids"] == [1] and body["skip_special_tokens"] is False and body["return_token_ids"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert body["structured_outputs"] == {"structural_tag": recipe.output_grammar(prep).structural_tag}
    else:
        assert body["input_ids"] == prep.token_ids and body["rid"]
        sp = body["sampling_params"]
        assert sp["max_new_tokens"] == prep.engine.max_tokens and sp["stop_token_ids"] == [1]
        assert sp["skip_special_tokens"] is False and sp["no_stop_trim"] is True
        assert sp["structural_tag"] == recipe.output_grammar(prep).structural_tag


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_connector_logprobs_reach_the_chat_response(kind):
    ids = TOK.encode_with_special_tokens("Hello world." + EOS)
    with served(kind, Script(ids, chunk=2)) as (s, seen):
        c = _oai(s.url).chat.completions.create(model=MODEL, messages=QUESTION, reasoning_effort="none",
                                                logprobs=True, top_logprobs=2)
    want = -0.5 if kind == "vllm" else -0.25
    content = c.choices[0].logprobs.content
    assert "".join(e.token for e in content) == "Hello world." and all(e.logprob == want for e in content)
    assert all(len(e.top_logprobs) == 2 for e in content)
    body = seen.bodies[0]
    assert (body["logprobs"], body["return_tokens_as_token_ids"]) == (2, True) if kind == "vllm" else (
        body["return_logprob"] and body["top_logprobs_num"] == 2)


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_format_level_json_constraints_reach_the_engine_in_non_thinking_mode_only(kind):
    """``--constrain format``: plain JSON fields, which every grammar backend takes (the default, full,
    sends the turn grammar instead: tests/test_serve_constrain.py)."""
    ids = TOK.encode_with_special_tokens('{"city": "Paris"}' + EOS)
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA, "strict": True}}
    with served(kind, Script(ids), constrain="format") as (s, seen):
        client = _oai(s.url)
        c = client.chat.completions.create(model=MODEL, messages=QUESTION, reasoning_effort="none", response_format=fmt)
        assert json.loads(c.choices[0].message.content) == {"city": "Paris"}
        in_json = QUESTION + [{"role": "user", "content": "Answer in json."}]
        client.chat.completions.create(model=MODEL, messages=in_json, reasoning_effort="none",
                                       response_format={"type": "json_object"})
        client.chat.completions.create(model=MODEL, messages=in_json, response_format={"type": "json_object"})  # thinking
    strict, anyjson, thinking = seen.bodies
    if kind == "vllm":
        assert json.loads(strict["structured_outputs"]["json"]) == json.loads(
            recipe.prepare({"model": MODEL, "messages": QUESTION, "reasoning_effort": "none", "response_format": fmt}).output_constraint.schema)
        assert anyjson["structured_outputs"] == {"json_object": True}
        assert "structured_outputs" not in thinking
    else:
        assert json.loads(strict["sampling_params"]["json_schema"])["properties"] == SCHEMA["properties"]
        assert json.loads(anyjson["sampling_params"]["json_schema"]) == {"type": "object"}
        assert "json_schema" not in thinking["sampling_params"]


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_the_fakes_refuse_what_the_engines_would(kind):
    """The validation the connector tests rely on: a missing max_tokens or an unknown field is a 400."""
    with engine(kind, Script([5, 1])) as (url, _):
        if kind == "vllm":
            good = {"prompt": [0, 5], "max_tokens": 3, "stream": True}
            bad = [{"prompt": [0, 5], "stream": True}, {**good, "guided_json": {"type": "object"}},
                   {**good, "structured_outputs": {"json": {}, "regex": "a"}}, {**good, "cache_salt": ""}]
            path = "/v1/completions"
        else:
            good = {"input_ids": [0, 5], "sampling_params": {"max_new_tokens": 3}, "stream": True}
            bad = [{"input_ids": [0, 5], "sampling_params": {}, "stream": True},
                   {**good, "sampling_params": {"max_new_tokens": 3, "json_schema": "{}", "regex": "a"}},
                   {**good, "max_tokens": 3}]
            path = "/generate"
        with httpx.Client(base_url=url, timeout=10) as c:
            assert c.post(path, json=good).status_code == 200
            assert [c.post(path, json=b).status_code for b in bad] == [400] * len(bad)


def test_engine_specs():
    e = engine_from_spec("vllm+http://127.0.0.1:9/base?model=ds&name=r1")
    assert (e.base_url, e.model, e.name) == ("http://127.0.0.1:9/base", "ds", "r1")
    assert engine_from_spec("sglang+http://127.0.0.1:9").name == "sglang:127.0.0.1:9"
    for bad in ("tgi+http://x", "vllm+ftp://x", "replay:", "nope"):
        with pytest.raises(ValueError):
            engine_from_spec(bad)


# ----------------------------------------------------------------------------- replay and demo


def test_replay_file_format(tmp_path):
    turns = load_turns([{"text": "a</think>b" + EOS, "chunk": 2, "cached_tokens": 64, "delay_ms": 5, "stall_ms": 1},
                        {"ids": [5, 6], "finish": "length"}])
    assert turns[0].ids == tuple(TOK.encode_with_special_tokens("a</think>b" + EOS)) and turns[0].chunk == 2
    assert (turns[1].ids, turns[1].finish) == ((5, 6), "length")
    for bad, why in [({"text": "a", "ids": [1]}, "exactly one"), ({"ids": [-1]}, "token ids"), ({"text": "a", "finish": "eos"}, "finish"),
                     ({"text": "a", "chunk": 0}, "chunk"), ({"text": "a", "colour": 1}, "unknown field"), ([1], "object")]:
        with pytest.raises(ValueError, match=why):
            load_turns([bad])
    path = tmp_path / "r.jsonl"
    path.write_text('{"text": "x"}\n\nnot json\n')
    with pytest.raises(ValueError, match=r"r.jsonl:3"):
        load_turns(path)


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 10}, "b": {"type": "array", "items": {"type": "string"},
                                                                                    "minItems": 2}}, "required": ["a", "b"]},
    {"type": "object", "properties": {"kind": {"enum": ["x", "y"]}, "when": {"type": ["null", "string"], "minLength": 12},
                                      "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}},
    {"type": "object", "properties": {"v": {"anyOf": [{"type": "number", "exclusiveMinimum": 2}, {"type": "string"}]},
                                      "c": {"const": 3}}, "required": ["v", "c"], "additionalProperties": False},
    {"type": "object"},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_demo_arguments_are_valid_for_their_schema(schema):
    jsonschema.validate(example_value(schema), schema)


def test_vllm_cached_tokens_reported_at_the_end_reach_every_apis_final_usage():
    """vLLM reports cached tokens only in its closing usage chunk: the stream opened without them
    and the final usage of each API carries them."""
    ids = TOK.encode_with_special_tokens("Fine." + EOS)
    with served("vllm", Script(ids, cached=8)) as (s, _):
        with anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0).messages.stream(
                model=MODEL, max_tokens=50, messages=QUESTION, thinking={"type": "disabled"}) as stream:
            m = stream.get_final_message()
        assert m.usage.cache_read_input_tokens == 8 and m.usage.input_tokens > 0 and m.content[0].text == "Fine."
        with _oai(s.url).responses.stream(model=MODEL, input="Hi there. " * 10, reasoning={"effort": "none"}) as stream:
            r = stream.get_final_response()
        assert r.usage.input_tokens_details.cached_tokens == 8 and r.output_text == "Fine."


@pytest.mark.parametrize("chunk", [1, 3])
def test_vllm_frames_with_unicode_line_separators_in_their_text_are_one_line_each(chunk):
    """vLLM's frames carry their ids' text unescaped: U+2028, U+2029 and U+0085 inside a frame's JSON
    are not line breaks of the SSE stream (only ``\\n``, ``\\r\\n`` and ``\\r`` are), so the answer
    streams whole instead of failing on a split frame."""
    text = "Line one\u2028line two\u2029third\x85fourth, café."
    ids = TOK.encode_with_special_tokens(text + EOS)
    with served("vllm", Script(ids, chunk=chunk, text=True)) as (s, _):
        got = "".join(c.choices[0].delta.content or "" for c in _oai(s.url).chat.completions.create(
            model=MODEL, messages=QUESTION, stream=True, extra_body={"thinking": {"type": "disabled"}}) if c.choices)
    assert got == text


def test_vllm_connection_serves_the_next_request_after_a_finished_stream():
    """A stream that ended (the usage chunk after the finish) has its ``[DONE]`` and the body's end
    read, so the engine connection goes back to the pool: consecutive requests, streamed or not,
    reach vLLM over one connection instead of a new one each."""
    ids = TOK.encode_with_special_tokens("Fine, thanks." + EOS)
    with served("vllm", Script(ids, chunk=2, cached=4)) as (s, seen):
        client = _oai(s.url)
        for stream in (True, False, True, True):
            r = client.chat.completions.create(model=MODEL, messages=QUESTION, stream=stream,
                                               stream_options={"include_usage": True} if stream else None,
                                               extra_body={"thinking": {"type": "disabled"}})
            if stream:
                chunks = list(r)
                assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Fine, thanks."
                assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 4
            else:
                assert r.choices[0].message.content == "Fine, thanks." and r.usage.prompt_tokens_details.cached_tokens == 4
    assert len(seen.peers) == 4 and len(set(seen.peers)) == 1, seen.peers
