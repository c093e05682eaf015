"""Prefix-cache accounting end to end: the index's hit for an agent loop's next request arrives in the
usage fields of Chat Completions, Responses and Messages."""

from __future__ import annotations

import pytest

from recipe.cache.keys import KeySpec
from recipe.output.driver import CompletionStream, response
from recipe.pipeline import prepare
from recipe.cache.index import MemoryPrefixIndex, lookup_usage, namespace
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
LONG = "You are a meticulous assistant. " * 60  # a system prompt of several 64-token blocks
TURN1 = {
    "chat": {"model": "deepseek-v4-pro", "messages": [{"role": "system", "content": LONG}, {"role": "user", "content": "Hi"}]},
    "responses": {"model": "deepseek-v4-pro", "instructions": LONG, "input": [{"role": "user", "content": "Hi"}]},
    "messages": {"model": "deepseek-v4-pro", "max_tokens": 100, "system": LONG, "messages": [{"role": "user", "content": "Hi"}]},
}
ANSWER = "Hello there."


def _turn2(api: str) -> dict:
    body = TURN1[api]
    if api == "chat":
        return {**body, "messages": body["messages"] + [{"role": "assistant", "content": ANSWER}, {"role": "user", "content": "More"}]}
    if api == "responses":
        return {**body, "input": body["input"] + [{"role": "assistant", "content": ANSWER}, {"role": "user", "content": "More"}]}
    return {**body, "messages": body["messages"] + [{"role": "assistant", "content": ANSWER}, {"role": "user", "content": "More"}]}


def _usage_numbers(api: str, obj: dict) -> tuple[int, int]:
    """(prompt tokens incl. cached, cached tokens) as the API reports them."""
    if api == "chat":
        u = obj["usage"]
        assert u["prompt_cache_hit_tokens"] + u["prompt_cache_miss_tokens"] == u["prompt_tokens"]
        assert u["prompt_tokens_details"]["cached_tokens"] == u["prompt_cache_hit_tokens"]
        return u["prompt_tokens"], u["prompt_cache_hit_tokens"]
    if api == "responses":
        u = obj["usage"]
        return u["input_tokens"], u["input_tokens_details"]["cached_tokens"]
    u = obj["usage"]  # Messages: input_tokens excludes cache reads
    return u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"]


@pytest.mark.parametrize("api", list(TURN1))
def test_cached_tokens_reach_the_usage_of_every_api(api):
    spec = KeySpec(block_size=64, model="deepseek-v4-pro", tokenizer=TOK.fingerprint, salt="tenant-a")
    index = MemoryPrefixIndex()
    first = prepare(TURN1[api], api)
    usage1, keys1 = lookup_usage(index, first.token_ids, spec)
    assert usage1.cached_tokens == 0  # nothing cached yet
    index.put(namespace(spec), keys1, "replica-0")

    second = prepare(_turn2(api), api)
    assert second.token_ids[: len(first.token_ids) - 2] == first.token_ids[:-2]  # the history is a prefix
    usage2, _ = lookup_usage(index, second.token_ids, spec)
    shared = next(i for i, (a, b) in enumerate(zip(first.token_ids, second.token_ids)) if a != b)
    assert usage2.cached_tokens == min(len(keys1), shared // 64) * 64 > 0
    assert usage2.cached_tokens < len(second.token_ids)

    ids = TOK.encode_ordinary(ANSWER)
    kw = dict(prompt_tokens=usage2.prompt_tokens, cached_tokens=usage2.cached_tokens, seed=1)
    assert _usage_numbers(api, response(second, ids, **kw)) == (len(second.token_ids), usage2.cached_tokens)
    cs = CompletionStream(second, **kw)
    payloads = cs.start() + cs.push(ids) + cs.finish("stop")
    final = payloads[-1]
    if api == "chat":
        final = next(p for p in reversed(payloads) if p.get("usage"))
    elif api == "responses":
        final = payloads[-1]["response"]
    else:
        start = payloads[0]["message"]["usage"]
        assert (start["input_tokens"], start["cache_read_input_tokens"]) == (usage2.uncached_input_tokens, usage2.cache_read_input_tokens)
        final = next(p for p in payloads if p["type"] == "message_delta")
    assert _usage_numbers(api, final) == (len(second.token_ids), usage2.cached_tokens)


def test_another_tenant_gets_no_hit():
    first = prepare(TURN1["chat"], "chat")
    a = KeySpec(model="deepseek-v4-pro", tokenizer=TOK.fingerprint, salt="tenant-a")
    b = KeySpec(model="deepseek-v4-pro", tokenizer=TOK.fingerprint, salt="tenant-b")
    index = MemoryPrefixIndex()
    _, keys = lookup_usage(index, first.token_ids, a)
    index.put(namespace(a), keys, "r0")
    assert lookup_usage(index, first.token_ids, a)[0].cached_tokens > 0
    assert lookup_usage(index, first.token_ids, b)[0].cached_tokens == 0
