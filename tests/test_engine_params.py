"""What the engine relies on, in the library: max_tokens resolved for every request, the engine
bundle on the prepared request, model aliases with a thinking default, the body-size limit."""

from __future__ import annotations

import json

import pytest

import recipe
from recipe.api.errors import error_body
from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, PARITY_OPTIONS, ModelAlias, Options, parse_alias
from recipe.tokenizer import load_tokenizer

MODEL = "deepseek-v4-pro"
EOS = load_tokenizer().special_tokens["<｜end▁of▁sentence｜>"]


def _chat(**kw):
    return {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}], **kw}


def _responses(**kw):
    return {"model": MODEL, "input": "Hello there", **kw}


def _messages(**kw):
    return {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}], **kw}


BODIES = {"chat": _chat, "responses": _responses, "messages": _messages}
FIELD = {"chat": "max_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}


# ----------------------------------------------------------------------------- max_tokens


@pytest.mark.parametrize("api", list(BODIES))
def test_max_tokens_defaults_to_the_room_left_capped_by_the_mode_bound(api):
    prep = recipe.prepare(BODIES[api](), api)
    n = len(prep.token_ids)
    assert prep.engine.max_tokens == min(DEFAULT_OPTIONS.context_limit - n, DEFAULT_OPTIONS.thinking_max_tokens) == 393216
    small = Options(context_limit=n + 50)
    assert recipe.prepare(BODIES[api](), api, options=small).engine.max_tokens == 50


@pytest.mark.parametrize("api", list(BODIES))
def test_an_explicit_max_tokens_is_sent_as_given(api):
    prep = recipe.prepare(BODIES[api](**{FIELD[api]: 77}), api)
    assert prep.engine.max_tokens == 77 == prep.conversion()["max_tokens"]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_apis_refuse_prompt_plus_max_tokens_past_the_window(api):
    n = len(recipe.prepare(BODIES[api](), api).token_ids)
    opts = Options(context_limit=n + 10)
    assert recipe.prepare(BODIES[api](**{FIELD[api]: 10}), api, options=opts).engine.max_tokens == 10
    with pytest.raises(RequestError) as info:
        recipe.prepare(BODIES[api](**{FIELD[api]: 11}), api, options=opts)
    err = info.value
    assert (err.status, err.param, err.code) == (400, FIELD[api], "context_length_exceeded")
    assert f"maximum context length is {n + 10} tokens" in err.message and f"you requested {n + 11} tokens" in err.message


def test_messages_lowers_max_tokens_to_the_room_left():
    n = len(recipe.prepare(_messages(), "messages").token_ids)
    prep = recipe.prepare(_messages(max_tokens=5000), "messages", options=Options(context_limit=n + 10))
    assert prep.engine.max_tokens == 10


@pytest.mark.parametrize("api", list(BODIES))
def test_a_prompt_past_the_window_is_the_apis_own_400(api):
    n = len(recipe.prepare(BODIES[api](), api).token_ids)
    with pytest.raises(RequestError) as info:
        recipe.prepare(BODIES[api](), api, options=Options(context_limit=n))
    err = info.value
    assert err.status == 400
    body = error_body(api, err)
    if api == "messages":
        assert body == {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": f"messages: prompt is too long: {n} tokens > {n - 1} maximum"}}
    else:
        assert body["error"]["code"] == "context_length_exceeded"
        assert body["error"]["param"] == ("input" if api == "responses" else "messages")
        assert f"resulted in {n} tokens" in body["error"]["message"]


# ----------------------------------------------------------------------------- the engine bundle


def test_engine_bundle_carries_stop_ids_sampling_logprobs_and_constraint():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    prep = recipe.prepare(_chat(tools=tools, logprobs=True, top_logprobs=3, seed=7, reasoning_effort="none",
                                temperature=0.5, top_p=0.5))
    e = prep.engine
    assert e.stop_token_ids == (EOS,)
    assert (e.temperature, e.top_p, e.seed, e.logprobs) == (0.5, 0.5, 7, 3)
    assert e.constraint == prep.output_constraint and e.constraint.kind == "tool_call"
    thinking = recipe.prepare(_chat(tools=tools, temperature=0.5)).engine
    assert thinking.temperature == 1.0 and thinking.top_p == pytest.approx(0.95) and thinking.logprobs is None
    assert recipe.prepare(_chat(logprobs=True)).engine.logprobs == 0


# ----------------------------------------------------------------------------- aliases


def test_default_aliases_are_hosted_deepseeks_names_with_their_thinking_mode():
    chat = recipe.prepare(_chat(model="deepseek-chat"))
    reasoner = recipe.prepare(_chat(model="deepseek-reasoner"))
    assert chat.model == "deepseek-chat" and chat.conversation.thinking is False
    assert reasoner.conversation.thinking is True and reasoner.encoding == "deepseek_v4"
    # an explicit switch in the request still wins over the alias default
    assert recipe.prepare(_chat(model="deepseek-chat", reasoning_effort="high")).conversation.thinking is True
    # the prompt is the target model's
    assert chat.token_ids == recipe.prepare(_chat(reasoning_effort="none")).token_ids


def test_with_alias_extends_the_table_and_parity_has_none():
    opts = DEFAULT_OPTIONS.with_alias("house", MODEL, thinking=False)
    prep = recipe.prepare(_messages(model="house", max_tokens=10), "messages", options=opts)
    assert prep.conversation.thinking is False and prep.model == "house"
    with pytest.raises(ValueError, match="unknown target"):
        DEFAULT_OPTIONS.with_alias("x", "gpt-4o")
    with pytest.raises(RequestError) as info:
        recipe.prepare(_chat(model="deepseek-chat"), options=PARITY_OPTIONS)
    assert info.value.param == "model"


@pytest.mark.parametrize("spec, want", [
    ("fast=deepseek-v4-flash", ("fast", ModelAlias("deepseek-v4-flash", None))),
    ("r=deepseek-v4-pro:thinking", ("r", ModelAlias("deepseek-v4-pro", True))),
    ("c=deepseek-v4-pro:chat", ("c", ModelAlias("deepseek-v4-pro", False))),
])
def test_parse_alias(spec, want):
    assert parse_alias(spec) == want


@pytest.mark.parametrize("spec", ["noequals", "=x", "a=", "a=b:fast"])
def test_parse_alias_refuses_bad_specs(spec):
    with pytest.raises(ValueError):
        parse_alias(spec)


# ----------------------------------------------------------------------------- body size


@pytest.mark.parametrize("api", list(BODIES))
def test_body_over_the_limit_is_413_before_parsing(api):
    raw = json.dumps(BODIES[api](max_tokens=5)).encode()
    opts = Options(max_body_bytes=len(raw))
    assert recipe.prepare(raw, api, options=opts).engine is not None
    # not even JSON: the size check comes first
    with pytest.raises(RequestError) as info:
        recipe.prepare(b"{" * (len(raw) + 1), api, options=opts)
    err = info.value
    assert (err.status, err.code) == (413, "request_too_large")
    body = error_body(api, err)
    if api == "messages":
        assert body["error"]["type"] == "request_too_large"
    else:
        assert body["error"]["code"] == "request_too_large"


def test_text_bodies_are_measured_in_utf8_bytes():
    text = json.dumps(_chat(), ensure_ascii=False).replace("Hello there", "é" * 40)
    opts = Options(max_body_bytes=len(text) + 10)  # chars fit, bytes do not
    with pytest.raises(RequestError):
        recipe.prepare(text, options=opts)
    assert recipe.prepare(text, options=Options(max_body_bytes=len(text.encode()))).engine.max_tokens > 0
