"""Replica health: ``/health`` tells the truth, a replica refusing connections is routed around (and
a request it refused is resent to another replica), engine failures are logged once with the request
id and replica, and connections an engine closed are not left in CLOSE-WAIT. Real uvicorn on
127.0.0.1, the vLLM-protocol fake engine, and ports that refuse connections (nothing listening)."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time

import httpx
import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, MODEL, free_port, running

import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.serve.engines.base import EngineError
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.pool import ReplicaPool
from recipe.tokenizer import load_tokenizer

IDS = load_tokenizer().encode_with_special_tokens("Fine." + EOS)
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none"}
FAST = ServeConfig(probe_seconds=0.2, warm=False, gc_freeze=False)


def _dead() -> str:
    """An engine spec whose port refuses connections (nothing listens there)."""
    return f"vllm+http://127.0.0.1:{free_port()}"


def test_health_is_not_ok_while_the_only_engine_is_unreachable_and_the_failure_is_logged(caplog):
    """``/health`` said ``ok`` with the only engine unreachable, while every request was a 502 that
    nothing logged."""
    spec = _dead()
    with caplog.at_level(logging.WARNING), running(recipe.serve.app(engines=[spec + "?name=gone"], config=FAST)) as s:
        assert httpx.get(f"{s.url}/health/live").status_code == 200
        for path in ("/health", "/health/ready"):
            r = httpx.get(f"{s.url}{path}")
            assert r.status_code == 503 and r.json()["status"] == "unavailable"
            assert r.json()["replicas"][0]["name"] == "gone" and r.json()["replicas"][0]["reachable"] is False
        r = httpx.post(f"{s.url}/v1/chat/completions", json=CHAT, timeout=20)
        assert r.status_code == 502
        rid = r.headers["x-request-id"]
    failures = [rec.getMessage() for rec in caplog.records if rid in rec.getMessage()]
    assert len(failures) == 1 and "gone" in failures[0] and "unreachable" in failures[0]


def test_a_refused_connection_is_resent_to_another_replica_and_the_dead_ones_are_routed_around():
    """One live replica of three: 30 requests once went 14 to the dead one, 14 to one never up and 2
    to the live one, the refused ones failing; now every request is answered by the live one, and a
    dead replica is tried at most once per ejection."""
    seen = Seen()
    with running(APPS["vllm"](Script(IDS), seen)) as fake:
        engines = [f"{_dead()}?name=dead-a", f"vllm+{fake.url}?name=live", f"{_dead()}?name=dead-b"]
        with running(recipe.serve.app(engines=engines, config=ServeConfig(probe_seconds=60, warm=False))) as s:
            start = time.monotonic()
            with httpx.Client(timeout=20) as client:
                answers = [client.post(f"{s.url}/v1/chat/completions", json={**CHAT, "messages": [
                    {"role": "user", "content": f"Question {i}?"}]}) for i in range(30)]
            elapsed = time.monotonic() - start
            assert [a.status_code for a in answers] == [200] * 30
            assert {a.headers["x-recipe-replica"] for a in answers} == {"live"}
            assert len(seen.bodies) == 30
            pool = s.state.pool
            # ejected for 1 s, then 2, 4 …: a dead replica is tried again only when its backoff ends
            assert all(1 <= r.failures <= 1 + math.log2(elapsed + 1) for r in pool.replicas if r.name != "live")
            deadline = time.monotonic() + 2  # (the last handler ends just after its answer's last byte)
            while any(r.in_flight for r in pool.replicas) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert [r.in_flight for r in pool.replicas] == [0, 0, 0]
            ready = httpx.get(f"{s.url}/health")
            assert ready.status_code == 200 and ready.json()["status"] == "ok"
            assert {r["name"]: r["reachable"] for r in ready.json()["replicas"]} == {"dead-a": False, "live": True, "dead-b": False}


def test_an_ejected_replica_that_answers_its_probe_is_readmitted():
    class Pinged(ReplayEngine):
        up = False

        async def ping(self) -> bool:
            return self.up

    async def go() -> None:
        dead, live = Pinged(load_turns([{"ids": IDS}])), ReplayEngine(load_turns([{"ids": IDS}]))
        dead.name, live.name = "a", "b"
        pool = ReplicaPool([dead, live])
        a = pool.replicas[0]
        a.in_flight = 1
        refused = EngineError("unavailable", "refused", connect_failed=True)
        assert pool.failover(a, refused, set()) is pool.replicas[1]
        assert (a.in_flight, pool.replicas[1].in_flight) == (0, 1)  # the request's count moved with it
        assert a.ejected() and pool.available() == [pool.replicas[1]]
        pool.failed(a, refused)
        assert a.failures == 2 and a.ejected_until - time.monotonic() > 1.5  # backoff doubled
        assert pool.failover(pool.replicas[1], refused, {"a"}) is None  # never back to the one that failed
        await pool.probe()  # still down: still out
        assert a.ejected() and a.reachable is False and not pool.ready() is False
        dead.up = True
        await pool.probe()  # it answers: readmitted at once, its backoff forgotten
        assert not a.ejected() and a.failures == 0 and a.reachable is True and pool.available() == pool.replicas

    asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
def test_a_refused_connection_is_resent_for_several_choices_too(stream):
    seen = Seen()
    with running(APPS["vllm"](Script(IDS), seen)) as fake:
        engines = [f"{_dead()}?name=dead", f"vllm+{fake.url}?name=live"]
        with running(recipe.serve.app(engines=engines, config=ServeConfig(probe_seconds=60, warm=False))) as s:
            s.state.pool.replicas[1].served = 5  # the dead one is the least served: tried first
            r = httpx.post(f"{s.url}/v1/chat/completions", json={**CHAT, "n": 2, "stream": stream}, timeout=20)
            assert r.status_code == 200 and r.headers["x-recipe-replica"] == "live"
            assert s.state.pool.replicas[0].ejected()
