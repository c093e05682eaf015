"""Hostile JSON Schemas against ``recipe serve`` (real uvicorn on 127.0.0.1, the demo engine).

One request used to stall or crash the server: a tool parameter with ``minItems: 30000000`` built a
30-million-item example on the event loop, ``minLength: 10**12`` was a 500 ``MemoryError``, and a
50,000-property tool schema (1.5 MB, under the 8 MiB body limit) cost seconds per request. Each is now
the API's own 400 naming the limit (``SchemaLimits``) and the field path, and the property that keeps
the class shut: while the heaviest schema request the limits accept is being served, a concurrent
``GET /health`` answers in under 100 ms (p99). Bounded in count and time, loopback only.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest
from serve_support import running

import recipe.serve
from recipe.options import DEFAULT_OPTIONS, SchemaLimits
from recipe.serve.config import ServeConfig

MODEL = "deepseek-v4-pro"


def _chat(params: Any, strict: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "Go."}], "thinking": {"type": "disabled"},
            "tools": [{"type": "function", "function": {"name": "f", "strict": strict, "parameters": params}}],
            "tool_choice": "required", **extra}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


HOSTILE = {
    "minItems": (_chat(_obj(a={"type": "array", "items": {"type": "integer"}, "minItems": 30_000_000})),
                 "tools[0].function.parameters.properties.a.minItems", "max_size_bound"),
    "minLength": (_chat(_obj(a={"type": "string", "minLength": 10**12})),
                  "tools[0].function.parameters.properties.a.minLength", "max_size_bound"),
    "properties": (_chat({"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50_000)}}),
                   "tools[0].function.parameters.properties", "max_schema_properties"),
    "enum": (_chat(_obj(a={"enum": list(range(5_000))})), "tools[0].function.parameters.properties.a.enum",
             "max_enum_values"),
    "nodes": (_chat(_obj(**{f"p{i}": _obj(**{f"q{j}": {"type": "integer"} for j in range(30)}) for i in range(900)})),
              None, "max_schema_nodes"),
}


@pytest.fixture(scope="module")
def server():
    with running(recipe.serve.app(options=DEFAULT_OPTIONS, config=ServeConfig(warm=False))) as s:
        yield s


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_schema_is_a_400_naming_the_limit_and_the_field(server, case):
    body, param, limit = HOSTILE[case]
    r = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert limit in err["message"] and err["type"] == "invalid_request_error"
    if param is not None:
        assert err["param"] == param
    else:
        assert err["param"].startswith("tools[0].function.parameters.properties.")
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200


@pytest.mark.parametrize("api, body, param", [
    ("messages", {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Go."}],
                  "tools": [{"name": "f", "input_schema": _obj(a={"type": "array", "minItems": 10**9})}]},
     "tools.0.input_schema.properties.a.minItems"),
    ("responses", {"model": MODEL, "input": "Go.", "text": {"format": {"type": "json_schema", "name": "a",
                                                                       "schema": _obj(a={"type": "string", "minLength": 10**12})}}},
     "text.format.schema.properties.a.minLength"),
])
def test_every_api_names_its_own_field(server, api, body, param):
    path = {"messages": "/v1/messages", "responses": "/v1/responses"}[api]
    r = httpx.post(f"{server.url}{path}", json=body, timeout=60, headers={"x-api-key": "x"})
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert "max_size_bound" in err["message"] and err.get("param", param) == param


def test_the_grammar_size_limit_is_a_400_before_the_engine():
    limits = SchemaLimits(max_grammar_bytes=10_000)  # a one-parameter strict tool: ~1 KB; 200 enums: ~66 KB
    with running(recipe.serve.app(config=ServeConfig(warm=False, schema_limits=limits))) as s:
        small = httpx.post(f"{s.url}/v1/chat/completions", json=_chat(_obj(a={"type": "integer"}), strict=True), timeout=60)
        big = httpx.post(f"{s.url}/v1/chat/completions", timeout=60, json=_chat(
            _obj(**{f"p{i}": {"type": "integer", "enum": [i, i + 1]} for i in range(200)}), strict=True))
    assert small.status_code == 200
    assert big.status_code == 400 and big.json()["error"]["param"] == "tools"
    assert "max_grammar_bytes" in big.json()["error"]["message"]


def test_limits_are_data_on_options_and_config():
    assert DEFAULT_OPTIONS.schema_limits == SchemaLimits()
    assert recipe.PARITY_OPTIONS.schema_limits == SchemaLimits() if hasattr(recipe, "PARITY_OPTIONS") else True
    with pytest.raises(ValueError):
        SchemaLimits(max_schema_nodes=0)
    tight = SchemaLimits(max_size_bound=5)
    with running(recipe.serve.app(config=ServeConfig(warm=False, schema_limits=tight))) as s:
        r = httpx.post(f"{s.url}/v1/chat/completions", json=_chat(_obj(a={"type": "string", "minLength": 6})), timeout=60)
    assert r.status_code == 400 and "max_size_bound" in r.json()["error"]["message"]


def test_health_stays_fast_while_the_heaviest_accepted_schema_request_runs():
    """The heaviest request the limits accept (a schema at the node limit, in a body small enough to
    be prepared inline by size alone) runs while /health is polled: p99 under 100 ms, and the heavy
    request is answered (200)."""
    limits = SchemaLimits(max_schema_nodes=1_500)
    props = {f"p{i}": {"type": "object", "properties": {"a": {"type": "integer"}}} for i in range(495)}  # 3 nodes each: 1,487 in all
    heavy = _chat({"type": "object", "properties": props})
    raw = json.dumps(heavy, separators=(",", ":"))
    assert len(raw) < 64 * 1024  # under prepare_inline_bytes: only its object count sends it off the loop
    latencies: list[float] = []
    with running(recipe.serve.app(config=ServeConfig(warm=False, schema_limits=limits))) as s:
        httpx.get(f"{s.url}/health", timeout=5)
        result: dict[str, Any] = {}

        def send() -> None:
            result["r"] = httpx.post(f"{s.url}/v1/chat/completions", content=raw, timeout=120,
                                     headers={"content-type": "application/json"})

        t = threading.Thread(target=send)
        t.start()
        with httpx.Client(base_url=s.url, timeout=5) as c:
            while t.is_alive() or len(latencies) < 20:
                t0 = time.perf_counter()
                assert c.get("/health").status_code == 200
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.01)
                if len(latencies) > 3000:
                    break
        t.join(120)
    assert result["r"].status_code == 200, result["r"].text[:300]
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    assert p99 < 0.1, (p99, latencies[-5:], len(latencies))
