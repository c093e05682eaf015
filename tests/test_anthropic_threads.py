"""Anthropic message threads (beta) are refused with a clear error naming the beta header, in the shape
the official SDK understands: with ``unsupported_request_behavior="continue_unthreaded"`` it resends
the full history without ``thread`` and the conversation goes on."""

from __future__ import annotations

import pytest

import oracle
from recipe.api.messages import THREADS_BETA
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer
from sdk_server import serve

anthropic = pytest.importorskip("anthropic")
BODY = {"model": "deepseek-v4-pro", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}], "thinking": {"type": "disabled"}}


def _answer(api, body, headers):
    thinking = (body.get("thinking") or {}).get("type") != "disabled"
    text = "Greet back.</think>Hello." if thinking else "Hello."
    return load_tokenizer().encode_with_special_tokens(text), "stop", None


def test_thread_field_is_refused_naming_the_beta():
    with pytest.raises(RequestError) as info:
        prepare({**BODY, "thread": {"type": "create"}}, "messages")
    err = info.value
    assert err.status == 400 and THREADS_BETA in err.message and err.param == "thread"
    assert err.details == {"error_code": "thread_unsupported_request", "unsupported": ["thread"]}


def test_parity_options_ignore_the_field_as_deepseek_recipe_does():
    body = {**BODY, "thread": {"type": "continue", "previous_message_id": "msg_x"}}
    assert oracle.convert("messages", body)["ok"]
    assert prepare(body, "messages", options=PARITY_OPTIONS).token_ids == oracle.convert("messages", BODY)["token_ids"]


def _client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=20)


def test_sdk_thread_continues_unthreaded():
    with serve(_answer, seed=1) as server:
        thread = _client(server).beta.messages.thread(
            model="deepseek-v4-pro", max_tokens=50, unsupported_request_behavior="continue_unthreaded"
        )
        first = thread.send({"role": "user", "content": "Hi"})
        second = thread.send({"role": "user", "content": "And again?"})
    texts = [next(b.text for b in reply.content if b.type == "text") for reply in (first, second)]
    assert texts == ["Hello.", "Hello."]
    refused = [body for _, body, _ in server.errors]
    assert refused and all("thread" in body for body in refused)
    last = server.requests[-1][1]
    assert "thread" not in last and [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]


def test_sdk_thread_default_raises_the_servers_error():
    with serve(_answer, seed=1) as server:
        thread = _client(server).beta.messages.thread(model="deepseek-v4-pro", max_tokens=50)
        with pytest.raises(anthropic.BadRequestError) as info:
            thread.send({"role": "user", "content": "Hi"})
    assert THREADS_BETA in str(info.value)
