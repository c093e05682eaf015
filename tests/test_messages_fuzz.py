"""Bad input on the Messages path: random and mutated JSON give a structured 400 or a prompt, nothing else."""

from __future__ import annotations

import json
import time

import fuzz_support
from fuzz_support import any_json
from hypothesis import given, settings
from hypothesis import strategies as st
from messages_strategies import messages_requests
from messages_support import run_messages

from fixtures import api_requests
from recipe.api.errors import error_body

SEEDS = [r["request"] for r in api_requests("messages")]
MAX_SECONDS_PER_INPUT = 5.0  # a generous bound that catches hangs, not a speed target
BLOCK_TYPES = ["text", "image", "document", "thinking", "redacted_thinking", "tool_use", "tool_result",
               "server_tool_use", "web_search_tool_result", "tool_addition", "tool_reference", "search_result"]

def _check(body) -> None:
    start = time.perf_counter()
    ours = run_messages(body)
    if ours["ok"]:
        assert ours["token_ids"][0] == 0 and isinstance(ours["prompt"], str)
    else:
        err = ours["error"]
        assert err.status == 400 and err.stage in ("parse", "convert") and err.message
        shaped = error_body("messages", err)
        assert shaped["type"] == "error" and set(shaped["error"]) == {"type", "message"}
        assert shaped["error"]["type"] == "invalid_request_error" and isinstance(shaped["error"]["message"], str)
        assert err.param is None or isinstance(err.param, str)
    assert time.perf_counter() - start < MAX_SECONDS_PER_INPUT


def mutated():
    return fuzz_support.mutated(st.one_of(st.sampled_from(SEEDS), messages_requests()), retype=BLOCK_TYPES)


@settings(max_examples=200, deadline=None)
@given(any_json)
def test_random_json(value):
    _check(value)
    _check(json.dumps(value))
    _check({"model": "deepseek-v4-pro", "messages": value})
    _check({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": value}]})


@settings(max_examples=300, deadline=None)
@given(mutated())
def test_mutated_requests(body):
    _check(body)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data):
    _check(data)


def test_deep_nesting_and_huge_numbers():
    user = [{"role": "user", "content": "x"}]
    _check("[" * 100000 + "]" * 100000)
    _check('{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}')
    _check({"model": "deepseek-v4-pro", "messages": user, "temperature": 1e300})
    _check({"model": "deepseek-v4-pro", "messages": user, "top_p": -1e300, "temperature": float("nan")})
    _check({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "\ud800"}]})
    deep_input = {"a": None}
    for _ in range(2000):
        deep_input = {"a": deep_input}
    _check({"model": "deepseek-v4-pro", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": deep_input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
    ]})
    _check({"model": "deepseek-v4-pro", "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {1, 2}}]},
    ]})
