"""Engines that send malformed frames, against ``recipe serve`` (real uvicorn on 127.0.0.1 both sides).

Found here and fixed: a ``/inference/v1/generate`` frame whose ``choices`` was a number or an object,
a vLLM chunk with ``choices: 5``, a list ``finish_reason`` or a string-valued ``top_logprobs``, an
SGLang ``finish_reason.message`` that was not a string or logprob entries that were not
``[logprob, id, text]``, and a usage whose ``cached_tokens`` was a list: each was a 500 with a
traceback. A malformed frame is now the API's own engine error (502, or the error event of a stream
that has started), and a count that is not a non-negative int is taken as not reported. Also here:
an engine whose ``/metrics`` is large (every vLLM histogram bucket, or a hostile one) held the event
loop for the whole Prometheus parse on every scrape (1.2 MB: one second); only the request and KV
gauges' lines are parsed now. The engines are scripted stand-ins: a real engine cannot be made to send
these frames. Bounded in count and time.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from hostile_support import loop_probe
from recipe.serve.config import ServeConfig
from recipe.serve.routing import parse_engine_metrics
from recipe.serve.server import app
from serve_support import running

MODEL = "deepseek-v4-flash"
SCRIPT: dict[str, Any] = {"frames": [], "metrics": ""}


def _engine() -> Starlette:
    async def stream(request: Request) -> Response:
        await request.body()
        frames = list(SCRIPT["frames"])

        async def it():  # type: ignore[no-untyped-def]
            for f in frames:
                yield f if isinstance(f, bytes) else b"data: " + json.dumps(f).encode() + b"\n\n"
        return StreamingResponse(it(), media_type="text/event-stream")

    async def ok(request: Request) -> Response:
        return JSONResponse({})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(SCRIPT["metrics"])

    return Starlette(routes=[Route(p, stream, methods=["POST"]) for p in ("/inference/v1/generate", "/v1/completions", "/generate")]
                     + [Route(p, ok, methods=["POST"]) for p in ("/inference/v1/abort_requests", "/abort_request")]
                     + [Route("/health", ok), Route("/metrics", metrics)])


@pytest.fixture(scope="module")
def engine():
    with running(_engine()) as e:
        yield e


@pytest.fixture(scope="module")
def servers(engine):
    out = {}
    with running(app(f"generate+http{engine.url[4:]}", config=ServeConfig(warm=False))) as g, \
         running(app(f"vllm+http{engine.url[4:]}", config=ServeConfig(warm=False))) as v, \
         running(app(f"sglang+http{engine.url[4:]}", config=ServeConfig(warm=False))) as s:
        out.update(generate=g, vllm=v, sglang=s)
        yield out


def _ask(url: str, frames: list[Any], stream: bool, logprobs: bool = True) -> httpx.Response:
    SCRIPT["frames"] = frames
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    if logprobs:
        body.update(logprobs=True, top_logprobs=2)
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=30)


def _no_500(r: httpx.Response) -> None:
    """A 200 (a stream ends with an error event, never a cut), or the API's own engine error."""
    assert r.status_code in (200, 502), (r.status_code, r.text[:300])
    if r.status_code == 502:
        assert r.json()["error"]["code"] in ("engine_error", "engine_unavailable"), r.text[:300]
    elif r.headers["content-type"].startswith("text/event-stream"):
        assert r.text.rstrip().endswith("data: [DONE]"), r.text[-300:]
    else:
        assert r.json()["object"] == "chat.completion"


def _g(ids: Any, fin: Any = None, **kw: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "token_ids": ids, "finish_reason": fin, **kw}]}


_USAGE = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
GENERATE = {
    "choices a number": [{"choices": 5}],
    "choices an object": [{"choices": {"0": {}}}],
    "a choice a string": [{"choices": ["abc"]}],
    "finish_reason a list": [_g([100], ["stop"]), _USAGE],
    "cached_tokens a list": [_g([100], "stop"), {"choices": [], "usage": {"prompt_tokens": "5", "prompt_tokens_details": {"cached_tokens": [1]}}}],
    "prompt_tokens_details a list": [_g([100], "stop"), {"choices": [], "usage": {"prompt_tokens_details": [1]}}],
}


def _v(ids: Any, fin: Any = None, **kw: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": "", "token_ids": ids, "finish_reason": fin, **kw}]}


_VUSAGE = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
VLLM = {
    "choices a number": [{"choices": 5}],
    "a choice a string": [{"choices": ["abc"]}],
    "finish_reason a list": [_v([100], ["stop"]), _VUSAGE],
    "cached_tokens a list": [_v([100], "stop"), {"choices": [], "usage": {"prompt_tokens_details": {"cached_tokens": [1]}}}],
    "prompt_tokens_details a list": [_v([100], "stop"), {"choices": [], "usage": {"prompt_tokens_details": [1]}}],
    "top_logprobs a list": [_v([100], "stop", logprobs={"token_logprobs": [-1.0], "top_logprobs": [["x"]]}), _VUSAGE],
    "a logprob a string": [_v([100], "stop", logprobs={"token_logprobs": ["x"], "top_logprobs": [None]}), _VUSAGE],
    "a top key not an id": [_v([100], "stop", logprobs={"token_logprobs": [-1.0], "top_logprobs": [{"token_id:٣": -1.0}]}), _VUSAGE],
}


def _s(ids: Any, fin: Any = None, **meta: Any) -> dict[str, Any]:
    return {"output_ids": ids, "meta_info": {"finish_reason": fin, "completion_tokens": len(ids), **meta}}


SGLANG = {
    "finish message a list": [_s([100], {"type": "abort", "message": ["x"]})],
    "cached_tokens a list": [_s([100], {"type": "stop"}, cached_tokens=[1], prompt_tokens="5")],
    "logprob entries not lists": [_s([100], {"type": "stop"}, output_token_logprobs=[5])],
    "logprob entries strings": [_s([100], {"type": "stop"}, output_token_logprobs=[["x", "y", "z"]])],
    "top entries not lists": [_s([100], {"type": "stop"}, output_token_logprobs=[[-1.0, 100, "a"]], output_top_logprobs=[[7]])],
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind, case", [*(("generate", c) for c in GENERATE), *(("vllm", c) for c in VLLM),
                                        *(("sglang", c) for c in SGLANG)])
def test_a_malformed_frame_is_the_apis_engine_error_never_a_500(servers, kind, case, stream):
    frames = {"generate": GENERATE, "vllm": VLLM, "sglang": SGLANG}[kind][case]
    _no_500(_ask(servers[kind].url, frames, stream))


@pytest.mark.parametrize("kind, frames", [
    ("generate", [_g([100], "stop"), {"choices": [], "usage": {"prompt_tokens_details": {"cached_tokens": [3]}}}]),
    ("vllm", [_v([100], "stop"), {"choices": [], "usage": {"prompt_tokens_details": {"cached_tokens": "3"}}}]),
    ("sglang", [_s([100], {"type": "stop"}, cached_tokens=3.5)]),
])
def test_a_cached_count_that_is_not_an_int_is_not_reported(servers, kind, frames):
    """The answer stands (the output is the engine's) and claims no cached tokens the engine did not count."""
    r = _ask(servers[kind].url, frames, False, logprobs=False)
    assert r.status_code == 200, r.text[:300]
    details = r.json()["usage"].get("prompt_tokens_details") or {}
    assert details.get("cached_tokens", 0) == 0


_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**66), 2**66) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.sampled_from(["stop", "length", "abort", "NaN", ""]) | st.text(max_size=6),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=10)
_ids = st.lists(st.one_of(st.integers(0, 128_000), st.integers(-2, 2**65), _json), max_size=4)
_lp = st.fixed_dictionaries({"content": st.lists(st.fixed_dictionaries(
    {"token_id": st.one_of(st.integers(0, 200_000), _json), "logprob": st.one_of(st.floats(-20, 0), _json),
     "top_logprobs": st.one_of(st.lists(st.fixed_dictionaries({"token_id": st.integers(-1, 200_000), "logprob": _json}), max_size=2), _json)}),
    max_size=3)})
_frame = st.one_of(
    st.fixed_dictionaries({"choices": st.one_of(st.lists(st.fixed_dictionaries(
        {"token_ids": st.one_of(_ids, _json)},
        optional={"finish_reason": st.one_of(st.sampled_from(["stop", "length", None]), _json),
                  "logprobs": st.one_of(_lp, _json)}), max_size=2), _json)}),
    st.fixed_dictionaries({"choices": st.just([]), "usage": st.one_of(st.fixed_dictionaries(
        {"prompt_tokens": _json, "prompt_tokens_details": st.one_of(st.fixed_dictionaries({"cached_tokens": _json}), _json)}), _json)}),
    st.fixed_dictionaries({"error": _json}), _json)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(frames=st.lists(_frame, max_size=4), stream=st.booleans())
def test_any_generate_frames_end_as_an_answer_or_the_apis_error(servers, frames, stream):
    _no_500(_ask(servers["generate"].url, [*frames, b"data: [DONE]\n\n"], stream))


# ---- /metrics

def _big_metrics(lines: int) -> str:
    rows = [f'vllm:request_latency_seconds_bucket{{le="{i}",model_name="m"}} {i}' for i in range(lines)]
    return "\n".join(["# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{model_name="m"} 3',
                      'vllm:num_requests_waiting{model_name="m"} 2', 'vllm:kv_cache_usage_perc{model_name="m"} 0.5', *rows]) + "\n"


def test_the_gauges_are_read_from_a_large_metrics_text_as_from_a_small_one():
    small, big = parse_engine_metrics(_big_metrics(0), 1.0), parse_engine_metrics(_big_metrics(20_000), 1.0)
    assert small == big and (big.running, big.waiting, big.kv_usage) == (3.0, 2.0, 0.5)
    dp = "vllm:num_requests_running{rank=\"0\"} 1\nvllm:num_requests_running{rank=\"1\"} 4\n# a comment\nother_metric 9\n"
    assert parse_engine_metrics(dp, 0.0).running == 5.0
    assert parse_engine_metrics("vllm:num_requests_running_total 7\nsome{} text\n", 0.0) is None
    assert parse_engine_metrics("vllm:num_requests_running{le=\"a\" 1\n", 0.0) is None  # not Prometheus text


def test_scraping_a_large_metrics_page_does_not_hold_the_event_loop(engine):
    """Two replicas whose /metrics is 1.2 MB (20,000 histogram lines: a second of parsing each scrape
    before) are scraped every 0.5 s while the loop is measured: never held for 100 ms."""
    import time

    SCRIPT["metrics"] = _big_metrics(20_000)
    url = f"vllm+http{engine.url[4:]}"
    with loop_probe(app(engines=[url + "?name=a", url + "?name=b"],
                        config=ServeConfig(warm=False, metrics_interval=0.5, probe_seconds=None))) as probe:
        time.sleep(0.5)
        probe.reset()
        time.sleep(1.5)
        worst = probe.worst
        loads = [r.load for r in probe.app.state.recipe.pool.replicas]
    assert all(load is not None and load.running == 3.0 for load in loads), loads
    assert worst < 0.1, worst
