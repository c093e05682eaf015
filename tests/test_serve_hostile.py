"""Hostile HTTP inputs found by poking a running server: each answer is the API's own error shape,
and no body is read past the limit (real uvicorn on 127.0.0.1, port 0)."""

from __future__ import annotations

import json
import socket
from dataclasses import replace

import httpx
import pytest
from serve_support import EOS, MODEL, running

import recipe.serve
from recipe.options import DEFAULT_OPTIONS
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.tenants import Tenant, Tenants, derive_salt
from recipe.tokenizer import load_tokenizer

IDS = load_tokenizer().encode_with_special_tokens("Fine." + EOS)


def _chunked_head(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    return sock


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1/messages", "/v1/chat/completions"])
def test_a_chunked_body_past_the_limit_is_413_before_its_end(path):
    """A body without Content-Length is refused once it passes ``max_body_bytes``, without waiting
    for (or holding) the rest: count_tokens read the whole body first."""
    app = recipe.serve.app(ReplayEngine(load_turns([{"ids": IDS}])), options=replace(DEFAULT_OPTIONS, max_body_bytes=4000))
    with running(app) as s:
        sock = _chunked_head(int(s.url.rsplit(":", 1)[1]), path)
        try:
            chunk = b'{"model": "' + b"x" * 5000
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))  # past the limit; the body never ends
            head = b""
            while b"\r\n\r\n" not in head:
                part = sock.recv(65536)
                assert part, "connection closed without an answer"
                head += part
        finally:
            sock.close()
    status_line, _, rest = head.partition(b"\r\n")
    assert status_line.split()[1] == b"413"
    body = rest.split(b"\r\n\r\n", 1)[1]
    if path.startswith("/v1/messages") and body:
        assert b'"type":"request_too_large"' in body


def test_models_401_is_in_the_shape_of_the_api_asking():
    keys = Tenants({"sk-a": Tenant("a", derive_salt("a"))})
    with running(recipe.serve.app(ReplayEngine(load_turns([{"ids": IDS}])), tenants=keys)) as s:
        r = httpx.get(f"{s.url}/v1/models", headers={"anthropic-version": "2023-06-01"})
        assert r.status_code == 401
        assert r.json() == {"type": "error", "error": {"type": "authentication_error", "message": "Missing API key."}}
        r = httpx.get(f"{s.url}/v1/models", headers={"anthropic-version": "2023-06-01", "x-api-key": "nope"})
        assert r.json()["error"] == {"type": "authentication_error", "message": "Incorrect API key provided."}
        r = httpx.get(f"{s.url}/v1/models")
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert r.json()["error"]["message"] == "Missing API key."
        r = httpx.post(f"{s.url}/v1/messages/count_tokens", content=json.dumps({"model": MODEL, "messages": []}))
        assert r.status_code == 401 and r.json()["error"]["message"] == "Missing API key."
        assert httpx.get(f"{s.url}/v1/models", headers={"authorization": "Bearer sk-a"}).status_code == 200


async def _out_of_vocabulary(request):
    yield [IDS[0], 999_999, IDS[-1]]  # (ending with EOS)


@pytest.mark.parametrize("api, path, body", [
    ("chat", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}),
    ("responses", "/v1/responses", {"model": MODEL, "input": "Hi"}),
    ("messages", "/v1/messages", {"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}),
])
def test_an_engine_id_outside_the_vocabulary_is_an_engine_error_not_a_500(api, path, body):
    """Ids from another vocabulary (a misconfigured engine) are the engine's malformed output: 502
    before the first byte, the API's in-stream error after it."""
    with running(recipe.serve.app(_out_of_vocabulary)) as s:
        r = httpx.post(s.url + path, json=body, timeout=20)
        assert r.status_code == 502, r.text
        err = r.json()["error"]
        if api == "messages":
            assert err["type"] == "api_error" and "999999 is outside the vocabulary" in err["message"]
        else:
            assert err["type"] == "server_error" and err["code"] == "engine_error"
            assert "999999 is outside the vocabulary" in err["message"]
        r = httpx.post(s.url + path, json={**body, "stream": True}, timeout=20)
        assert r.status_code == 200
        assert "999999 is outside the vocabulary" in r.text and "internal error" not in r.text
        assert ("event: error" in r.text) if api != "chat" else ('"code":"engine_error"' in r.text and r.text.endswith("data: [DONE]\n\n"))


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-r1", "deepseek-v3.1", "deepseek-v3.2"])
def test_the_demo_engine_answers_the_earlier_generations_in_their_vocabulary(model):
    """The demo wrote DeepSeek-V4 ids (``</think>`` = 128822) for every model: a V3-vocabulary
    request was a 500."""
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    with running(recipe.serve.app()) as s:
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=20)
        msg = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], tools=tools).choices[0].message
        assert msg.content.startswith("Hello! I am recipe's demo engine") and not msg.tool_calls
        assert (getattr(msg, "reasoning_content", None) == "The user wants an answer; I will reply briefly.") == (model != "deepseek-v3")
        stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == msg.content
        m = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0).messages.create(
            model=model, max_tokens=200, messages=[{"role": "user", "content": "Hi"}])
        assert m.content[-1].text == msg.content and m.stop_reason == "end_turn"


def test_replay_files_split_on_newlines_only(tmp_path):
    """A replay line written with ensure_ascii=False may hold U+2028 or U+0085 raw: not a line break."""
    text = "Line\u2028separator\x85next" + EOS
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"text": text}, ensure_ascii=False) + "\r\n" + json.dumps({"ids": IDS}) + "\n", encoding="utf-8")
    turns = load_turns(path)
    assert [list(t.ids) for t in turns] == [load_tokenizer().encode_with_special_tokens(text), list(IDS)]
