"""Hostile store conditions: a real redis-server hung (SIGSTOP), down, and back; the event loop never
waits on the store, and nothing is reported stored that was not. Real uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import redis
from serve_support import EOS, MODEL, redis_server, running, sse_events

import recipe.serve
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.store.redis_store import RedisStore


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@contextmanager
def hung(url: str) -> Iterator[None]:
    """The redis-server behind ``url`` stopped (SIGSTOP: connections accepted by the kernel, never
    answered) for the block, then continued."""
    pid = redis.Redis.from_url(url).info()["process_id"]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _app(store: RedisStore) -> object:
    return recipe.serve.app(ReplayEngine(load_turns([{"text": "Fine." + EOS}])), store=store)


@pytest.mark.parametrize("field", ["previous_response_id", "previous\\u005fresponse_id"])
def test_a_hung_store_never_holds_the_event_loop(redis_url, field):
    """The lookup went to a thread only when the raw bytes held ``previous_response_id``; the JSON
    escape ``previous\\u005fresponse_id`` kept it on the loop, and every client waited for Redis."""
    store = RedisStore.from_url(redis_url, socket_timeout=4.0)
    with running(_app(store)) as s:
        body = ('{"model": "%s", "input": "More?", "%s": "resp_abc"}' % (MODEL, field)).encode()
        answers: list[httpx.Response] = []
        with hung(redis_url):
            t = threading.Thread(target=lambda: answers.append(httpx.post(
                f"{s.url}/v1/responses", content=body, headers={"content-type": "application/json"}, timeout=20)))
            t.start()
            time.sleep(0.3)  # the request is waiting on Redis now
            start = time.perf_counter()
            health = httpx.get(f"{s.url}/health", timeout=10)
            took = time.perf_counter() - start
            t.join(20)
        assert health.status_code == 200
        assert took < 2.0, f"/health waited {took:.2f} s behind a store lookup"
        assert answers[0].status_code == 503 and answers[0].json()["error"]["code"] == "store_unavailable"


@pytest.mark.parametrize("stream", [False, True])
def test_a_turn_the_store_failed_to_save_is_answered_store_false(redis_url, stream):
    """With the store hung, a new turn answered 200 with ``"store": true`` (streamed: in
    ``response.completed``), and once the store was back ``GET`` was a 404: now the final response
    says ``store: false``, which is what ``GET`` then confirms."""
    store = RedisStore.from_url(redis_url, socket_timeout=0.5)
    with running(_app(store)) as s:
        body = {"model": MODEL, "input": "Hi", "reasoning": {"effort": "none"}, "stream": stream}
        with hung(redis_url):
            r = httpx.post(f"{s.url}/v1/responses", json=body, timeout=20)
        assert r.status_code == 200
        if stream:
            events = [(e, json.loads(d)) for e, d in sse_events(r.content)]
            final = [d["response"] for e, d in events if e == "response.completed"]
            assert len(final) == 1
            final = final[0]
            assert [d["response"]["store"] for e, d in events if e == "response.created"] == [True]
        else:
            final = r.json()
        assert final["store"] is False and final["output"][0]["content"][0]["text"] == "Fine."
        got = httpx.get(f"{s.url}/v1/responses/{final['id']}", timeout=10)  # the store is back
        assert got.status_code == 404
        assert "recipe_store_errors_total 1.0" in httpx.get(f"{s.url}/metrics").text
        # the same request with the store up is stored, and says so
        r = httpx.post(f"{s.url}/v1/responses", json={**body, "stream": False}, timeout=20)
        assert r.json()["store"] is True
        assert httpx.get(f"{s.url}/v1/responses/{r.json()['id']}", timeout=10).status_code == 200
