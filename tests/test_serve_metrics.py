"""``GET /metrics`` after real requests: the first-byte metrics (time to first token, engine latency,
the 200 count) are observed once per request — after the first frame for a stream — including a
stream whose engine fails on its first delta (200 sent, in-stream error, engine latency observed,
no time to first token since no answer byte went out)."""

from __future__ import annotations

import re

import httpx

import recipe.serve
from recipe.serve.engines.base import EngineDelta
from recipe.tokenizer import default_tokenizer
from serve_support import EOS, MODEL, running

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "thinking": {"type": "disabled"}}


def _value(metrics: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", metrics, re.M)
    return float(m.group(1)) if m else 0.0


def test_first_byte_metrics_once_per_request() -> None:
    ids = default_tokenizer().encode_with_special_tokens("Hello there." + EOS)
    fail = {"on": False}

    async def engine(request):
        if fail["on"]:
            yield EngineDelta((), finish="error", message="scripted failure")
            return
        for n, i in enumerate(ids, 1):
            yield EngineDelta((i,), finish="stop" if n == len(ids) else None)

    with running(recipe.serve.app(engine)) as s:
        with httpx.Client(base_url=s.url, timeout=30) as c:
            with c.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                body = r.read().decode()
            assert r.status_code == 200 and "Hello there." in "".join(re.findall(r'"content":"([^"]*)"', body))
            assert c.post("/v1/chat/completions", json=CHAT).json()["choices"][0]["message"]["content"] == "Hello there."
            fail["on"] = True
            with c.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
                body = r.read().decode()
            assert r.status_code == 200 and '"error"' in body and "data: [DONE]" in body
            metrics = c.get("/metrics").text
    assert _value(metrics, 'recipe_requests_total{api="chat",status="200"}') == 3
    assert _value(metrics, 'recipe_time_to_first_token_seconds_count{api="chat"}') == 2
    assert _value(metrics, 'recipe_engine_latency_seconds_count{replica="engine"}') == 3
    assert _value(metrics, 'recipe_errors_total{api="chat",type="engine_failed"}') == 1
