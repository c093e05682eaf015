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
