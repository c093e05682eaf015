"""Hostile credentials: an API key header sent twice, or two headers naming different keys, are
refused in the API's own 401 shape on every route (a proxy that checks another copy than the server
would let another tenant through). Real uvicorn on 127.0.0.1, raw sockets for repeated headers."""

from __future__ import annotations

import json
import socket

import pytest
from serve_support import EOS, MODEL, running

import recipe.serve
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.tenants import Tenant, Tenants, derive_salt

CHAT = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none"})
MSG = json.dumps({"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]})


def _raw(url: str, method: str, path: str, headers: list[tuple[str, str]], body: str = "") -> tuple[int, dict]:
    host, port = url.removeprefix("http://").split(":")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers)
    req = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body.encode())}\r\n{head}\r\n{body}").encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(req)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    payload = data.split(b"\r\n\r\n", 1)[1]
    return status, json.loads(payload) if payload.startswith(b"{") else {}


@pytest.fixture(scope="module")
def server():
    tenants = Tenants({"sk-a": Tenant("a", derive_salt("a")), "sk-b": Tenant("b", derive_salt("b"))})
    engine = ReplayEngine(load_turns([{"text": "Fine." + EOS}]))
    with running(recipe.serve.app(engine, tenants=tenants)) as s:
        yield s


@pytest.mark.parametrize("headers", [
    [("Authorization", "Bearer sk-a"), ("Authorization", "Bearer sk-b")],
    [("Authorization", "Bearer sk-a"), ("Authorization", "Bearer sk-a")],
    [("x-api-key", "sk-b"), ("x-api-key", "sk-a")],
    [("Authorization", "Bearer sk-a"), ("x-api-key", "sk-b")],
], ids=["two-bearers", "same-bearer-twice", "two-x-api-keys", "bearer-and-other-x-api-key"])
@pytest.mark.parametrize("method, path, body, shape", [
    ("POST", "/v1/chat/completions", CHAT, "openai"),
    ("POST", "/v1/messages", MSG, "anthropic"),
    ("GET", "/v1/responses/resp_x", "", "openai"),
    ("GET", "/v1/models", "", "openai"),
])
def test_a_key_header_sent_twice_is_refused(server, headers, method, path, body, shape):
    status, payload = _raw(server.url, method, path, headers, body)
    assert status == 401
    if shape == "openai":
        assert payload["error"]["code"] == "invalid_api_key" and "send one API key" in payload["error"]["message"]
    else:
        assert payload["type"] == "error" and payload["error"]["type"] == "authentication_error"


def test_one_key_in_either_header_or_the_same_in_both_is_accepted(server):
    for headers in ([("Authorization", "Bearer sk-a")], [("x-api-key", "sk-b")],
                    [("Authorization", "Bearer sk-a"), ("x-api-key", "sk-a")]):
        status, payload = _raw(server.url, "POST", "/v1/chat/completions", headers, CHAT)
        assert status == 200 and payload["choices"][0]["message"]["content"] == "Fine."
