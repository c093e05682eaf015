"""The ``generate+http://`` connector (recipe/serve/engines/generate.py) against a real HTTP server that
speaks vLLM 0.32's ``/inference/v1/generate`` (uvicorn on 127.0.0.1): the request body it sends has
vLLM's ``GenerateRequest`` fields (fixtures/vllm_render/fields.json), the output streams back as
deltas with the engine's usage, and failures, aborts and disconnects end as each API's own error.

The engine here is a scripted stand-in, because a real engine cannot produce an error frame, an
abort or a given output on demand; it speaks the wire format read from vLLM's source
(``vllm/entrypoints/scale_out/token_in_token_out/serving.py``): ``data: {request_id, choices:
[{index, token_ids, finish_reason, logprobs}]}`` frames, one usage frame, ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import recipe
from recipe.serve.config import ServeConfig
from recipe.serve.server import app
from recipe.tokenizer import default_tokenizer
from serve_support import running

FIELDS = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "vllm_render" / "fields.json").read_text())
MODEL = "deepseek-v4-flash"


class Engine:
    """The stand-in engine's state: every request body and abort it received."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.aborts: list[list[str]] = []
        self.closed = asyncio.Event()

    def app(self) -> Starlette:
        async def generate(request: Request) -> Response:
            body = await request.json()
            self.bodies.append(body)
            ids = body["token_ids"]
            tok = default_tokenizer()
            last = tok.decode(ids[-6:])
            out = tok.encode_with_special_tokens("</think>Hello there")
            rid = "generate-tokens-" + body["request_id"]

            async def frames():  # type: ignore[no-untyped-def]
                def frame(obj: dict[str, Any]) -> bytes:
                    return b"data: " + json.dumps(obj).encode() + b"\n\n"

                if "boom" in last:
                    yield frame({"error": {"message": "engine exploded", "type": "InternalServerError", "code": 500}})
                    yield b"data: [DONE]\n\n"
                    return
                if "refuse" in last:  # vLLM's in-stream refusal of a request it cannot serve
                    yield frame({"error": {"message": "prompt too long for this model", "type": "BadRequestError",
                                           "code": 400}})
                    yield b"data: [DONE]\n\n"
                    return
                eos = body["sampling_params"]["stop_token_ids"][0]
                for i, t in enumerate([*out, eos]):
                    choice: dict[str, Any] = {"index": 0, "token_ids": [t], "finish_reason": "stop" if t == eos else None,
                                              "logprobs": None}
                    if body["sampling_params"].get("logprobs") is not None:
                        choice["logprobs"] = {"content": [{"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": [
                            {"token_id": t, "logprob": -0.5, "rank": 1}, {"token_id": 100, "logprob": -2.0, "rank": 2}]}]}
                    if "abort" in last and i == 1:
                        choice["finish_reason"] = "abort"
                        yield frame({"request_id": rid, "choices": [choice], "output_mode": "tokens"})
                        yield b"data: [DONE]\n\n"
                        return
                    yield frame({"request_id": rid, "choices": [choice], "output_mode": "tokens"})
                    if "slow" in last:
                        await asyncio.sleep(0.2)
                yield frame({"request_id": rid, "choices": [], "usage": {
                    "prompt_tokens": len(ids), "completion_tokens": len(out) + 1, "total_tokens": len(ids) + len(out) + 1,
                    "prompt_tokens_details": {"cached_tokens": 64}}})
                yield b"data: [DONE]\n\n"

            if not body.get("stream"):
                return JSONResponse({"error": {"message": "stream expected"}}, status_code=400)
            return StreamingResponse(frames(), media_type="text/event-stream")

        async def abort(request: Request) -> Response:
            self.aborts.append((await request.json())["request_ids"])
            return Response(status_code=200)

        return Starlette(routes=[Route("/inference/v1/generate", generate, methods=["POST"]),
                                 Route("/inference/v1/abort_requests", abort, methods=["POST"])])


@pytest.fixture(scope="module")
def fleet():
    engine = Engine()
    with running(engine.app()) as eng:
        with running(app(f"generate+{eng.url}?model=served-name&name=gen0", config=ServeConfig(warm=False, gc_freeze=False))) as srv:
            yield engine, srv


def chat(text: str, **kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **kw}


def test_a_chat_round_trip_sends_vllms_generate_request_and_reads_the_deltas(fleet):
    engine, srv = fleet
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
    done = client.chat.completions.create(**chat("Hi"))
    assert done.choices[0].message.content == "Hello there"
    assert done.usage.prompt_tokens_details.cached_tokens == 64
    body = engine.bodies[-1]
    assert list(body) == FIELDS["generate_request"]
    assert set(body["sampling_params"]) <= set(FIELDS["sampling_params_defaults"])
    assert body["token_ids"] == recipe.prepare(chat("Hi"), "chat").token_ids
    assert body["model"] == "served-name" and body["stream"] is True and body["output_mode"] == "tokens"
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": False}
    assert body["sampling_params"]["output_kind"] == 1
    chunks = list(client.chat.completions.create(**chat("Hi"), stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there"
    assert chunks[-1].usage.prompt_tokens == len(body["token_ids"])


def test_the_requests_sampling_fields_go_under_vllms_names_in_vllms_order(fleet):
    engine, srv = fleet
    body = chat("Hi", top_k=20, presence_penalty=0.5, min_p=0.1, seed=3, logit_bias={"100": -5},
                reasoning_effort="none", temperature=0.4)
    r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    sp = engine.bodies[-1]["sampling_params"]
    order = list(FIELDS["sampling_params_defaults"])
    assert [order.index(k) for k in sp] == sorted(order.index(k) for k in sp)
    assert (sp["top_k"], sp["presence_penalty"], sp["seed"]) == (20, 0.5, 3)
    assert (sp["min_p"], sp["temperature"]) == (pytest.approx(0.1), pytest.approx(0.4))
    assert sp["logit_bias"] == {"100": -5.0}
    r = httpx.post(srv.url + "/v1/chat/completions", json=chat("Hi", n=2), timeout=30)
    assert r.status_code == 400 and "n" in r.json()["error"]["message"]  # one choice per request here


def test_logprobs_arrive_as_the_apis_logprobs(fleet):
    engine, srv = fleet
    r = httpx.post(srv.url + "/v1/chat/completions", json=chat("Hi", logprobs=True, top_logprobs=1), timeout=30)
    assert r.status_code == 200, r.text
    assert engine.bodies[-1]["sampling_params"]["logprobs"] == 1
    content = r.json()["choices"][0]["logprobs"]["content"]
    assert [e["logprob"] for e in content] == [-0.5] * len(content) and len(content) >= 2
    assert all(e["top_logprobs"][0]["logprob"] == -0.5 for e in content)


def test_an_error_frame_is_the_apis_engine_error(fleet):
    _, srv = fleet
    r = httpx.post(srv.url + "/v1/chat/completions", json=chat("boom"), timeout=30)
    assert r.status_code == 502 and "engine exploded" in r.json()["error"]["message"]
    r = httpx.post(srv.url + "/v1/messages", json={**chat("boom"), "max_tokens": 20}, timeout=30)
    assert r.status_code == 502 and r.json()["type"] == "error"


def test_an_in_stream_refusal_is_the_apis_400_as_for_the_vllm_connector(fleet):
    _, srv = fleet
    r = httpx.post(srv.url + "/v1/chat/completions", json=chat("refuse"), timeout=30)
    assert r.status_code == 400, r.text
    assert "prompt too long for this model" in r.json()["error"]["message"]
    r = httpx.post(srv.url + "/v1/messages", json={**chat("refuse"), "max_tokens": 20}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text


def test_an_aborted_generation_is_an_error_not_a_short_answer(fleet):
    _, srv = fleet
    r = httpx.post(srv.url + "/v1/chat/completions", json=chat("abort"), timeout=30)
    assert r.status_code == 502 and "abort" in r.json()["error"]["message"]


def test_a_client_that_goes_away_aborts_the_engine_request(fleet):
    engine, srv = fleet
    before = len(engine.aborts)
    with httpx.stream("POST", srv.url + "/v1/chat/completions", json=chat("slow", stream=True), timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data:") and "content" in line:
                break
    deadline = time.monotonic() + 10
    while len(engine.aborts) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(engine.aborts) == before + 1
    (rid,) = engine.aborts[-1]
    assert rid == "generate-tokens-" + engine.bodies[-1]["request_id"]


def test_an_unreachable_engine_is_the_apis_unavailable_error():
    with running(app("generate+http://127.0.0.1:9", config=ServeConfig(warm=False, gc_freeze=False))) as srv:
        r = httpx.post(srv.url + "/v1/chat/completions", json=chat("Hi"), timeout=30)
        assert r.status_code == 502 and r.json()["error"]["code"] == "engine_unavailable"
