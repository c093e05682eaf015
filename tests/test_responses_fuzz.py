"""Bad input on the Responses path: random and mutated JSON give a structured 400 or a prompt, nothing else."""

from __future__ import annotations

import json
import time

import fuzz_support
from fuzz_support import any_json
from hypothesis import given, settings
from hypothesis import strategies as st
from responses_strategies import responses_requests
from responses_support import prepare_responses

from fixtures import api_requests, jsonl
from recipe.api.errors import error_body
from recipe.api.responses import namespace_tool_map
from recipe.errors import RequestError

SEEDS = [r["request"] for r in api_requests("responses") + jsonl("api/responses_requests.jsonl")]
MAX_SECONDS_PER_INPUT = 5.0  # a generous bound that catches hangs, not a speed target

TRICKY = (
    [None, "", "message", "function_call", "function_call_output", "reasoning", "namespace", "custom", "web_search",
     "developer", "assistant", "input_text", "input_image", "json_object", "json_schema", {}, [], {"low": None}, 1e39, -1, 2**64]
)


def _check(body) -> None:
    start = time.perf_counter()
    try:
        prep = prepare_responses(body)
    except RequestError as err:
        assert err.status == 400 and err.stage in ("parse", "convert") and err.message
        shaped = error_body("responses", err)["error"]
        assert set(shaped) == {"message", "type", "param", "code"}
        assert shaped["param"] is None or isinstance(shaped["param"], str)
    else:
        assert prep.token_ids[0] == 0 and isinstance(prep.prompt.text, str)
        assert isinstance(namespace_tool_map(prep.request), dict)
    assert time.perf_counter() - start < MAX_SECONDS_PER_INPUT


def mutated():
    return fuzz_support.mutated(st.one_of(st.sampled_from(SEEDS), responses_requests()), tricky=TRICKY)


@settings(max_examples=200)
@given(any_json)
def test_random_json(value):
    _check(value)
    _check(json.dumps(value))
    _check({"model": "deepseek-v4-pro", "input": value})
    _check({"model": "deepseek-v4-pro", "input": [value]})
    _check({"model": "deepseek-v4-pro", "input": "x", "tools": [value]})


@settings(max_examples=400)
@given(mutated())
def test_mutated_requests(body):
    _check(body)


@settings(max_examples=100)
@given(st.binary(max_size=200))
def test_random_bytes(data):
    _check(data)


def test_deep_nesting_and_huge_numbers():
    _check("[" * 100000 + "]" * 100000)
    _check('{"model": "deepseek-v4-pro", "input": "x", "max_output_tokens": 1e400}')
    _check('{"model": "deepseek-v4-pro", "input": "x", "temperature": 1e39, "top_p": -1e39}')
    _check({"model": "deepseek-v4-pro", "input": [{"role": "user", "content": "\ud800"}]})
    deep_args = "[" * 5000 + "]" * 5000
    _check({"model": "deepseek-v4-pro", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": deep_args},
                                                  {"type": "function_call_output", "call_id": "c", "output": "o"}]})
    _check({"model": "deepseek-v4-pro", "input": "x", "tools": [{"type": "namespace", "name": "n", "tools": [{"type": "function", "name": "f"}] * 300}]})
