"""The sampling fields of vLLM's and SGLang's own servers, through ``recipe serve``: each reaches the
engine's request body under that engine's name (tests/fake_engines.py records the bodies and refuses
fields outside each engine's documented set), ``n`` = 2 gives two choices (streamed and not), and a
value either engine would refuse is the API's own 400 naming the field."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, MODEL, running

import recipe
import recipe.serve
from recipe.options import PARITY_OPTIONS
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TOK = load_tokenizer()
HI = [{"role": "user", "content": "Hi"}]
#: what a vLLM / SGLang user sends in the openai SDK's extra_body (and Chat's own fields)
FIELDS = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 2, "logit_bias": {"100": -5.5}}
VLLM_WANT = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 2, "logit_bias": {"100": -5.5},
             "presence_penalty": 0.5, "frequency_penalty": -0.25, "seed": 7}
SGLANG_WANT = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_new_tokens": 2, "logit_bias": {"100": -5.5},
               "presence_penalty": 0.5, "frequency_penalty": -0.25, "sampling_seed": 7}


@contextmanager
def served(kind: str, script: Script, **kwargs: Any):
    seen = Seen()
    with running(APPS[kind](script, seen)) as fake:
        with running(recipe.serve.app(f"{kind}+{fake.url}", **kwargs)) as s:
            yield s, seen


def _oai(url: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)


def _sampling(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return body if kind == "vllm" else body["sampling_params"]


def _subset(got: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    return {k: got.get(k) for k in want}


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_every_sampling_field_reaches_the_engine_under_its_own_name(kind):
    ids = TOK.encode_with_special_tokens("Hello." + EOS)
    want = VLLM_WANT if kind == "vllm" else SGLANG_WANT
    with served(kind, Script(ids)) as (s, seen):
        c = _oai(s.url).chat.completions.create(
            model=MODEL, messages=HI, reasoning_effort="none", presence_penalty=0.5, frequency_penalty=-0.25, seed=7,
            extra_body={**FIELDS, "stop_token_ids": [128799]})
        assert c.choices[0].message.content == "Hello."
        r = _oai(s.url).responses.create(model=MODEL, input="Hi", reasoning={"effort": "none"}, extra_body={**FIELDS, "presence_penalty": 0.5,
                                                                              "frequency_penalty": -0.25, "seed": 7})
        assert r.output_text == "Hello."
        assert (r.presence_penalty, r.frequency_penalty) == (0.5, -0.25)  # the response repeats what was used
        m = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0).messages.create(
            model=MODEL, max_tokens=64, messages=HI, thinking={"type": "disabled"},
            extra_body={**FIELDS, "presence_penalty": 0.5, "frequency_penalty": -0.25, "seed": 7})
        assert m.content[-1].text == "Hello."
    assert len(seen.bodies) == 3
    for body in seen.bodies:
        assert _subset(_sampling(kind, body), want) == want
        assert "n" not in _sampling(kind, body)  # one choice: the engine's default
    assert _sampling(kind, seen.bodies[0])["stop_token_ids"] == [1, 128799]  # EOS, then the request's own


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_n_2_gives_two_choices(kind, stream):
    outs = [TOK.encode_with_special_tokens("Yes." + EOS), TOK.encode_with_special_tokens("No, not at all." + EOS)]
    with served(kind, Script(outs[0], chunk=2, cached=3, choices=outs)) as (s, seen):
        client = _oai(s.url)
        if stream:
            with client.chat.completions.stream(model=MODEL, messages=HI, reasoning_effort="none", n=2,
                                                stream_options={"include_usage": True}) as st:
                chunks = list(st)
                c = st.get_final_completion()
            usage_chunks = [e.chunk for e in chunks if e.type == "chunk" and e.chunk.usage is not None]
            assert len(usage_chunks) == 1 and usage_chunks[0].choices == []  # one usage, after both choices
        else:
            c = client.chat.completions.create(model=MODEL, messages=HI, reasoning_effort="none", n=2)
    assert [ch.index for ch in c.choices] == [0, 1]
    assert [ch.message.content for ch in c.choices] == ["Yes.", "No, not at all."]
    assert [ch.finish_reason for ch in c.choices] == ["stop", "stop"]
    assert c.usage.completion_tokens == len(outs[0]) + len(outs[1])
    assert c.usage.prompt_tokens_details.cached_tokens == 3
    assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens
    assert len(seen.bodies) == 1 and _sampling(kind, seen.bodies[0])["n"] == 2


def test_n_2_in_thinking_mode_keeps_each_choices_reasoning():
    outs = [TOK.encode_with_special_tokens("Think A.</think>A." + EOS),
            TOK.encode_with_special_tokens("Think B.</think>B." + EOS)]
    with served("vllm", Script(outs[0], choices=outs)) as (s, _):
        with _oai(s.url).chat.completions.stream(model=MODEL, messages=HI, n=2) as st:
            c = st.get_final_completion()
        whole = _oai(s.url).chat.completions.create(model=MODEL, messages=HI, n=2)
    for r in (c, whole):
        got = [(ch.message.reasoning_content, ch.message.content) for ch in r.choices]
        assert got == [("Think A.", "A."), ("Think B.", "B.")]
        assert r.usage.completion_tokens_details.reasoning_tokens > 0


def test_n_above_1_on_an_engine_without_it_is_a_400_on_n():
    with running(recipe.serve.app()) as s:  # the demo engine samples one choice
        with pytest.raises(openai.BadRequestError) as err:
            _oai(s.url).chat.completions.create(model=MODEL, messages=HI, n=2)
    assert err.value.status_code == 400 and err.value.body["param"] == "n"


@pytest.mark.parametrize("field, value", [
    ("top_k", "5"), ("top_k", -2), ("min_p", 1.5), ("repetition_penalty", 0), ("presence_penalty", 3),
    ("logit_bias", {"x": 1}), ("logit_bias", {"5": 101}), ("min_tokens", -1), ("stop_token_ids", [1.5]), ("n", 0),
    ("n", 129),
])
def test_a_value_the_engines_would_refuse_is_a_400_naming_the_field(field, value):
    with pytest.raises(recipe.RequestError) as err:
        recipe.prepare({"model": MODEL, "messages": HI, field: value}, "chat")
    assert err.value.status == 400 and err.value.param.split(".")[0].split("[")[0] == field


def test_n_above_1_outside_chat_is_refused():
    for api, body in (("responses", {"model": MODEL, "input": "Hi", "n": 2}),
                      ("messages", {"model": MODEL, "max_tokens": 9, "messages": HI, "n": 2})):
        with pytest.raises(recipe.RequestError) as err:
            recipe.prepare(body, api)
        assert err.value.param == "n"


def test_parity_options_ignore_the_fields_as_deepseek_recipe():
    body = {"model": MODEL, "messages": HI, **FIELDS, "stop_token_ids": [5]}
    assert recipe.prepare(body, "chat", options=PARITY_OPTIONS).engine.extra is None
    assert recipe.prepare(body, "chat", options=PARITY_OPTIONS).engine.stop_token_ids == (1,)
    with pytest.raises(recipe.RequestError, match="currently only n = 1"):
        recipe.prepare({"model": MODEL, "messages": HI, "n": 2}, "chat", options=PARITY_OPTIONS)
    # the prompt is the same either way: sampling fields never touch it
    assert recipe.prepare(body, "chat").token_ids == recipe.prepare(body, "chat", options=PARITY_OPTIONS).token_ids


def test_a_requests_stop_token_id_ends_the_answer_as_eos_does():
    stop = TOK.encode_ordinary(" STOP")
    assert len(stop) == 1
    prep = recipe.prepare({"model": MODEL, "messages": HI, "reasoning_effort": "none", "stop_token_ids": stop}, "chat")
    ids = TOK.encode_ordinary("Done") + stop + TOK.encode_ordinary(" more")
    body = recipe.response(prep, ids)
    assert body["choices"][0]["message"]["content"] == "Done"
    assert body["choices"][0]["finish_reason"] == "stop"
