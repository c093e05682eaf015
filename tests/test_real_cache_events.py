"""KV events from a real vLLM (tests/real_engine.py: vLLM 0.32 on the CPU with ``--kv-events-config``,
``--prefix-caching-hash-algo sha256_cbor`` and ``PYTHONHASHSEED``): the block hashes it publishes for
a prompt are recipe's vLLM keys for the same ids (with and without a cache salt), the index holds
them per replica, and after ``/reset_prefix_cache`` (vLLM publishes ``AllBlocksCleared`` with its
next scheduler step) the index drops them; through ``recipe serve`` a tenant's request lands in the
index under the tenant's keys and ``/metrics`` names the replica's view. (The module's name sorts
before test_real_engine.py, which kills its engine: this one runs on the session engine first.)"""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest
from real_engine import HASH_SEED, SERVED, VLLMServer, require_vllm
from serve_support import running, until, wait_until

import recipe.serve
from recipe.cache.index import MemoryPrefixIndex
from recipe.serve.config import ServeConfig
from recipe.serve.kv_events import EVENTS_NAMESPACE, KVEventsSource, KVEventSubscriber, MemorySink
from recipe.serve.tenants import Tenant, Tenants, derive_salt

pytest.importorskip("zmq")
pytestmark = pytest.mark.real_engine
require_vllm(module=True)


def _complete(engine: VLLMServer, ids: list[int], salt: str | None = None) -> dict:
    body = {"model": SERVED, "prompt": ids, "max_tokens": 1, "temperature": 0}
    if salt:
        body["cache_salt"] = salt
    r = httpx.post(engine.url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 120_000) for _ in range(n)]


def test_published_hashes_are_recipes_keys_and_a_reset_drops_them(vllm: VLLMServer):
    async def main():
        index = MemoryPrefixIndex()
        source = KVEventsSource(vllm.kv_events, vllm.kv_replay, "kv", HASH_SEED)
        sub = KVEventSubscriber("vllm", source, MemorySink(index))
        sub.start()
        await until(lambda: sub.connected, 30)
        plain, salted = _prompt(600, 1), _prompt(600, 2)
        await asyncio.to_thread(_complete, vllm, plain)
        await asyncio.to_thread(_complete, vllm, salted, "tenant-x")
        await until(lambda: sub.block_size is not None and len(sub.lookup_keys(plain, None)) > 0
                    and all(k in sub.blocks.held for k in sub.lookup_keys(salted, "tenant-x")), 30)
        size = sub.block_size
        for ids, salt in ((plain, None), (salted, "tenant-x")):
            keys = sub.lookup_keys(ids, salt)  # recipe's vLLM keys of the ids (vLLM 0.32's tagged salt)
            assert len(keys) == len(ids) // size > 0
            assert all(k in sub.blocks.held for k in keys)  # each one a hash the engine published
            assert index.scores(EVENTS_NAMESPACE, keys) == {"vllm": len(keys)}
        # the salt changes every key: the unsalted keys of the salted prompt are not held
        assert not any(k in sub.blocks.held for k in sub.lookup_keys(salted, None))
        assert sub.verified >= 2 and not sub.mismatch and sub.exact
        # the engine drops its cache: AllBlocksCleared comes with its next step
        for _ in range(50):
            r = await asyncio.to_thread(httpx.post, vllm.url + "/reset_prefix_cache", timeout=30)
            if r.status_code == 200 and r.json().get("success", True) is not False:
                break
            await asyncio.sleep(0.2)  # (refused while a request runs)
        assert r.status_code == 200, r.text
        await asyncio.to_thread(_complete, vllm, _prompt(10, 3))
        await until(lambda: index.scores(EVENTS_NAMESPACE, sub.lookup_keys(plain, None)) == {}, 30)
        assert sub.resyncs.get("cleared", 0) >= 1 and not sub.blocks.held
        assert index.scores(EVENTS_NAMESPACE, sub.lookup_keys(salted, "tenant-x")) == {}
        await sub.aclose()

    asyncio.run(main())


def test_recipe_serve_indexes_a_tenants_prompt_from_the_engines_events(vllm: VLLMServer):
    spec = (f"vllm+{vllm.url}?model={SERVED}&name=events&kv_events={vllm.kv_events}&kv_replay={vllm.kv_replay}"
            f"&kv_topic=kv&kv_hash_seed={HASH_SEED}")
    other = f"vllm+{vllm.url}?model={SERVED}&name=estimate"  # the same engine, followed without events
    salt = derive_salt("a")
    app = recipe.serve.app(engines=[spec, other], config=ServeConfig(), tenants=Tenants({"key-a": Tenant("a", salt)}))
    with running(app) as s:
        pool = s.state.pool
        sub = pool.get("events").events
        assert wait_until(lambda: sub.connected, 30)
        body = {"model": "deepseek-v4-flash", "max_tokens": 1, "temperature": 0,
                "messages": [{"role": "user", "content": "kv events " * 300}]}
        r = httpx.post(f"{s.url}/v1/chat/completions", json=body, headers={"Authorization": "Bearer key-a"}, timeout=120)
        assert r.status_code == 200, r.text
        ids = recipe.prepare(body).token_ids
        wait_until(lambda: sub.block_size and sub.lookup_keys(ids, salt)
                   and all(k in sub.blocks.held for k in sub.lookup_keys(ids, salt)), 30)
        keys = sub.lookup_keys(ids, salt)
        assert keys and all(k in sub.blocks.held for k in keys)
        metrics = httpx.get(f"{s.url}/metrics").text
        assert 'recipe_replica_cache_view{replica="events",view="events"} 1.0' in metrics
        assert 'recipe_replica_cache_view{replica="estimate",view="estimate"} 1.0' in metrics
