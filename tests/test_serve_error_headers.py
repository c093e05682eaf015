"""What docs/serving.md ("Errors", "Routes") says of every answer's headers and error bodies, checked
on real uvicorn servers with httpx and the official SDKs:

- every 4xx other than 429 carries ``x-should-retry: false``, on every route (generation routes,
  ``GET /v1/responses/{id}``, ``GET /v1/models``, ``POST /v1/messages/count_tokens``, unknown routes),
  each in its API's own error shape; 429, 529 and 5xx carry neither it nor ``Retry-After``;
- every response carries ``x-request-id`` = ``request-id``: a generation route's is its response id,
  any other route's a fresh ``req_…`` id; ``x-recipe-replica`` is on the generation answers that
  reached an engine (success or engine error), not on those refused before it;
- an unknown ``previous_response_id``, an invalid field's code, unknown routes' shapes, and the SDKs'
  exception classes for 413.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx
import pytest
from serve_support import EOS, MODEL, free_port, running

import recipe.serve
from recipe.options import DEFAULT_OPTIONS
from recipe.serve.config import ServeConfig
from recipe.serve.engines.base import EngineDelta
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.tenants import Tenant, Tenants
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TOK = load_tokenizer()
ANSWER = "It is sunny in Paris."
KEY = {"authorization": "Bearer sk-good"}
BAD_KEY = {"authorization": "Bearer sk-bad"}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Weather?"}], "reasoning_effort": "none"}
MESSAGES = {"model": MODEL, "max_tokens": 300, "messages": [{"role": "user", "content": "Weather?"}],
            "thinking": {"type": "disabled"}}
RESPONSES = {"model": MODEL, "input": "Weather?", "reasoning": {"effort": "none"}}
LIMIT = 4000
BIG = "x" * (LIMIT + 100)


def _app(**kw: Any) -> Any:
    engine = ReplayEngine(load_turns([{"text": ANSWER + EOS, "delay_ms": 20}]), name="replica-a")
    return recipe.serve.app(engine, tenants=Tenants({"sk-good": Tenant("t", "salt")}),
                            options=replace(DEFAULT_OPTIONS, max_body_bytes=LIMIT), **kw)


async def _early_end(request: Any):  # an engine whose iterator stops without a stop id or a finish
    yield EngineDelta(TOK.encode_ordinary("Hello"))


def _openai_shape(r: httpx.Response, code: str) -> None:
    assert set(r.json()) == {"error"} and r.json()["error"]["code"] == code, r.text


def _anthropic_shape(r: httpx.Response, kind: str) -> None:
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == kind, r.text


def test_every_4xx_but_429_says_do_not_retry_on_every_route_in_its_apis_shape():
    with running(_app()) as s, httpx.Client(base_url=s.url, timeout=20) as c:
        cases = [
            # GET /v1/responses/{id}: unknown id (404), bad key (401)
            (c.get("/v1/responses/resp_unknown", headers=KEY), 404, _openai_shape, "not_found"),
            (c.get("/v1/responses/resp_unknown", headers=BAD_KEY), 401, _openai_shape, "invalid_api_key"),
            # GET /v1/models: bad key, in the shape of the API asking
            (c.get("/v1/models", headers=BAD_KEY), 401, _openai_shape, "invalid_api_key"),
            (c.get("/v1/models", headers={**BAD_KEY, "anthropic-version": "2023-06-01"}), 401, _anthropic_shape,
             "authentication_error"),
            # count_tokens: bad key, bad body, body over the limit
            (c.post("/v1/messages/count_tokens", headers=BAD_KEY, json=MESSAGES), 401, _anthropic_shape,
             "authentication_error"),
            (c.post("/v1/messages/count_tokens", headers=KEY, json={}), 400, _anthropic_shape, "invalid_request_error"),
            (c.post("/v1/messages/count_tokens", headers=KEY, json={**MESSAGES, "system": BIG}), 413, _anthropic_shape,
             "request_too_large"),
            # unknown routes (and a known path with another method): Anthropic's shape under /v1/messages…
            (c.get("/v1/nothing", headers=KEY), 404, _openai_shape, "not_found"),
            (c.get("/v1/chat/completions", headers=KEY), 404, _openai_shape, "not_found"),
            (c.post("/v1/messages/batches", headers=KEY, json={}), 404, _anthropic_shape, "not_found_error"),
            (c.get("/v1/messages", headers=KEY), 404, _anthropic_shape, "not_found_error"),
            # the generation routes (these had it already)
            (c.post("/v1/chat/completions", headers=BAD_KEY, json=CHAT), 401, _openai_shape, "invalid_api_key"),
            (c.post("/v1/responses", headers=KEY, json={**RESPONSES, "temperature": 7}), 400, _openai_shape,
             "invalid_request_error"),
            (c.post("/v1/messages", headers=KEY, json={**MESSAGES, "system": BIG}), 413, _anthropic_shape,
             "request_too_large"),
        ]
        for r, status, shape, code in cases:
            where = f"{r.request.method} {r.request.url.path} {r.status_code}"
            assert r.status_code == status, where
            shape(r, code)
            assert r.headers.get("x-should-retry") == "false", where
        for r in (c.get("/v1/models", headers=KEY), c.get("/health"), c.get("/metrics"),
                  c.post("/v1/messages/count_tokens", headers=KEY, json=MESSAGES),
                  c.post("/v1/chat/completions", headers=KEY, json=CHAT)):
            assert r.status_code == 200 and "x-should-retry" not in r.headers, r.request.url.path


def test_429_529_and_5xx_carry_neither_should_retry_nor_retry_after():
    async def overloaded(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=KEY) as c:
            async with c.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as first:
                chunks = first.aiter_bytes()
                await chunks.__anext__()  # the one slot is taken
                out = [await c.post("/v1/chat/completions", json=CHAT), await c.post("/v1/messages", json=MESSAGES),
                       await c.post("/v1/responses", json=RESPONSES)]
                async for _ in chunks:
                    pass
            return out

    with running(_app(config=ServeConfig(max_concurrency=1))) as s:
        chat, messages, responses = asyncio.run(overloaded(s.url))
        assert [chat.status_code, messages.status_code, responses.status_code] == [429, 529, 429]
        _anthropic_shape(messages, "overloaded_error")
        _openai_shape(chat, "overloaded")
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from recipe.store.redis_store import RedisStore

    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", retry=Retry(NoBackoff(), 0))
    with running(recipe.serve.app(_early_end, store=store)) as s, httpx.Client(base_url=s.url, timeout=20) as c:
        failed = [c.post("/v1/chat/completions", json=CHAT), c.post("/v1/messages", json=MESSAGES),
                  c.get("/v1/responses/resp_abc")]
        assert [r.status_code for r in failed] == [502, 502, 503]
    for r in (chat, messages, responses, *failed):
        assert not {"x-should-retry", "retry-after", "retry-after-ms"} & set(r.headers), (r.status_code, r.headers)


def test_every_response_carries_a_request_id_and_engine_answers_their_replica():
    with running(_app()) as s, httpx.Client(base_url=s.url, timeout=20) as c:
        answered = [c.post("/v1/chat/completions", headers=KEY, json=CHAT),
                    c.post("/v1/chat/completions", headers=KEY, json={**CHAT, "stream": True}),
                    c.post("/v1/responses", headers=KEY, json=RESPONSES),
                    c.post("/v1/messages", headers=KEY, json=MESSAGES)]
        for r, prefix in zip(answered, ("chatcmpl-", "chatcmpl-", "resp_", "msg_")):
            assert r.status_code == 200
            rid = r.headers["x-request-id"]
            assert rid.startswith(prefix) and r.headers["request-id"] == rid and rid in r.text  # the response id
            assert r.headers["x-recipe-replica"] == "replica-a"
        refused = [c.post("/v1/chat/completions", headers=BAD_KEY, json=CHAT),
                   c.post("/v1/messages", headers=KEY, json={"model": MODEL})]
        for r, prefix in zip(refused, ("chatcmpl-", "msg_")):
            assert r.status_code in (400, 401) and r.headers["x-request-id"].startswith(prefix)
            assert r.headers["request-id"] == r.headers["x-request-id"] and "x-recipe-replica" not in r.headers
        others = [c.get("/health"), c.get("/metrics"), c.get("/v1/models", headers=KEY), c.get("/v1/nothing"),
                  c.get("/v1/responses/" + answered[2].headers["x-request-id"], headers=KEY),
                  c.post("/v1/messages/count_tokens", headers=KEY, json=MESSAGES)]
        ids = [r.headers["x-request-id"] for r in others]
        assert all(i.startswith("req_") and len(i) == 33 for i in ids) and len(set(ids)) == len(ids)
        assert [r.headers["request-id"] for r in others] == ids
        assert not any("x-recipe-replica" in r.headers for r in others)
        # the SDKs read them: openai x-request-id, anthropic request-id
        oai = openai.OpenAI(base_url=f"{s.url}/v1", api_key="sk-good", max_retries=0)
        completion = oai.chat.completions.create(**CHAT)
        assert completion._request_id == completion.id
        with pytest.raises(openai.NotFoundError) as info:
            oai.responses.retrieve("resp_unknown")
        assert info.value.request_id.startswith("req_")
        ant = anthropic.Anthropic(base_url=s.url, api_key="sk-good", max_retries=0)
        message = ant.messages.create(**MESSAGES)
        assert message._request_id == message.id
        with pytest.raises(anthropic.AuthenticationError) as ainfo:
            anthropic.Anthropic(base_url=s.url, api_key="sk-bad", max_retries=0).messages.count_tokens(
                model=MODEL, messages=MESSAGES["messages"])
        assert ainfo.value.request_id.startswith("req_")
    with running(recipe.serve.app(_early_end)) as s:  # an engine error still names the replica it came from
        r = httpx.post(f"{s.url}/v1/chat/completions", json=CHAT, timeout=20)
        assert r.status_code == 502 and r.headers["x-recipe-replica"] == "_early_end"
        assert r.json()["error"]["message"] == "the engine closed the stream before the output finished"


def test_the_errors_a_client_meets_and_the_sdks_classes_for_them():
    with running(_app()) as s:
        oai = openai.OpenAI(base_url=f"{s.url}/v1", api_key="sk-good", max_retries=0)
        with pytest.raises(openai.BadRequestError) as info:
            oai.responses.create(**RESPONSES, previous_response_id="resp_unknown")
        assert info.value.body["code"] == "previous_response_not_found"
        assert info.value.body["param"] == "previous_response_id"
        # an invalid field: code is the type, invalid_request_error; param names the field
        with pytest.raises(openai.BadRequestError) as info:
            oai.chat.completions.create(**{**CHAT, "temperature": 7})
        assert (info.value.body["code"], info.value.body["param"]) == ("invalid_request_error", "temperature")
        with pytest.raises(openai.BadRequestError) as info:
            oai.chat.completions.create(**{**CHAT, "max_tokens": "ten"})
        assert (info.value.body["code"], info.value.body["param"]) == ("invalid_request_error", "max_tokens")
        # 413: openai has no class for it (APIStatusError itself), anthropic has its own
        with pytest.raises(openai.APIStatusError) as info:
            oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": BIG}])
        assert type(info.value) is openai.APIStatusError and info.value.status_code == 413
        too_large = getattr(anthropic, "ContentTooLargeError", None) or anthropic.RequestTooLargeError
        with pytest.raises(too_large) as ainfo:
            anthropic.Anthropic(base_url=s.url, api_key="sk-good", max_retries=0).messages.create(
                **{**MESSAGES, "system": BIG})
        assert ainfo.value.status_code == 413
