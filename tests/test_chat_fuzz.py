"""Bad input on the Chat path: random and mutated JSON give a structured 400 or a prompt, nothing else."""

from __future__ import annotations

import json
import time

import fuzz_support
from fuzz_support import any_json
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chat_requests

from fixtures import api_requests
from recipe.api.errors import error_body
from recipe.errors import RequestError
from recipe.pipeline import prepare

SEEDS = [r["request"] for r in api_requests("chat")]
MAX_SECONDS_PER_INPUT = 5.0  # a generous bound that catches hangs, not a speed target

def _check(body) -> None:
    start = time.perf_counter()
    try:
        prep = prepare(body, "chat")
    except RequestError as err:
        assert err.status == 400 and err.stage in ("parse", "convert") and err.message
        shaped = error_body("chat", err)["error"]
        assert set(shaped) == {"message", "type", "param", "code"}
        assert shaped["param"] is None or isinstance(shaped["param"], str)
    else:
        assert prep.token_ids[0] == 0 and isinstance(prep.prompt.text, str)
    assert time.perf_counter() - start < MAX_SECONDS_PER_INPUT


def mutated():
    return fuzz_support.mutated(st.one_of(st.sampled_from(SEEDS), chat_requests()))


@settings(max_examples=300)
@given(any_json)
def test_random_json(value):
    _check(value)
    _check(json.dumps(value))
    _check({"model": "deepseek-v4-pro", "messages": value})


@settings(max_examples=400)
@given(mutated())
def test_mutated_requests(body):
    _check(body)


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_random_bytes(data):
    _check(data)


def test_deep_nesting_and_huge_numbers():
    deep = "[" * 100000 + "]" * 100000
    _check(deep)
    _check('{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}')
    _check('{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "seed": 123456789012345678901234567890}')
    _check({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "\ud800"}]})


def test_nesting_limit_and_float_overflow_match_deepseek_recipe():
    import oracle

    base = '{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"x"}],"metadata":'
    for depth in (125, 126, 127, 128):
        body = base + "[" * depth + "]" * depth + "}"
        theirs = oracle.convert("chat", body)
        try:
            prepare(body, "chat")
            ours = {"ok": True}
        except RequestError as err:
            ours = {"ok": False, "stage": err.stage}
        assert ours["ok"] == theirs["ok"] and ours.get("stage") == theirs.get("stage")
    huge = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "temperature": 1e39, "thinking": {"type": "disabled"}}
    assert not oracle.convert("chat", huge)["ok"]
    _check(huge)
