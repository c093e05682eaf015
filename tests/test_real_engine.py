"""``recipe serve`` in front of a real vLLM (tests/real_engine.py: vLLM on the CPU, a tiny random-weight
model with DeepSeek-V4's vocabulary, ``--max-model-len 4096``), through the official SDKs.

Random weights make the text meaningless but the contract checkable: greedy decoding (temperature 0)
is deterministic, so a stream and a whole answer must agree token for token; a grammar must hold the
output to its schema whatever the weights; usage, cached tokens, logprob counts, refusals and
aborts are the engine's own. vLLM's ``/metrics`` gauge ``vllm:num_requests_running`` shows what the
engine is still generating, and its counter ``vllm:generation_tokens_total`` what it generated: an
aborted request is far fewer tokens than the same greedy request left to run.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from typing import Any

import httpx
import jsonschema
import pytest
from real_engine import MAX_MODEL_LEN, SERVED, VLLMServer, require_vllm
from serve_support import open_sockets, running

import recipe
import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.serve.tenants import Tenant, Tenants, derive_salt

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

pytestmark = pytest.mark.real_engine
require_vllm(module=True)  # one line for the module where there is no engine (CI: every test fails instead)

MODEL = "deepseek-v4-flash"
OFF = {"thinking": {"type": "disabled"}}
RUNNING = "vllm:num_requests_running"
KEYS = {"key-a": Tenant("a", derive_salt("a")), "key-b": Tenant("b", derive_salt("b"))}
WEATHER = {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                                     "metric": {"type": "boolean"}},
    "required": ["city", "metric"], "additionalProperties": False}}}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "enum": ["Ada", "Alan"]}, "admin": {"type": "boolean"}},
          "required": ["name", "admin"], "additionalProperties": False}


def _spec(engine: VLLMServer, grammar: str = "structural_tag") -> str:
    return f"vllm+{engine.url}?model={SERVED}&grammar={grammar}"


@contextmanager
def front(engine: VLLMServer, grammar: str = "structural_tag", **config: Any):
    """recipe serve (uvicorn on 127.0.0.1, port 0) in front of ``engine``, two tenants."""
    app = recipe.serve.app(_spec(engine, grammar), config=ServeConfig(**config), tenants=Tenants(KEYS))
    with running(app) as s:
        yield s


@pytest.fixture(scope="module")
def server(vllm: VLLMServer):
    with front(vllm) as s:
        yield s


def _oai(url: str, key: str = "key-a", retries: int = 0) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=retries, timeout=120)


GENERATED = "vllm:generation_tokens_total"  # a counter: metrics() reads it like a gauge


def _idle(engine: VLLMServer, within: float = 5.0) -> float:
    """Seconds until the engine runs no request (inf: not within ``within``)."""
    return engine.wait_gauge(RUNNING, 0.0, within)


def _generated(engine: VLLMServer, run: Any) -> tuple[Any, float]:
    """``run()``'s result and the tokens the engine generated from the call until it ran no request
    again (its ``vllm:generation_tokens_total``; it must be idle before and after, within 30 s).

    A count, not a time: the tiny model writes thousands of tokens a second on a quiet machine, so
    an answer the engine kept generating can be done before a gauge is read — but its tokens count."""
    assert _idle(engine, 30) < 30
    before = engine.gauge(GENERATED)
    out = run()
    assert _idle(engine, 30) < 30
    return out, engine.gauge(GENERATED) - before


def test_the_engine_reports_its_window_and_model(server, vllm):
    assert server.state.options.context_limit == MAX_MODEL_LEN
    (e,) = server.state.reporting
    assert e.info.models == (SERVED,) and e.info.max_model_len == MAX_MODEL_LEN


def test_only_the_families_of_the_engines_vocabulary_are_served(server):
    """The engine runs DeepSeek-V4's vocabulary (its /tokenize says so): a DeepSeek-V3 request, whose
    ids would be another vocabulary's, is the API's own 400 on ``model``, and /v1/models omits it."""
    assert server.state.vocabularies == ("v4",) and server.state.vocabulary_source == "engine"
    client = _oai(server.url)
    names = {m.id for m in client.models.list()}
    assert "deepseek-v4-flash" in names and "deepseek-v3" not in names and "deepseek-r1" not in names
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="deepseek-v3", messages=[{"role": "user", "content": "Hi"}], max_tokens=5)
    assert exc.value.body["param"] == "model"


def test_three_apis_streamed_and_whole_agree_token_for_token(server, vllm):
    """Greedy decoding: each API's stream and whole answer carry the same text and usage, and the
    prompt the engine counted is recipe's own prompt; the engine generated exactly the tokens the six
    answers report (its own counter), nothing more."""
    client = _oai(server.url)
    assert _idle(vllm, 30) < 30
    before = vllm.gauge(GENERATED)
    msgs = [{"role": "user", "content": "Tell me about Paris."}]
    want_prompt = len(recipe.prepare({"model": MODEL, "messages": msgs, **OFF}).token_ids)
    whole = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=12, temperature=0, extra_body=OFF)
    chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=12, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}, extra_body=OFF))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert whole.usage.prompt_tokens == chunks[-1].usage.prompt_tokens == want_prompt
    assert whole.usage.completion_tokens == chunks[-1].usage.completion_tokens == 12
    assert whole.choices[0].finish_reason == "length" and text == whole.choices[0].message.content

    r = client.responses.create(model=MODEL, input="Tell me about Paris.", max_output_tokens=12, temperature=0,
                                reasoning={"effort": "none"})
    events = list(client.responses.create(model=MODEL, input="Tell me about Paris.", max_output_tokens=12, temperature=0,
                                          reasoning={"effort": "none"}, stream=True))
    assert events[-1].type == "response.incomplete"
    final = events[-1].response
    assert r.status == final.status == "incomplete" and r.output_text == final.output_text
    assert r.usage.output_tokens == final.usage.output_tokens == 12

    a = anthropic.Anthropic(base_url=server.url, api_key="key-a", max_retries=0)
    greedy = {"temperature": 0}  # (this anthropic SDK's create() has no temperature argument)
    m = a.messages.create(model=MODEL, max_tokens=12, messages=msgs, thinking={"type": "disabled"}, extra_body=greedy)
    with a.messages.stream(model=MODEL, max_tokens=12, messages=msgs, thinking={"type": "disabled"},
                           extra_body=greedy) as s:
        fm = s.get_final_message()
    assert m.stop_reason == fm.stop_reason == "max_tokens" and m.usage.output_tokens == fm.usage.output_tokens == 12
    assert [b.model_dump() for b in m.content] == [b.model_dump() for b in fm.content]
    assert _idle(vllm, 30) < 30
    vllm.wait_gauge(GENERATED, before + 6 * 12, 5)  # (the counter may trail the last answer by a step)
    assert vllm.gauge(GENERATED) - before == 6 * 12


def test_a_request_without_max_tokens_runs_in_the_engines_window(server, vllm):
    """The openai SDK's default (no max_tokens): recipe asks for the room the window leaves (was:
    393,216, which vLLM refuses); a whole answer stays inside the window, and a stream of it the
    client closes after three chunks is aborted (the tokens vLLM generated, against the whole answer)."""
    client = _oai(server.url)
    msgs = [{"role": "user", "content": "Go on."}]
    room = MAX_MODEL_LEN - len(recipe.prepare({"model": MODEL, "messages": msgs, **OFF}).token_ids)
    whole = client.chat.completions.create(model=MODEL, messages=msgs, temperature=0, extra_body=OFF)
    full = whole.usage.completion_tokens
    assert whole.usage.prompt_tokens + full <= MAX_MODEL_LEN
    assert full == room if whole.choices[0].finish_reason == "length" else whole.choices[0].finish_reason == "stop"
    assert full >= 1000, full  # (the control runs long enough to show an abort)

    def first_three() -> list[Any]:
        stream = client.chat.completions.create(model=MODEL, messages=msgs, stream=True, temperature=0, extra_body=OFF)
        got = [c for _, c in zip(range(3), stream)]
        stream.close()
        return got

    first, generated = _generated(vllm, first_three)
    assert len(first) == 3 and first[0].choices[0].delta.role == "assistant"
    assert 0 < generated < full / 2, (generated, full)
    probe = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=40, temperature=0, extra_body=OFF)
    stop = _stop_in(probe.choices[0].message.content)
    whole = client.chat.completions.create(model=MODEL, messages=msgs, temperature=0, stop=[stop], extra_body=OFF)
    assert whole.choices[0].finish_reason == "stop" and whole.usage.completion_tokens < 40


def test_a_prompt_over_the_window_is_recipes_context_length_exceeded(server, vllm):
    long = [{"role": "user", "content": "word " * 5000}]
    with pytest.raises(openai.BadRequestError) as exc:
        _oai(server.url).chat.completions.create(model=MODEL, messages=long, extra_body=OFF)
    assert exc.value.body["code"] == "context_length_exceeded" and exc.value.body["param"] == "messages"
    # told a larger window than the engine's, recipe passes the prompt on: the engine's refusal is
    # still recipe's own error on the prompt field, never retried
    with front(vllm, max_model_len=65536) as big:
        with pytest.raises(openai.BadRequestError) as exc:
            _oai(big.url, retries=2).chat.completions.create(model=MODEL, messages=long, max_tokens=10, extra_body=OFF)
        err = exc.value.body
        assert err["code"] == "context_length_exceeded" and err["param"] == "messages" and "4096" in err["message"]
        assert _routed(big.url) == 1


def _routed(url: str) -> float:
    text = httpx.get(url + "/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("recipe_routed_requests_total"))


def _tool_args(call: Any) -> dict[str, Any]:
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, WEATHER["function"]["parameters"])
    return args


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}],
                         ids=["required", "named"])
def test_forced_tool_calls_are_schema_valid_with_the_structural_tag(server, choice):
    client = _oai(server.url)
    for stream in (False, True):
        kw = dict(model=MODEL, messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER], tool_choice=choice,
                  max_tokens=300, temperature=0.7, seed=1, extra_body=OFF)
        if stream:
            with client.chat.completions.stream(**kw) as s:
                c = s.get_final_completion()
        else:
            c = client.chat.completions.create(**kw)
        calls = c.choices[0].message.tool_calls
        assert c.choices[0].finish_reason == "tool_calls" and calls
        assert all(call.function.name == "get_weather" and _tool_args(call) for call in calls)


def test_json_schema_output_is_valid(server):
    client = _oai(server.url)
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
    c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "A person."}],
                                       response_format=fmt, max_tokens=200, temperature=0.7, seed=3, extra_body=OFF)
    assert c.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(c.choices[0].message.content), PERSON)
    r = _oai(server.url).responses.create(model=MODEL, input="A person.", max_output_tokens=200, temperature=0.7,
                                          reasoning={"effort": "none"},
                                          text={"format": {"type": "json_schema", "name": "person", "strict": True,
                                                           "schema": PERSON}})
    jsonschema.validate(json.loads(r.output_text), PERSON)


@pytest.mark.parametrize("n", [0, 2])
def test_exactly_n_logprob_alternatives(server, n):
    client = _oai(server.url)
    c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
                                       logprobs=True, top_logprobs=n, temperature=1.0, seed=5, extra_body=OFF)
    content = c.choices[0].logprobs.content
    assert len(content) >= 1 and all(len(e.top_logprobs) == n for e in content)
    assert all(e.logprob <= 0 for e in content)
    r = client.responses.create(model=MODEL, input="Hi", max_output_tokens=8, top_logprobs=n, temperature=1.0,
                                include=["message.output_text.logprobs"], reasoning={"effort": "none"})
    lps = [i for i in r.output if i.type == "message"][0].content[0].logprobs
    assert lps and all(len(e.top_logprobs) == n for e in lps)


def test_cached_tokens_per_tenant(server):
    """A repeated prompt is served from vLLM's prefix cache (its own count reaches the usage); the
    other tenant's salt keeps it from ever hitting the first tenant's blocks."""
    msgs = [{"role": "user", "content": "A long shared context. " * 40 + f"{time.time()}"}]

    def cached(key: str) -> int:
        c = _oai(server.url, key).chat.completions.create(model=MODEL, messages=msgs, max_tokens=2, extra_body=OFF)
        return c.usage.prompt_tokens_details.cached_tokens

    assert cached("key-a") == 0
    hit = cached("key-a")
    assert hit >= 128
    assert cached("key-b") == 0 and cached("key-b") == hit


def test_a_client_cancel_aborts_the_engine_request(server, vllm):
    """A client that closes its stream after the first chunk: vLLM stops generating. Measured by the
    tokens vLLM generated (its counter), not by timing: the tiny model writes thousands of tokens a
    second on a quiet machine, so a whole answer can be done before a gauge is read. The same request
    left to run (greedy: the same answer) is the control."""
    client = _oai(server.url)
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Go"}], max_tokens=3000, temperature=0, extra_body=OFF)
    full = client.chat.completions.create(**kw).usage.completion_tokens
    assert full >= 1000, full  # (the control runs long enough to show an abort)

    def first_chunk() -> None:
        stream = client.chat.completions.create(**kw, stream=True)
        next(iter(stream))
        stream.close()

    _, generated = _generated(vllm, first_chunk)
    assert 0 < generated < full / 2, (generated, full)


def _stop_in(text: str) -> str:
    """A stop string that occurs in ``text`` after its start (greedy output repeats)."""
    words = [w for w in text.split() if w]
    assert len(words) >= 3, text
    return words[2]


KEPT = 6  # socket ends a few pooled connections may hold open (see below)


def test_an_answer_recipe_ends_at_a_stop_string_ends_the_engine_request(server, vllm):
    """recipe ends the answer at the stop string (the engine never sees it) and aborts the engine
    request: vLLM generates far fewer tokens than the same greedy request left to run (its counter;
    a time would not show it, the tiny model can finish a whole answer before a gauge is read) — for
    every request, leaving no connection open."""
    client = _oai(server.url)
    msgs = [{"role": "user", "content": "Repeat."}]
    kw = dict(model=MODEL, messages=msgs, max_tokens=3000, temperature=0, extra_body=OFF)
    full = client.chat.completions.create(**kw).usage.completion_tokens  # the control, left to run
    assert full >= 1000, full  # (long enough to show an abort)
    probe = client.chat.completions.create(**{**kw, "max_tokens": 40})
    stop = _stop_in(probe.choices[0].message.content)
    port = int(vllm.url.rsplit(":", 1)[1])
    before = open_sockets(port)
    for stream in (False, True):
        def ended() -> Any:
            if stream:
                with client.chat.completions.stream(**kw, stop=[stop]) as s:
                    return s.get_final_completion()
            return client.chat.completions.create(**kw, stop=[stop])

        c, generated = _generated(vllm, ended)
        assert c.choices[0].finish_reason == "stop" and stop not in c.choices[0].message.content
        assert 0 < generated < full / 2, (stream, generated, full)

    def many() -> int:
        t0 = time.monotonic()
        for i in range(200):
            if time.monotonic() - t0 > 60:  # bounded in time on a slow machine
                return i
            out = client.chat.completions.create(**kw, stop=[stop], stream=bool(i % 2))
            if i % 2:
                assert [c.choices[0].finish_reason for c in out if c.choices][-1] == "stop"
            else:
                assert out.choices[0].finish_reason == "stop"
        return 200

    i, generated = _generated(vllm, many)
    assert 0 < generated < i * full / 2, (i, generated, full)
    # A connection left open per request (the defect: one per answer recipe ended) would grow with
    # the requests; what may stay is a constant: open_sockets counts both ends of a loopback
    # connection, and the engine client keeps its pooled keep-alive connection, which the background
    # health probe and load scrape also reach the engine through (at most 3 connections, 6 ends).
    deadline = time.monotonic() + 3
    while open_sockets(port) > before + KEPT and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_sockets(port) <= before + KEPT < i


def test_lark_grammar_on_the_guidance_backend(vllm_guidance):
    with front(vllm_guidance, grammar="lark") as s:
        client = _oai(s.url)
        c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER],
                                           tool_choice="required", max_tokens=300, temperature=0.7, seed=2, extra_body=OFF)
        calls = c.choices[0].message.tool_calls
        assert c.choices[0].finish_reason == "tool_calls" and calls and all(_tool_args(call) for call in calls)
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
        c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "A person."}],
                                           response_format=fmt, max_tokens=200, temperature=0.7, seed=3, extra_body=OFF)
        jsonschema.validate(json.loads(c.choices[0].message.content), PERSON)


def test_a_grammar_the_engine_refuses_is_the_apis_own_400_never_retried(vllm_guidance):
    """The guidance backend takes only the legacy structural-tag shape: the engine refuses recipe's
    structural tag — the client gets the API's 400 ``engine_rejected`` once, not a retried 5xx."""
    with front(vllm_guidance, grammar="structural_tag") as s:
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as exc:
                out = _oai(s.url, retries=2).chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER], tool_choice="required",
                    max_tokens=50, stream=stream, extra_body=OFF)
                if stream:
                    list(out)
            assert exc.value.body["code"] == "engine_rejected"
        assert _routed(s.url) == 2
        with pytest.raises(anthropic.BadRequestError) as aexc:
            anthropic.Anthropic(base_url=s.url, api_key="key-a", max_retries=2).messages.create(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Weather?"}],
                tools=[{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}],
                tool_choice={"type": "any"}, thinking={"type": "disabled"})
        assert aexc.value.status_code == 400 and _routed(s.url) == 3


def test_the_engine_killed_mid_stream_ends_the_stream_with_the_apis_error(vllm_guidance):
    """Last user of the guidance engine: it is killed (SIGKILL, its whole process group) while
    streaming; the stream ends with the API's in-stream error and the next request is a 502."""
    with front(vllm_guidance) as s:
        client = _oai(s.url)
        stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Go"}],
                                                max_tokens=3000, stream=True, extra_body=OFF)
        got = [c for _, c in zip(range(3), stream)]
        assert len(got) == 3
        killer = threading.Thread(target=vllm_guidance.kill)
        t0 = time.monotonic()
        killer.start()
        with pytest.raises(openai.APIError) as exc:
            for _ in stream:
                pass
        killer.join()
        assert time.monotonic() - t0 < 30
        assert "engine" in str(exc.value.message)
        with pytest.raises(openai.InternalServerError) as exc2:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Go"}], max_tokens=5,
                                           extra_body=OFF)
        assert exc2.value.status_code == 502 and exc2.value.body["code"] == "engine_unavailable"
