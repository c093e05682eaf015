"""Replica routing by longest cached prefix, over 4 replay replicas that each simulate their own
prefix cache: on a generated multi-turn agent trace every turn after the first goes to the replica
that served its conversation's previous turn, and the hit rate the server reports (the engines'
cached tokens in the usage) equals the one ``recipe cache simulate`` reports for the same trace."""

from __future__ import annotations

import io
import json
import random
from contextlib import redirect_stdout
from typing import Any

import httpx
import pytest
from serve_support import EOS, MODEL, dsml_call, redis_server, running

import recipe
import recipe.serve
from recipe.cache.index import MemoryPrefixIndex, RedisPrefixIndex
from recipe.cli.main import main as cli_main
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.pool import ReplicaPool

openai = pytest.importorskip("openai")

TOOLS = [{"type": "function", "function": {"name": n, "description": f"{n} tool", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}} for n in ("search", "read", "run")]


def _script(rng: random.Random) -> list[dict]:
    """Replay turns: tool calls with varied arguments, then an answer."""
    turns = []
    for i in range(7):
        q = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega"]) for _ in range(rng.randint(3, 30)))
        turns.append({"text": f"Step {i}: calling a tool." + dsml_call(rng.choice(["search", "read", "run"]), q=q) + EOS,
                      "chunk": 7})
    turns.append({"text": "All finished." + EOS, "chunk": 7})
    return turns


def _trace_run(url: str, conversations: int, turns: int, rng: random.Random) -> tuple[list[dict], list[tuple[int, str, Any]]]:
    """Drive ``conversations`` agent loops round-robin; returns the request bodies and, per request,
    (conversation, replica, usage)."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)
    shared = "You are a coding agent. Follow the repository rules. " * 12
    histories, efforts = [], []
    for c in range(conversations):
        # half share a system prompt; thinking ones also share DeepSeek's effort preamble (block 0)
        system = shared if c % 2 == 0 else f"Agent {c}: " + "work carefully and report. " * rng.randint(10, 30)
        histories.append([{"role": "system", "content": system}, {"role": "user", "content": f"Task {c}: fix bug #{rng.randint(1, 999)}"}])
        efforts.append("max" if c % 4 == 0 else "none")
    bodies, served = [], []
    for t in range(turns):
        for c in range(conversations):
            body = {"model": MODEL, "messages": list(histories[c]), "tools": TOOLS, "reasoning_effort": efforts[c]}
            raw = client.chat.completions.with_raw_response.create(**body)
            completion = raw.parse()
            bodies.append(body)
            served.append((c, raw.headers["x-recipe-replica"], completion.usage))
            msg = completion.choices[0].message
            histories[c].append(msg.model_dump(exclude_none=True))
            for call in msg.tool_calls or ():
                histories[c].append({"role": "tool", "tool_call_id": call.id, "content": f"result of {call.function.arguments}" * rng.randint(1, 6)})
            if not msg.tool_calls:
                histories[c].append({"role": "user", "content": "Next task, please."})
    return bodies, served


def _simulate(tmp_path, bodies: list[dict]) -> dict:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"token_ids": recipe.prepare(b).token_ids, "model": MODEL}) + "\n" for b in bodies))
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["cache", "simulate", str(trace), "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("index", ["memory", "redis"])
def test_routing_follows_the_longest_cached_prefix_and_matches_cache_simulate(tmp_path, index):
    rng = random.Random(7)
    replicas = [ReplayEngine(load_turns(_script(random.Random(1))), name=f"r{i}") for i in range(4)]

    def run(idx: Any) -> None:
        with running(recipe.serve.app(engines=replicas, index=idx)) as s:
            bodies, served = _trace_run(s.url, conversations=6, turns=4, rng=rng)
            metrics = httpx.get(f"{s.url}/metrics").text
        last: dict[int, str] = {}
        for c, replica, _ in served:
            if c in last:
                assert replica == last[c], f"conversation {c} moved from {last[c]} to {replica}"
            last[c] = replica
        assert len(set(last.values())) >= 3  # the conversations spread over the replicas
        prompt = sum(u.prompt_tokens for _, _, u in served)
        hits = sum(u.prompt_tokens_details.cached_tokens for _, _, u in served)
        report = _simulate(tmp_path, bodies)
        assert (report["prompt_tokens"], report["hit_tokens"]) == (prompt, hits)
        assert report["hit_rate"] == pytest.approx(hits / prompt) and report["hit_rate"] > 0.5
        assert f"recipe_cached_tokens_total{{api=\"chat\"}} {float(hits)}" in metrics
        assert f"recipe_prompt_tokens_total{{api=\"chat\"}} {float(prompt)}" in metrics

    if index == "memory":
        run(MemoryPrefixIndex())
    else:
        with redis_server() as url:
            run(RedisPrefixIndex.from_url(url))


def test_a_random_pool_would_miss(tmp_path):
    """The control: the same trace with routing by load alone loses hits (so the test above
    measures routing, not the replicas)."""
    rng = random.Random(7)
    replicas = [ReplayEngine(load_turns(_script(random.Random(1))), name=f"r{i}") for i in range(4)]

    class NoIndex(MemoryPrefixIndex):
        def scores(self, ns, keys):  # type: ignore[override]
            return {}

    with running(recipe.serve.app(engines=replicas, index=NoIndex())) as s:
        bodies, served = _trace_run(s.url, conversations=6, turns=4, rng=rng)
    hits = sum(u.prompt_tokens_details.cached_tokens for _, _, u in served)
    assert hits < 0.85 * _simulate(tmp_path, bodies)["hit_tokens"]


def test_prefix_routing_ties_go_to_the_replica_with_fewest_requests_in_flight():
    engines = [ReplayEngine(load_turns([{"text": "x"}]), name=n) for n in ("a", "b", "c")]
    pool = ReplicaPool(engines, routing="prefix")
    pool.replicas[0].in_flight, pool.replicas[1].in_flight = 2, 1
    import asyncio

    route = asyncio.run(pool.route(list(range(300)), None, MODEL))
    assert route.replica.name == "c" and route.cached_tokens == 0
    pool.replicas[2].in_flight = 5
    again = asyncio.run(pool.route(list(range(300)), None, MODEL))  # c holds the prefix now
    assert again.replica.name == "c" and again.cached_tokens == 256
    pool.max_imbalance = 3  # ... unless it is that much busier than the least loaded
    assert asyncio.run(pool.route(list(range(300)), None, MODEL)).replica.name == "b"


def test_an_index_outage_routes_by_load_and_is_logged_once_until_it_answers(caplog):
    """A Redis index that refuses connections (nothing listens on its port): each request is routed
    by load and reported as an index failure, and the log says so once, not per request; once an
    index answers again, one line says routing reads it again."""
    redis = pytest.importorskip("redis")
    import asyncio
    import logging
    import socket

    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = RedisPrefixIndex(redis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)))
    engines = [ReplayEngine(load_turns([{"text": "x"}]), name=n) for n in ("a", "b")]
    pool = ReplicaPool(engines, down)
    pool.replicas[0].in_flight = 1
    with caplog.at_level(logging.WARNING, logger="recipe.serve.pool"):
        routes = [asyncio.run(pool.route(list(range(300)), None, MODEL)) for _ in range(3)]
        assert [(r.replica.name, r.cached_tokens, r.index_failed) for r in routes] == [("b", 0, True)] * 3
        assert [m for m in caplog.messages if "prefix index" in m] == [caplog.messages[0]]
        assert "prefix index unavailable" in caplog.messages[0] and "routing by load" in caplog.messages[0]
        pool.index = MemoryPrefixIndex()  # an index that answers
        back = asyncio.run(pool.route(list(range(300)), None, MODEL))
        assert not back.index_failed and caplog.messages[-1] == "the prefix index answers again: routing by cached prefix"
        asyncio.run(pool.route(list(range(300)), None, MODEL))
        assert sum("prefix index" in m for m in caplog.messages) == 2
