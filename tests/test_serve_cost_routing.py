"""Routing by cost (recipe/serve/routing.py, the pool's default): uncached prefill tokens plus load.

The rule on numbers, the engines' own load read from a real ``/metrics`` endpoint on loopback, and a
hot prefix over four replay replicas with simulated prefix caches, driven by concurrent clients
through ``recipe serve``: the cost rule spreads it where the longest-prefix rule pins it.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.serve.engines.generate import GenerateEngine
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.pool import ReplicaPool
from recipe.serve.routing import Candidate, EngineLoad, RoutingWeights, cost, parse_engine_metrics, pick
from serve_support import EOS, MODEL, running

W = RoutingWeights(request_tokens=1000, kv_tokens=4000, max_age=5)


def test_idle_replicas_follow_the_longest_cached_prefix():
    cands = [Candidate(0, 0), Candidate(3000, 0), Candidate(1000, 0)]
    assert pick(3200, cands, W) == 1


def test_a_busy_holder_keeps_a_prefix_only_while_its_extra_load_is_cheaper_than_the_prefill():
    # holder has 3000 of 3200 cached: 2 more requests (2000 tokens) < 3000 → stays; 4 more → moves
    assert pick(3200, [Candidate(3000, 2), Candidate(0, 0)], W) == 0
    assert pick(3200, [Candidate(3000, 4), Candidate(0, 0)], W) == 1
    assert cost(3200, Candidate(3000, 4), W) == 200 + 4000


def test_ties_go_to_fewer_requests_then_fewer_served():
    assert pick(100, [Candidate(0, 0, served=5), Candidate(0, 0, served=2)], RoutingWeights(request_tokens=0)) == 1
    assert pick(100, [Candidate(0, 1, served=0), Candidate(0, 0, served=9)], RoutingWeights(request_tokens=0)) == 1


def test_the_engines_own_load_counts_while_fresh_and_kv_usage_costs():
    busy = EngineLoad(running=6, waiting=2, kv_usage=0.5, at=100.0)
    c = Candidate(3000, 1, load=busy)
    assert cost(3200, c, W, now=101.0) == 200 + 8 * 1000 + 0.5 * 4000
    assert cost(3200, c, W, now=200.0) == 200 + 1 * 1000  # stale: this server's count alone
    assert cost(3200, c, W, now=None) == 200 + 1000
    assert pick(3200, [c, Candidate(0, 0)], W, now=101.0) == 1


def test_past_the_margin_over_the_fleets_mean_a_shared_prefix_moves_at_light_load():
    # eight replicas, seven with 2 requests, the holder of a 3,000-token prefix with 5: the mean is
    # 2.375, the margin max(1.25 x 2.375, 2.375 + 2) = 4.375, and the holder would go to 6
    d = RoutingWeights()
    cands = [Candidate(3000, 5), *(Candidate(0, 2) for _ in range(7))]
    assert cost(3200, cands[0], d, mean_requests=2.375) == 200 + 5 * 512 + 2048 * (6 - 4.375)
    assert cost(3200, cands[1], d, mean_requests=2.375) == 3200 + 2 * 512  # within the margin
    assert pick(3200, cands, d) == 1  # a cold replica takes it (the first of the cheapest)
    assert pick(3200, cands, RoutingWeights(over_tokens=0)) == 0  # without the margin term the holder keeps it


def test_at_heavy_load_the_same_excess_is_within_the_margin_and_the_cache_wins():
    cands = [Candidate(3000, 43), *(Candidate(0, 40) for _ in range(7))]  # mean 40.4: margin 50.5
    assert pick(3200, cands, RoutingWeights()) == 0


def test_a_long_conversation_stays_on_its_holder_past_the_margin():
    cands = [Candidate(30_000, 6), *(Candidate(0, 2) for _ in range(7))]  # 2.5 requests over: 5,120 < 30,000
    assert pick(30_200, cands, RoutingWeights()) == 0


def test_a_nearly_idle_pool_is_not_split_over_one_request():
    # two replicas, one request in flight: the mean is 0.5 and the slack of 2 keeps the holder in
    assert pick(3200, [Candidate(3200, 1), Candidate(0, 0)], RoutingWeights()) == 0
    assert pick(3200, [Candidate(3200, 1), Candidate(0, 0)], RoutingWeights(load_slack=0, over_tokens=4096)) == 1


@given(st.integers(0, 10_000), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 50), st.integers(0, 99)),
                                        min_size=1, max_size=8))
def test_the_pick_is_a_cheapest_candidate(prompt, rows):
    cands = [Candidate(min(c, prompt), f, s) for c, f, s in rows]
    i = pick(prompt, cands, W)
    mean = sum(c.in_flight for c in cands) / len(cands)
    assert cost(prompt, cands[i], W, mean_requests=mean) == min(cost(prompt, c, W, mean_requests=mean) for c in cands)


def test_bad_weights_are_refused():
    for kw in ({"request_tokens": -1}, {"kv_tokens": float("nan")}, {"max_age": 0}, {"load_margin": -0.1},
               {"load_slack": float("inf")}, {"over_tokens": -1}):
        with pytest.raises(ValueError):
            RoutingWeights(**kw)
    with pytest.raises(ValueError):
        ServeConfig(routing="random")
    with pytest.raises(ValueError):
        ReplicaPool([ReplayEngine(load_turns([{"text": "x"}]))], routing="random")


VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="deepseek-v4-flash"} 7.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="deepseek-v4-flash"} 3.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="deepseek-v4-flash"} 0.25
"""
SGLANG_METRICS = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",dp_rank="0"} 2.0
sglang:num_running_reqs{model_name="m",dp_rank="1"} 3.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",dp_rank="0"} 1.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",dp_rank="0"} 0.2
sglang:token_usage{model_name="m",dp_rank="1"} 0.4
"""


def test_engine_metrics_are_read_for_vllm_and_sglang():
    assert parse_engine_metrics(VLLM_METRICS, 5.0) == EngineLoad(7.0, 3.0, 0.25, 5.0)
    got = parse_engine_metrics(SGLANG_METRICS, 1.0)
    assert (got.running, got.waiting, got.kv_usage) == (5.0, 1.0, pytest.approx(0.3))
    assert parse_engine_metrics("# nothing here\n", 1.0) is None
    assert parse_engine_metrics("not {prometheus", 1.0) is None


def test_the_pool_scrapes_each_engines_metrics_and_routes_around_a_busy_one():
    texts = {"busy": VLLM_METRICS, "idle": VLLM_METRICS.replace("7.0", "0.0").replace("3.0", "0.0")}

    def metrics_app(which: str) -> Starlette:
        return Starlette(routes=[Route("/metrics", lambda r: PlainTextResponse(texts[which]))])

    with running(metrics_app("busy")) as busy, running(metrics_app("idle")) as idle:
        pool = ReplicaPool([GenerateEngine(busy.url, name="busy"), GenerateEngine(idle.url, name="idle"),
                            GenerateEngine("http://127.0.0.1:9", name="down")], weights=W)

        async def go() -> tuple[Any, Any]:
            async with httpx.AsyncClient(timeout=5) as client:
                await pool.scrape(client)
            first = await pool.route(list(range(1000)), None, MODEL)  # no cache anywhere: the idle one
            pool.replicas[1].in_flight = 20  # … unless it is busier still than the busy engine
            second = await pool.route(list(range(5000, 6000)), None, MODEL)
            await pool.aclose()
            return first, second

        first, second = asyncio.run(go())
    busy_r, idle_r, down_r = pool.replicas
    assert busy_r.load is not None and (busy_r.load.running, busy_r.load.waiting) == (7.0, 3.0)
    assert idle_r.load is not None and down_r.load is None
    assert first.replica.name in ("idle", "down") and first.replica.name != "busy"
    assert second.replica.name == "down"  # no scraped load, nothing in flight: cheapest


def _hot_run(routing: str, clients: int = 48, per_client: int = 3) -> tuple[list[int], int, int]:
    """Concurrent chat clients through ``recipe serve`` over four replay replicas (each with its own
    simulated prefix cache, 20 ms between deltas): 70% of requests share a long system prompt.
    Returns (requests per replica, prompt tokens, cached tokens)."""
    turn = [{"text": "Sure, done." + EOS, "chunk": 1, "delay_ms": 20}]
    engines = [ReplayEngine(load_turns(turn), name=f"r{i}") for i in range(4)]
    hot = "You are the support agent of a large company. Follow the policy below exactly. " * 40
    config = ServeConfig(warm=False, gc_freeze=False, routing=routing, metrics_interval=0)
    usage: list[tuple[int, int]] = []
    lock = threading.Lock()
    with running(recipe.serve.app(engines=engines, config=config)) as srv:
        def client(seed: int) -> None:
            rng = random.Random(seed)
            with httpx.Client(base_url=srv.url, timeout=60) as http:
                for i in range(per_client):
                    system = hot if rng.random() < 0.7 else f"Session {seed}-{i}: " + "be concise. " * rng.randint(5, 40)
                    body = {"model": MODEL, "reasoning_effort": "none", "messages": [
                        {"role": "system", "content": system}, {"role": "user", "content": f"Question {seed}.{i}"}]}
                    u = http.post("/v1/chat/completions", json=body).json()["usage"]
                    with lock:
                        usage.append((u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]))

        threads = [threading.Thread(target=client, args=(s,)) for s in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        served = [r.served for r in srv.state.pool.replicas]
    return served, sum(p for p, _ in usage), sum(c for _, c in usage)


def test_a_hot_prefix_spreads_over_the_replicas_and_keeps_its_hits():
    served, prompt, cached = _hot_run("cost")
    mean = sum(served) / len(served)
    assert sum(served) == 48 * 3
    assert max(served) <= 1.3 * mean, served
    p_served, p_prompt, p_cached = _hot_run("prefix")
    assert max(p_served) > 1.3 * sum(p_served) / len(p_served), p_served  # the old rule pins the hot prefix
    assert cached / prompt >= 0.9 * (p_cached / p_prompt), (cached / prompt, p_cached / p_prompt)
