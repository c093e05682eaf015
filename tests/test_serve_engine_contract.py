"""What ``recipe serve`` owes a real engine, checked fast against the local vLLM-format server of
tests/fake_engines.py (the same checks against real vLLM are in tests/test_real_engine.py):

- an answer recipe itself ends (a stop string) closes the engine's connection at once, so the engine
  stops generating and no socket is left open;
- the engine's context window, read from its ``GET /v1/models`` (or ``max_model_len`` given), sizes
  the default completion limit, and a prompt over it is recipe's own ``context_length_exceeded``;
- an engine's refusal, even inside its 200 stream, is the API's own 400 (never a retried 5xx);
- exactly N logprob alternatives per token (vLLM adds the sampled token to its top N).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, open_sockets, running

import recipe
import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TOK = load_tokenizer()
MODEL = "deepseek-v4-flash"
OFF = {"thinking": {"type": "disabled"}}
HELLO = [{"role": "user", "content": "Hello"}]


@contextmanager
def served(script: Script, **config: Any):
    seen = Seen()
    with running(APPS["vllm"](script, seen)) as fake:
        app = recipe.serve.app(f"vllm+{fake.url}", config=ServeConfig(**config))
        with running(app) as s:
            yield s, seen, int(fake.url.rsplit(":", 1)[1])


def _oai(url: str, retries: int = 0) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=retries, timeout=30)


def _settle(port: int, want: int, within: float = 3.0) -> int:
    deadline = time.monotonic() + within
    while (n := open_sockets(port)) > want and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


def test_an_answer_recipe_ends_at_a_stop_string_closes_the_engine_connection():
    """The engine stream is closed in the request's own task: the engine sees its client go (it
    aborts) and no connection stays open, for every request, streamed or not."""
    ids = TOK.encode_with_special_tokens("Hello STOP and then a lot more text " * 40 + EOS)
    n = 40
    with served(Script(ids, delay=0.01)) as (s, seen, port):
        before = open_sockets(port)
        with httpx.Client(timeout=30) as client:
            for i in range(n):
                r = client.post(s.url + "/v1/chat/completions", json={
                    "model": MODEL, "messages": HELLO, "stop": ["STOP"], "stream": i % 2 == 0, "max_tokens": 3000, **OFF})
                assert r.status_code == 200 and b"STOP" not in r.content and b"Hello" in r.content
        deadline = time.monotonic() + 5
        while len(seen.gone) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(seen.gone) == n and seen.finished == 0  # the engine saw every client go, finished none
        assert _settle(port, before) <= before  # no socket left open to the engine (the pooled keep-alive one at most)


def _chat_body(seen: Seen) -> dict[str, Any]:
    return seen.bodies[-1]


def test_the_default_completion_limit_is_the_room_the_engines_window_leaves():
    with served(Script(TOK.encode_with_special_tokens("Hi." + EOS), max_model_len=4096)) as (s, seen, _):
        client = _oai(s.url)
        c = client.chat.completions.create(model=MODEL, messages=HELLO, extra_body=OFF)
        prompt = c.usage.prompt_tokens
        assert c.choices[0].message.content == "Hi." and seen.bodies[-1]["max_tokens"] == 4096 - prompt
        r = client.responses.create(model=MODEL, input="Hello", reasoning={"effort": "none"})
        assert r.output_text == "Hi." and seen.bodies[-1]["max_tokens"] == 4096 - r.usage.input_tokens
        calls = len(seen.bodies)
        long = "word " * 5000
        with pytest.raises(openai.BadRequestError) as exc:  # recipe's own error: the engine is not asked
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": long}], extra_body=OFF)
        err = exc.value.body
        assert exc.value.status_code == 400 and err["code"] == "context_length_exceeded" and err["param"] == "messages"
        assert "4096" in err["message"]
        with pytest.raises(openai.BadRequestError) as exc:
            client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=4096, extra_body=OFF)
        assert exc.value.body["code"] == "context_length_exceeded" and exc.value.body["param"] == "max_tokens"
        with pytest.raises(openai.BadRequestError) as exc:
            client.responses.create(model=MODEL, input=long, extra_body=OFF)
        assert exc.value.body["code"] == "context_length_exceeded" and exc.value.body["param"] == "input"
        a = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0)
        m = a.messages.create(model=MODEL, max_tokens=8000, messages=HELLO)  # Messages lowers it to the room left
        assert seen.bodies[-1]["max_tokens"] == 4096 - m.usage.input_tokens
        assert len(seen.bodies) == calls + 1


def test_max_model_len_overrides_what_the_engine_reports():
    with served(Script(TOK.encode_with_special_tokens("Hi." + EOS), max_model_len=4096), max_model_len=1024) as (s, seen, _):
        c = _oai(s.url).chat.completions.create(model=MODEL, messages=HELLO, extra_body=OFF)
        assert seen.bodies[-1]["max_tokens"] == 1024 - c.usage.prompt_tokens
        assert s.state.options.context_limit == 1024


def test_the_window_is_read_again_when_the_engine_comes_back():
    """A broken connection marks the replica's info stale: the next request reads it again first, so
    an engine restarted with another ``--max-model-len`` is sized right from its first answer on."""
    script = Script(TOK.encode_with_special_tokens("Hi there, all." + EOS), max_model_len=4096)
    with served(script) as (s, seen, _):
        client = _oai(s.url)
        assert s.state.options.context_limit == 4096
        script.fault, script.after = "close_mid_stream", 1
        with pytest.raises(openai.APIStatusError) as exc:
            client.chat.completions.create(model=MODEL, messages=HELLO, extra_body=OFF)
        assert exc.value.status_code == 502
        script.max_model_len, script.fault = 2048, None  # (restarted with a smaller window)
        c = client.chat.completions.create(model=MODEL, messages=HELLO, extra_body=OFF)
        assert s.state.options.context_limit == 2048 and seen.bodies[-1]["max_tokens"] == 2048 - c.usage.prompt_tokens


def test_an_engine_that_does_not_report_a_window_keeps_the_default():
    with served(Script(TOK.encode_with_special_tokens("Hi." + EOS))) as (s, seen, _):
        c = _oai(s.url).chat.completions.create(model=MODEL, messages=HELLO, extra_body=OFF)
        assert s.state.options.context_limit == recipe.Options().context_limit
        assert seen.bodies[-1]["max_tokens"] == recipe.Options().non_thinking_max_tokens
        assert c.choices[0].message.content == "Hi."


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_engine_refusal_inside_its_200_stream_is_the_apis_own_400_never_retried(stream):
    with served(Script([], fault="refusal_frame")) as (s, seen, _):
        with pytest.raises(openai.BadRequestError) as exc:
            out = _oai(s.url, retries=2).chat.completions.create(model=MODEL, messages=HELLO, stream=stream, extra_body=OFF)
            if stream:
                list(out)
        assert exc.value.status_code == 400 and exc.value.body["code"] == "engine_rejected"
        assert "Invalid grammar specification" in exc.value.body["message"]
        assert len(seen.bodies) == 1  # the SDK did not retry it
        a = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=2)
        with pytest.raises(anthropic.BadRequestError) as aexc:
            a.messages.create(model=MODEL, max_tokens=50, messages=HELLO)
        assert aexc.value.body["error"]["type"] == "invalid_request_error" and len(seen.bodies) == 2


def test_the_engines_own_context_refusal_is_context_length_exceeded_naming_the_prompt():
    """recipe told a larger window than the engine has (``max_model_len``): the engine's 400 for a
    prompt over its window reaches the client as recipe's ``context_length_exceeded`` on the prompt."""
    long = [{"role": "user", "content": "word " * 5000}]
    with served(Script(TOK.encode_with_special_tokens("Hi." + EOS), max_model_len=4096), max_model_len=65536) as (s, seen, _):
        with pytest.raises(openai.BadRequestError) as exc:
            _oai(s.url, retries=2).chat.completions.create(model=MODEL, messages=long, max_tokens=10, extra_body=OFF)
        err = exc.value.body
        assert err["code"] == "context_length_exceeded" and err["param"] == "messages" and "4096" in err["message"]
        with pytest.raises(openai.BadRequestError) as exc:
            _oai(s.url).responses.create(model=MODEL, input=long[0]["content"], max_output_tokens=10, extra_body=OFF)
        assert exc.value.body["code"] == "context_length_exceeded" and exc.value.body["param"] == "input"
        a = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as aexc:
            a.messages.create(model=MODEL, max_tokens=10, messages=long)
        assert aexc.value.body["error"]["message"].startswith("messages: ")
        assert len(seen.bodies) == 3


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_exactly_n_logprob_alternatives_per_token(n):
    ids = TOK.encode_with_special_tokens("Hello world." + EOS)
    with served(Script(ids, chunk=2)) as (s, seen, _):
        client = _oai(s.url)
        c = client.chat.completions.create(model=MODEL, messages=HELLO, logprobs=True, top_logprobs=n, extra_body=OFF)
        content = c.choices[0].logprobs.content
        assert len(content) == len(ids) - 1 and all(len(e.top_logprobs) == n for e in content)
        assert all([t.logprob for t in e.top_logprobs] == sorted((t.logprob for t in e.top_logprobs), reverse=True)
                   for e in content)
        with client.chat.completions.stream(model=MODEL, messages=HELLO, logprobs=True, top_logprobs=n,
                                            extra_body=OFF) as stream:
            final = stream.get_final_completion()
        assert all(len(e.top_logprobs) == n for e in final.choices[0].logprobs.content)
        r = client.responses.create(model=MODEL, input="Hello", top_logprobs=n, include=["message.output_text.logprobs"],
                                    reasoning={"effort": "none"})
        lps = [item for item in r.output if item.type == "message"][0].content[0].logprobs
        assert lps and all(len(e.top_logprobs) == n for e in lps)


def test_sglangs_model_card_and_context_refusal_read_as_vllms():
    """SGLang answers ``GET /v1/models`` with the same card (``max_model_len`` = its context length)
    and refuses an over-long input with an abort whose message names its context length."""
    from recipe.serve.engines.base import EngineError
    from recipe.serve.engines.http import parse_models, refusal

    card = b'{"object":"list","data":[{"id":"deepseek-ai/DeepSeek-V4-Flash","object":"model","created":1,' \
           b'"owned_by":"sglang","root":"deepseek-ai/DeepSeek-V4-Flash","max_model_len":131072}]}'
    info = parse_models(card)
    assert info.models == ("deepseek-ai/DeepSeek-V4-Flash",) and info.max_model_len == 131072
    err = refusal(400, "The input (140000 tokens) is longer than the model's context length (131072 tokens).")
    assert err.kind == "context_length" and err.engine_status == 400
    assert refusal(400, "Invalid grammar specification.").kind == "bad_request"
    with pytest.raises(EngineError) as exc:
        parse_models(b'{"detail": "Not Found"}')
    assert exc.value.kind == "protocol"
