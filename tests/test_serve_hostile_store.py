"""Hostile store conditions: a real redis-server hung (SIGSTOP), down, and back; the event loop never
waits on the store, and nothing is reported stored that was not. Real uvicorn on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import redis
from serve_support import EOS, MODEL, redis_server, running

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
    store = RedisStore.from_url(redis_url, socket_timeout=2.0)
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
        assert took < 0.5, f"/health waited {took:.2f} s behind a store lookup"
        assert answers[0].status_code == 503 and answers[0].json()["error"]["code"] == "store_unavailable"
