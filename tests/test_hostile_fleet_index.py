"""Hostile KV-event publishers and a hostile Redis against the fleet's index (real redis-server).

Found here and fixed: a ``BlockStored`` whose ``extra_keys`` entry was a number or an object (``[5]``,
``[{"a": 1}]``) passed the batch check and then raised a ``TypeError`` / ``KeyError`` in the hash
check, which the subscriber took for a socket failure: its sockets closed, the replica left the exact
view and was followed again only five seconds later. It is now a malformed batch (a resync, logged).
And an index hash that another writer (another tenant of a shared Redis, an older version) filled
with a value that is not an expiry, or a field name that is not UTF-8, made every route that read it a
500 ``ValueError``; such an entry is now no entry. The properties: whatever arrives (gaps, rewinds,
duplicates, garbage, valid batches), the subscriber never raises, the index holds exactly the blocks
its state says, and that state is what the engine reported since the last resync. Bounded in count
and time; loopback only.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

msgpack = pytest.importorskip("msgpack")

from recipe.cache.index import MemoryPrefixIndex, PrefixIndexUnavailable, RedisPrefixIndex  # noqa: E402
from recipe.serve.config import ServeConfig  # noqa: E402
from recipe.serve.kv_events import EVENTS_NAMESPACE, KVEventsSource, KVEventSubscriber, MemorySink  # noqa: E402
from recipe.serve.kv_wire import MalformedBatch, block_key, decode_batch  # noqa: E402
from recipe.serve.server import app  # noqa: E402
from hostile_support import cpu_between_wakeups  # noqa: E402
from serve_support import EOS, redis_server, running  # noqa: E402

BS = 4
_KEYS = list(range(1, 25))  # block hashes the strategies draw from (ints, vLLM's default form)


def _stored(hashes: list[int], extra: object = None) -> dict[str, object]:
    event: dict[str, object] = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None,
                                "token_ids": [7] * (BS * len(hashes)), "block_size": BS, "medium": "GPU"}
    if extra is not None:
        event["extra_keys"] = extra
    return event


def _subscriber() -> tuple[KVEventSubscriber, MemoryPrefixIndex]:
    index = MemoryPrefixIndex()
    sub = KVEventSubscriber("r", KVEventsSource("tcp://127.0.0.1:9"), MemorySink(index))
    sub.connected = True
    sub.verified = 64  # the hash check is about real engines' hashes; these are made up
    return sub, index


def _indexed(index: MemoryPrefixIndex) -> set[bytes]:
    keys = [block_key(h) for h in _KEYS]
    return {k for k in keys if index.scores(EVENTS_NAMESPACE, [k]).get("r")}


@pytest.mark.parametrize("extra", [[5], [{"a": 1}], ["salt"], [b"x"], 7])
def test_odd_extra_keys_are_a_malformed_batch_not_a_socket_failure(extra):
    sub, index = _subscriber()
    sub.verified = 0  # the hash check runs (it raised on these)
    asyncio.run(sub._batch(0, msgpack.packb([1.0, [_stored([1])], None]), fill=False))
    asyncio.run(sub._batch(1, msgpack.packb([1.0, [_stored([2], extra)], None]), fill=False))
    assert sub.resyncs.get("malformed") == 1 and sub.connected
    assert sub.blocks.held == set() and _indexed(index) == set()
    with pytest.raises(MalformedBatch):
        decode_batch(msgpack.packb([1.0, [_stored([2], extra)], None]))


_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=5)
                     | st.binary(max_size=9), lambda c: st.lists(c, max_size=4) | st.dictionaries(
                         st.one_of(st.text(max_size=12), st.integers(-(2**63), 2**63 - 1)), c, max_size=4), max_leaves=16)
_names = st.sampled_from(["type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "medium", "group_idx",
                          "extra_keys", "lora_id"])
_event = st.one_of(
    st.dictionaries(_names, _json, max_size=6).map(lambda d: {"type": "BlockStored", **d}),
    st.dictionaries(_names, _json, max_size=6).map(lambda d: {**d, "type": "BlockRemoved"}),
    st.lists(_json, max_size=8).map(lambda xs: ["BlockStored", *xs]),
    st.just({"type": "AllBlocksCleared"}), _json)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.one_of(st.tuples(_json, st.lists(_event, max_size=4), _json).map(list), _json, st.binary(max_size=40)))
def test_any_payload_decodes_or_is_malformed(raw):
    payload = raw if isinstance(raw, bytes) else msgpack.packb(raw, use_bin_type=True)
    try:
        batch = decode_batch(payload)
    except MalformedBatch:
        return
    for ev in batch.events:  # what it kept is well formed
        for k in getattr(ev, "keys", ()):
            assert isinstance(k, bytes) and len(k) == 8


# one step of a hostile publisher: a valid batch, or garbage, at the next sequence number or not
_valid = st.lists(st.one_of(
    st.lists(st.sampled_from(_KEYS), min_size=1, max_size=4).map(lambda hs: ("stored", hs)),
    st.lists(st.sampled_from(_KEYS), min_size=1, max_size=4).map(lambda hs: ("removed", hs)),
    st.just(("cleared", []))), min_size=1, max_size=4)
_step = st.tuples(st.sampled_from([1, 1, 1, 1, 0, -1, 2, 5]),
                  st.one_of(_valid.map(lambda evs: ("valid", evs)),
                            st.sampled_from([b"\xc1", b"", msgpack.packb([1.0]), msgpack.packb([1.0, [_stored([1], [5])]]),
                                             msgpack.packb([1.0, [{"type": "BlockStored", "block_hashes": [-1]}]])]).map(
                                lambda g: ("garbage", g))))


def _encode(evs: list[tuple[str, list[int]]]) -> bytes:
    out = []
    for kind, hs in evs:
        if kind == "stored":
            out.append(_stored(hs))
        elif kind == "removed":
            out.append({"type": "BlockRemoved", "block_hashes": hs, "medium": "GPU"})
        else:
            out.append({"type": "AllBlocksCleared"})
    return msgpack.packb([time.time(), out, None])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(_step, min_size=1, max_size=25))
def test_a_hostile_publisher_never_corrupts_the_index(steps):
    """Gaps (no replay socket: resync), rewinds and duplicates (skipped), garbage (resync) and valid
    batches in any order: after every step the index holds exactly the subscriber's blocks, and those
    are what the valid batches since the last resync left."""
    sub, index = _subscriber()

    async def go() -> None:
        seq, ref = -1, set()
        expected = None
        for delta, (kind, data) in steps:
            seq = max(seq + delta, 0)
            if expected is not None and seq < expected:
                pass  # already applied: skipped
            else:
                if expected is not None and seq > expected:
                    ref = set()  # a gap the replay cannot fill: resync
                expected = seq + 1
                if kind == "garbage":
                    ref = set()
                else:
                    for ev, hs in data:
                        keys = {block_key(h) for h in hs}
                        ref = set() if ev == "cleared" else ref | keys if ev == "stored" else ref - keys
            await sub._batch(seq, data if kind == "garbage" else _encode(data), fill=True)
            assert sub.blocks.held == ref
            assert _indexed(index) == ref

    asyncio.run(go())


# ---- a hostile Redis

def _garbage(url: str, pattern: bytes, string: bool = True) -> list[bytes]:
    """Rewrite every index hash matching ``pattern``: a value that is no expiry, a field name that is
    not UTF-8, and (``string``) the first key turned into a plain string (another writer's garbage)."""
    import redis

    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter(match=pattern, count=1000))
    for k in keys:
        for f in r.hkeys(k):
            r.hset(k, f, b"not-an-expiry")
        r.hset(k, b"\xff\xfe", b"1e300")
        r.hset(k, "b", b"inf\x00")
    if keys and string:
        r.delete(keys[0])
        r.set(keys[0], b"a string where a hash was")
    r.close()
    return keys


def test_garbage_in_the_index_hashes_is_no_entry():
    with redis_server() as url:
        index = RedisPrefixIndex.from_url(url)
        keys = [bytes([i]) * 32 for i in range(4)]
        index.put("ns", keys, "a")
        assert index.scores("ns", keys) == {"a": 4}
        assert len(_garbage(url, b"ns:*", string=False)) == 4
        assert index.scores("ns", keys) == {}
        assert index.evict("ns", keys, "a") == 0
        import redis

        redis.Redis.from_url(url).set(b"ns:" + keys[0], b"a string")  # a Redis error: the route's fallback
        with pytest.raises(PrefixIndexUnavailable):
            index.scores("ns", keys)


def test_routes_read_garbage_in_a_shared_index_as_no_cache():
    """Two replicas over a Redis index that another writer filled with garbage: the request is
    answered (it was a 500 ValueError) and claims no cached prefix."""
    from recipe.serve.engines.replay import ReplayEngine, load_turns

    body = {"model": "deepseek-v4-pro", "messages": [{"role": "system", "content": "You are terse. " * 60},
                                                     {"role": "user", "content": "Hi"}], "reasoning_effort": "none"}
    with redis_server() as url:
        engines = [ReplayEngine(load_turns([{"text": "Fine." + EOS}])) for _ in range(2)]
        with running(app(engines=engines, index=RedisPrefixIndex.from_url(url),
                         config=ServeConfig(warm=False, metrics_interval=0, probe_seconds=None))) as s:
            assert httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
            assert _garbage(url, b"recipe:pc:*", string=False)
            r = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["choices"][0]["message"]["content"] == "Fine."


def test_a_batch_of_tens_of_thousands_of_blocks_does_not_hold_the_event_loop():
    """A publisher's batch of 65,536 blocks (what an engine with a large cache may send when a long
    prompt is stored or an eviction sweeps, or a hostile publisher floods; 1.2 MB of msgpack) was
    decoded, applied and indexed in one run on the event loop (0.2-0.25 s of its CPU time on a loaded
    2-core machine; more for larger batches). The property: no run of the loop's work reaches 100 ms,
    and the index holds exactly the blocks after each batch."""
    n = 65_536
    hashes = list(range(1, n + 1))
    stored = msgpack.packb([1.0, [{"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None,
                                   "token_ids": [5] * (n * 16), "block_size": 16, "medium": "GPU"}], None])
    removed = msgpack.packb([1.0, [{"type": "BlockRemoved", "block_hashes": hashes[: n // 2], "medium": "GPU"}], None])
    cleared = msgpack.packb([1.0, [{"type": "AllBlocksCleared"}], None])
    keys = [block_key(h) for h in hashes]
    sub, index = _subscriber()

    async def go() -> list[float]:
        worst: list[float] = []
        for seq, payload in enumerate([stored, removed, stored, cleared, stored]):
            stop, lateness = asyncio.Event(), [0.0]

            async def probe() -> None:  # the loop thread's CPU time between wake-ups (hostile_support)
                while not stop.is_set():
                    lateness[0] = max(lateness[0], (await cpu_between_wakeups())[0])

            task = asyncio.create_task(probe())
            await asyncio.sleep(0.02)
            await sub._batch(seq, payload, fill=False)
            stop.set()
            await task
            worst.append(lateness[0])
            held = {k for k in keys if index.scores(EVENTS_NAMESPACE, [k]).get("r")}
            want = set(keys[n // 2:]) if seq == 1 else set() if seq == 3 else set(keys)
            assert held == want == sub.blocks.held, seq
        return worst

    import gc

    gc.collect()
    gc.freeze()  # as recipe serve does at startup (ServeConfig.gc_freeze): the test process's own objects
    try:         # would otherwise make each full collection on the loop cost what this test measures
        worst = asyncio.run(go())
    finally:
        gc.unfreeze()
    assert max(worst) < 0.1, worst


def test_a_registry_member_that_is_not_utf8_is_removed_like_any_other():
    """Another writer's frontend id that is not UTF-8 (no snapshot) was read with U+FFFD in it, its
    key looked up under that other name and removed under it too: it stayed in the registry for
    ever, looked up on every sync. Members are now the bytes Redis holds."""
    import uuid

    import redis

    from recipe.cache.redis_client import connect
    from recipe.serve.shared_load import SharedLoad

    with redis_server() as url:
        async def go() -> None:
            load = SharedLoad(connect(url, asyncio=True), prefix=f"t-{uuid.uuid4().hex}", frontend="b")
            raw = redis.Redis.from_url(url)
            try:
                raw.sadd(load.registry, b"\xff\xfe", "gone")
                raw.set(load.key_of("").encode() + b"\xfe\xff", b'{"r": 4}', px=5000)  # a live one, not UTF-8
                raw.sadd(load.registry, b"\xfe\xff")
                assert await load.sync({"r": 1}) == {"r": 4} and load.frontends == 1
                assert raw.smembers(load.registry) == {b"b", b"\xfe\xff"}
            finally:
                raw.close()
                await load.aclose()

        asyncio.run(go())
