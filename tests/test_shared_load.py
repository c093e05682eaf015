"""The in-flight counts a fleet's frontends share through Redis (recipe/serve/shared_load.py), on a real
``redis-server`` (and a real three-node Redis Cluster), and the pool routing on them.

Each frontend sees the sum of the *other* live frontends' counts; one that stops syncing (killed)
is gone within the TTL; Redis failing never fails routing; every key lies in one hash slot, and the
index, the store and the shared load all run on a Redis Cluster.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.cache.index import RedisPrefixIndex
from recipe.cache.keys import KeySpec, block_keys
from recipe.cache.redis_client import connect
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.pool import ReplicaPool
from recipe.serve.shared_load import SharedLoad, SharedLoadUnavailable
from recipe.store.conversations import StoredResponse, StoreUnavailable
from recipe.store.redis_store import RedisStore
from serve_support import EOS, free_port, redis_process, redis_program, redis_server

redis = pytest.importorskip("redis") if os.environ.get("CI") != "true" else __import__("redis")
from redis.crc import key_slot  # noqa: E402


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def _load(url: str, frontend: str, prefix: str, **kw) -> SharedLoad:
    return SharedLoad(connect(url, asyncio=True), prefix=prefix, frontend=frontend, **kw)


async def _closing(*loads: SharedLoad) -> None:
    for s in loads:
        await s.aclose()


def test_each_frontend_sees_the_sum_of_the_others_counts_never_its_own(redis_url):
    async def go() -> None:
        p = f"t-{uuid.uuid4().hex}"
        a, b, c = (_load(redis_url, n, p) for n in "abc")
        try:
            await a.sync({"r0": 2, "r1": 0, "r2": 1})
            await b.sync({"r1": 3})
            assert b.others == {"r0": 2, "r2": 1} and b.frontends == 1
            assert await c.sync({"r0": 1}) == {"r0": 2, "r1": 3, "r2": 1} and c.frontends == 2
            assert await a.sync({"r0": 0}) == {"r0": 1, "r1": 3}  # a's own counts never come back to it
            assert await b.sync({}) == {"r0": 1}
        finally:
            await _closing(a, b, c)

    asyncio.run(go())


def test_a_frontend_that_stops_syncing_is_forgotten_within_its_ttl(redis_url):
    async def go() -> None:
        p = f"t-{uuid.uuid4().hex}"
        a, b = _load(redis_url, "a", p, ttl=0.4, interval=0.05), _load(redis_url, "b", p, ttl=0.4, interval=0.05)
        raw = redis.Redis.from_url(redis_url)
        try:
            await a.sync({"r0": 5})
            assert 0 < raw.pttl(a.key) <= 400
            assert await b.sync({}) == {"r0": 5}
            time.sleep(0.6)  # a is "killed": it never syncs again
            assert await b.sync({}) == {} and b.frontends == 0
            assert raw.smembers(b.registry) == {b"b"}  # the dead member was removed from the registry
            assert raw.exists(a.key) == 0
        finally:
            raw.close()
            await _closing(a, b)

    asyncio.run(go())


def test_a_clean_leave_removes_the_counts_at_once(redis_url):
    async def go() -> None:
        p = f"t-{uuid.uuid4().hex}"
        a, b = _load(redis_url, "a", p), _load(redis_url, "b", p)
        try:
            await a.sync({"r0": 4})
            assert await b.sync({}) == {"r0": 4}
            await a.leave()
            assert await b.sync({}) == {} and b.frontends == 0
        finally:
            await _closing(a, b)

    asyncio.run(go())


def test_an_unreadable_snapshot_counts_as_none(redis_url):
    async def go() -> None:
        p = f"t-{uuid.uuid4().hex}"
        b = _load(redis_url, "b", p)
        raw = redis.Redis.from_url(redis_url)
        try:
            for who, value in (("x", b"not json"), ("y", b"[1, 2]"), ("z", b'{"r0": -3, "r1": 1.5, "r2": "7", "r3": 2}')):
                raw.set(b.key_of(who), value, px=5000)
                raw.sadd(b.registry, who)
            assert await b.sync({}) == {"r3": 2} and b.frontends == 3
        finally:
            raw.close()
            await b.aclose()

    asyncio.run(go())


@settings(max_examples=20, deadline=None)
@given(counts=st.lists(st.dictionaries(st.text(min_size=1, max_size=12), st.integers(0, 1000), max_size=4),
                       min_size=1, max_size=5))
def test_property_each_view_is_the_sum_of_the_other_frontends(redis_url, counts):
    # any replica names (unicode, quotes, braces, colons): the sums stay exact

    async def go() -> None:
        p = f"t-{uuid.uuid4().hex}"
        loads = [_load(redis_url, f"f{i}", p) for i in range(len(counts))]
        try:
            for s, c in zip(loads, counts):
                await s.sync(c)
            for i, s in enumerate(loads):
                want: dict[str, int] = {}
                for j, c in enumerate(counts):
                    for name, n in c.items():
                        if j != i and n:
                            want[name] = want.get(name, 0) + n
                assert await s.sync(counts[i]) == want
        finally:
            await _closing(*loads)

    asyncio.run(go())


def test_redis_down_keeps_the_last_sums_for_the_ttl_then_drops_them():
    now = [100.0]
    errors: list[int] = []
    shared = SharedLoad(connect(f"redis://127.0.0.1:{free_port()}/0", asyncio=True, socket_connect_timeout=0.2),
                        interval=0.01, ttl=1.0, frontend="a", clock=lambda: now[0])
    pool = ReplicaPool([ReplayEngine(load_turns([{"text": "x" + EOS}]), name=f"r{i}") for i in range(2)])
    shared.others, shared.frontends, shared.synced_at = {"r0": 3}, 1, 100.0  # a good sync just before Redis went down

    async def go() -> None:
        with pytest.raises(SharedLoadUnavailable):
            await shared.sync({"r0": 1})
        task = asyncio.create_task(shared.run(pool.replicas, lambda: errors.append(1)))
        try:
            for _ in range(500):
                await asyncio.sleep(0.01)
                if len(errors) >= 2:
                    break
            assert [r.others for r in pool.replicas] == [3, 0]  # kept while younger than the ttl
            now[0] = 101.5
            n = len(errors)
            for _ in range(500):
                await asyncio.sleep(0.01)
                if len(errors) > n + 1:
                    break
            assert [r.others for r in pool.replicas] == [0, 0] and shared.frontends == 0
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await shared.aclose()

    asyncio.run(go())
    assert shared.errors == len(errors) >= 3


async def _until(check, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_sync_that_fails_for_any_reason_never_stops_the_loop(caplog):
    # a client that breaks in a way no Redis error covers (a bug): the loop goes on, and the last
    # sums are dropped once older than the ttl rather than kept for ever
    class Broken:
        def pipeline(self, transaction: bool = False) -> None:
            raise KeyError("boom")

    now = [0.0]
    shared = SharedLoad(Broken(), interval=0.01, ttl=1.0, frontend="a", clock=lambda: now[0])
    shared.others, shared.synced_at = {"r0": 4}, 0.0
    pool = ReplicaPool([ReplayEngine(load_turns([{"text": "x" + EOS}]), name=f"r{i}") for i in range(2)])

    async def go() -> None:
        task = asyncio.create_task(shared.run(pool.replicas))
        try:
            await _until(lambda: shared.errors >= 3 or task.done())
            assert pool.replicas[0].others == 4 and not task.done()
            now[0] = 2.0
            n = shared.errors
            await _until(lambda: shared.errors >= n + 2 or task.done())
            assert pool.replicas[0].others == 0 and not task.done()
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    warnings = [r for r in caplog.records if "sync failed: KeyError('boom')" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is not None  # logged once, with its traceback


def test_every_key_lies_in_one_hash_slot():
    s = SharedLoad(object(), prefix="fleet:a")
    keys = [s.registry, s.key, *(s.key_of(f) for f in ("x", "host-1-abcd", "日本", "a:b:c"))]
    assert {key_slot(k.encode()) for k in keys} == {key_slot(b"fleet:a")}
    assert all(k.startswith("{fleet:a}:") for k in keys)
    for bad in ({"prefix": "a{b}"}, {"frontend": "x}"}, {"interval": 0}, {"ttl": 0.1, "interval": 0.1}):
        with pytest.raises(ValueError):
            SharedLoad(object(), **bad)


def test_routing_counts_the_other_frontends_requests():
    pool = ReplicaPool([ReplayEngine(load_turns([{"text": "x" + EOS}]), name=f"r{i}") for i in range(3)])
    prompt = list(range(1000, 1300))

    async def go() -> str:
        return (await pool.route(prompt, None)).replica.name

    assert asyncio.run(go()) == "r0"  # idle: the first
    pool.replicas[0].others, pool.replicas[1].others = 2, 1
    assert asyncio.run(go()) == "r2"  # r0 now holds the prompt, but 2 requests elsewhere cost more than 300 tokens
    pool.replicas[2].in_flight = 5
    assert asyncio.run(go()) == "r1"
    assert [r.requests for r in pool.replicas] == [2, 1, 5]


# --------------------------------------------------------------------------- Redis Cluster


def _bindable(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@contextmanager
def redis_cluster(nodes: int = 3) -> Iterator[str]:
    """A real Redis Cluster of ``nodes`` masters on 127.0.0.1 (no persistence); yields its
    ``redis+cluster://`` URL. Skips without redis-server / redis-cli (fails under CI=true)."""
    exe = redis_program("redis-cli")
    cli = shutil.which("redis-cli")
    ports: list[int] = []
    while len(ports) < nodes:  # the cluster bus listens on port + 10000
        p = free_port()
        if p + 10000 < 65536 and _bindable(p + 10000) and p not in ports:
            ports.append(p)
    with ExitStack() as stack:
        for p in ports:
            stack.enter_context(redis_process(exe, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                              "--cluster-node-timeout", "5000", port=p))
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        for p in ports:
            c = redis.Redis(port=p)
            while c.cluster("info").get("cluster_state") != "ok":
                assert time.monotonic() < deadline, "the Redis cluster did not come up"
                time.sleep(0.1)
            c.close()
        yield f"redis+cluster://127.0.0.1:{ports[0]}"


def test_index_store_and_shared_load_run_on_a_redis_cluster():
    with redis_cluster() as url:
        from redis.cluster import RedisCluster

        plain = RedisCluster.from_url(url.replace("redis+cluster://", "redis://"))
        try:
            # the cluster refuses a multi-key command across slots (what each of recipe's must avoid)
            assert key_slot(b"a") != key_slot(b"b")
            with pytest.raises(redis.exceptions.RedisClusterException):
                plain.mget(["a", "b"])

            index = RedisPrefixIndex.from_url(url, ttl=60)
            spec = KeySpec(block_size=4)
            keys = block_keys(list(range(400)), spec).keys
            assert len({key_slot(b"recipe:pc:" + k) for k in keys}) > 10  # spread over the cluster
            ns = "recipe:pc:test"
            index.put(ns, keys, "r1")
            index.put(ns, keys[:30], "r2")
            assert index.scores(ns, keys) == {"r1": len(keys), "r2": 30}
            assert index.evict(ns, keys[:10], "r1") == 10
            assert index.evict(ns, keys) == len(keys) - 10 + 30
            assert index.scores(ns, keys) == {}

            store = RedisStore.from_url(url, ttl=60)
            for i in range(20):
                store.save(StoredResponse(f"resp_{i}", None, ({"role": "user", "content": str(i)},), (), "m", i))
            assert [store.load(f"resp_{i}").input_items[0]["content"] for i in range(20)] == [str(i) for i in range(20)]
            assert store.delete("resp_3") and store.load("resp_3") is None

            async def go() -> None:
                a, b = SharedLoad.from_url(url, frontend="a"), SharedLoad.from_url(url, frontend="b")
                try:
                    await a.sync({"r0": 2})
                    assert await b.sync({"r1": 1}) == {"r0": 2}
                    assert await a.sync({"r0": 2}) == {"r1": 1}
                    await a.leave()
                    assert await b.sync({}) == {}
                finally:
                    await _closing(a, b)

            asyncio.run(go())
        finally:
            plain.close()


def test_an_unreachable_cluster_is_a_store_or_index_error_not_a_crash():
    url = f"redis+cluster://127.0.0.1:{free_port()}"
    index = RedisPrefixIndex.from_url(url, socket_connect_timeout=0.2)  # made on first use: no error yet
    store = RedisStore.from_url(url, socket_connect_timeout=0.2)
    from recipe.cache.index import PrefixIndexUnavailable

    with pytest.raises(PrefixIndexUnavailable):
        index.scores("ns", [b"k"])
    with pytest.raises(StoreUnavailable):
        store.load("resp_x")
    with pytest.raises(ValueError):
        RedisStore.from_url("redis+cluster://127.0.0.1:notaport")
