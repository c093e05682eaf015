"""What a hostile pass over ``recipe serve`` found holding, kept holding: special-token spellings in
any text field of any API never reach the engine as special ids (but for the grounding tokens a model
wrote, given back in an assistant turn's content, as deepseek-recipe encodes them: test_grounding_tokens.py), malformed bodies are the API's own
4xx (never a 500) while the server stays responsive. Real uvicorn on 127.0.0.1 and the
vLLM-protocol fake engine (it records the prompt ids it was sent); bounded in count and time."""

from __future__ import annotations

import json

import httpx
import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, MODEL, running

import recipe.serve
from recipe.encodings.deepseek_v4.constants import GROUNDING_TOKENS
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
ALL_SPECIALS = "".join(sorted(TOK.special_tokens))  # every added token's spelling
IDS = TOK.encode_with_special_tokens("Fine." + EOS)
GROUNDING_IDS = frozenset(TOK.special_tokens[g] for g in GROUNDING_TOKENS)


def _bodies(t: str) -> dict[str, dict]:
    tool = {"name": "f", "description": "desc " + t,
            "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": t}}}}
    return {
        "/v1/chat/completions": {"model": MODEL, "messages": [
            {"role": "system", "content": "sys " + t}, {"role": "user", "content": "user " + t},
            {"role": "assistant", "content": "answer " + t, "reasoning_content": "why " + t},
            {"role": "user", "content": [{"type": "text", "text": t}]}],
            "tools": [{"type": "function", "function": tool}]},
        "/v1/responses": {"model": MODEL, "instructions": "inst " + t, "input": [
            {"role": "user", "content": "user " + t},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": json.dumps({"q": t})},
            {"type": "function_call_output", "call_id": "c1", "output": "result " + t},
            {"role": "user", "content": [{"type": "input_text", "text": t}]}],
            "tools": [{"type": "function", **tool}]},
        "/v1/messages": {"model": MODEL, "max_tokens": 50, "system": "sys " + t, "messages": [
            {"role": "user", "content": "user " + t},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"q": t}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "result " + t},
                                         {"type": "text", "text": t}]}],
            "tools": [{"name": "f", "description": "desc " + t, "input_schema": tool["parameters"]}]},
    }


def _specials(ids: list[int]) -> list[int]:
    return [i for i in ids if TOK.is_special(i)]


@pytest.fixture(scope="module")
def served():
    seen = Seen()
    with running(APPS["vllm"](Script(IDS), seen)) as fake:
        with running(recipe.serve.app(engines=[f"vllm+{fake.url}?name=r0"])) as s:
            yield s, seen


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_special_token_spellings_in_every_text_field_reach_the_engine_as_text(served, path):
    s, seen = served
    sent = []
    for text in (ALL_SPECIALS, "x"):
        r = httpx.post(f"{s.url}{path}", json=_bodies(text)[path], timeout=30)
        assert r.status_code == 200, r.text[:500]
        sent.append(seen.bodies[-1]["prompt"])
    hostile, plain = sent
    assert len(hostile) > len(plain) + len(TOK.special_tokens)  # the spellings are in, as text
    # only the template's special ids, and the eight grounding tokens in each of the Chat body's
    # assistant content and reasoning (thinking with tools renders the reasoning)
    grounding = sorted(i for i in hostile if i in GROUNDING_IDS)
    assert grounding == (sorted([*GROUNDING_IDS] * 2) if path == "/v1/chat/completions" else [])
    assert [i for i in _specials(hostile) if i not in GROUNDING_IDS] == _specials(plain)


MALFORMED = [
    b"", b"not json", b"[1, 2]", b'"a string"', b"{", b'{"model": }', b"\xff\xfe{}",
    b'{"model": "deepseek-v4-pro", "messages": "hi"}', b'{"model": 7, "messages": []}',
    b'{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": -1}',
    b'{"model": "deepseek-v4-pro", "messages": [], "temperature": 1e999}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}',
]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_malformed_bodies_are_the_apis_own_4xx_and_the_server_stays_up(served, path):
    s, _ = served
    for body in MALFORMED:
        r = httpx.post(f"{s.url}{path}", content=body, headers={"content-type": "application/json"}, timeout=30)
        assert 400 <= r.status_code < 500, (body[:60], r.status_code, r.text[:300])
        payload = r.json()
        if path == "/v1/messages":
            assert payload["type"] == "error" and payload["error"]["type"].endswith("_error")
        else:
            assert isinstance(payload["error"]["message"], str) and payload["error"]["message"]
        assert "Traceback" not in r.text
    assert httpx.get(f"{s.url}/health", timeout=5).status_code == 200
